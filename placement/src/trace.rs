//! A placement trace: every [`Input`] a [`Placer`] handled, with its time, and the
//! [`Output`] it gave, as JSON lines; and its replay, which feeds the inputs to a new
//! placer built from the trace's header and checks that every output comes out the same.
//!
//! The channel state of a node is written by the service's transport outside the
//! placer; when recording, the sink notes each change as an [`Input::Channel`] before
//! the input that first sees it, so a replay sees the same states at the same decisions.

use std::io::{BufRead, Write};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::channel::ChannelState;
use super::core::PlacementCore;
use super::node_view::NodeId;
use super::placer::{Input, Output, Placer, PlacerConfig};

/// One line of a trace.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TraceLine {
    /// The first line: how the placer was built.
    Header {
        /// Its settings.
        config: PlacerConfig,
        /// Its nodes, in order.
        nodes: Vec<NodeId>,
    },
    /// An input and the time it was handled at.
    Input {
        /// Time since the driver's epoch.
        at: Duration,
        /// The input.
        input: Input,
    },
    /// The output of the input just before.
    Output(Output),
}

/// Where a recording placer writes its trace.
pub struct TraceSink {
    out: Box<dyn Write + Send>,
    channels: Vec<ChannelState>,
    failed: bool,
}

impl TraceSink {
    /// A sink writing to `out` (buffer it: one line per input and output).
    pub fn new(out: Box<dyn Write + Send>) -> Self {
        Self {
            out,
            channels: Vec::new(),
            failed: false,
        }
    }

    pub(super) fn header(&mut self, config: &PlacerConfig, nodes: impl Iterator<Item = NodeId>) {
        let nodes: Vec<NodeId> = nodes.collect();
        self.channels = vec![ChannelState::default(); nodes.len()];
        self.line(&TraceLine::Header {
            config: config.clone(),
            nodes,
        });
    }

    /// Notes every channel state that changed since the last input.
    pub(super) fn channels(&mut self, at: Duration, core: &PlacementCore) {
        let mut changed = Vec::new();
        for (i, n) in core.nodes().enumerate() {
            let state = n.channel_state();
            match self.channels.get_mut(i) {
                Some(seen) if *seen != state => {
                    *seen = state;
                    changed.push((n.id().into(), state));
                }
                Some(_) => {}
                None => self.channels.push(state),
            }
        }
        for (node, state) in changed {
            self.input(at, &Input::Channel { node, state });
        }
    }

    pub(super) fn input(&mut self, at: Duration, input: &Input) {
        self.line(&TraceLine::Input {
            at,
            input: input.clone(),
        });
    }

    pub(super) fn output(&mut self, output: &Output) {
        self.line(&TraceLine::Output(output.clone()));
    }

    fn line(&mut self, line: &TraceLine) {
        if self.failed {
            return;
        }
        let written = serde_json::to_writer(&mut self.out, line)
            .map_err(std::io::Error::from)
            .and_then(|()| self.out.write_all(b"\n"))
            .and_then(|()| self.out.flush());
        if let Err(e) = written {
            // Never fails the placement; the replay of a cut trace says where it ends.
            tracing::warn!(error = %e, "placement trace: write failed, recording stopped");
            self.failed = true;
        }
    }
}

/// Why a trace could not be replayed.
#[derive(Debug, thiserror::Error)]
pub enum TraceError {
    /// Reading the trace failed.
    #[error("reading the trace failed")]
    Read(#[source] std::io::Error),
    /// A line is not a trace line.
    #[error("trace line {line}: not a trace line")]
    Parse {
        /// 1-based line number.
        line: usize,
        /// The JSON error.
        #[source]
        source: serde_json::Error,
    },
    /// The first line is not a header, or a later one is.
    #[error("trace line {line}: {what}")]
    Shape {
        /// 1-based line number.
        line: usize,
        /// What is out of place.
        what: &'static str,
    },
}

/// What a replay found.
#[derive(Debug, Clone, PartialEq)]
pub struct Replay {
    /// Inputs fed.
    pub inputs: usize,
    /// Outputs compared.
    pub outputs: usize,
    /// Creates sent (decisions), as recorded.
    pub decisions: usize,
    /// Requests answered, as recorded.
    pub answers: usize,
    /// The first difference: line, recorded output, replayed output.
    pub first_mismatch: Option<(usize, Option<Output>, Option<Output>)>,
}

impl Replay {
    /// Whether every output came out as recorded.
    pub fn identical(&self) -> bool {
        self.first_mismatch.is_none()
    }
}

/// Feeds a recorded trace to a new placer and compares the outputs.
pub fn replay(trace: impl BufRead) -> Result<Replay, TraceError> {
    let mut placer: Option<Placer> = None;
    let mut pending: Option<(usize, Option<Output>)> = None;
    let mut r = Replay {
        inputs: 0,
        outputs: 0,
        decisions: 0,
        answers: 0,
        first_mismatch: None,
    };
    let check = |r: &mut Replay, line: usize, got: Option<Output>, want: Option<Output>| {
        match &want {
            Some(Output::SendCreate { .. }) => r.decisions += 1,
            Some(Output::Answer(_)) => r.answers += 1,
            _ => {}
        }
        if want.is_some() {
            r.outputs += 1;
        }
        if got != want && r.first_mismatch.is_none() {
            r.first_mismatch = Some((line, want, got));
        }
    };
    for (i, text) in trace.lines().enumerate() {
        let n = i + 1;
        let text = text.map_err(TraceError::Read)?;
        if text.trim().is_empty() {
            continue;
        }
        let line: TraceLine =
            serde_json::from_str(&text).map_err(|source| TraceError::Parse { line: n, source })?;
        match (line, placer.as_mut()) {
            (TraceLine::Header { config, nodes }, None) => {
                placer = Some(Placer::new(config, nodes))
            }
            (TraceLine::Header { .. }, Some(_)) => {
                return Err(TraceError::Shape {
                    line: n,
                    what: "a second header",
                })
            }
            (_, None) => {
                return Err(TraceError::Shape {
                    line: n,
                    what: "no header before it",
                })
            }
            (TraceLine::Input { at, input }, Some(p)) => {
                if let Some((l, got)) = pending.take() {
                    check(&mut r, l, got, None);
                }
                r.inputs += 1;
                pending = Some((n, p.handle(at, input)));
            }
            (TraceLine::Output(want), Some(_)) => match pending.take() {
                Some((_, got)) => check(&mut r, n, got, Some(want)),
                None => {
                    return Err(TraceError::Shape {
                        line: n,
                        what: "an output without its input",
                    })
                }
            },
        }
    }
    if let Some((l, got)) = pending.take() {
        check(&mut r, l, got, None);
    }
    Ok(r)
}

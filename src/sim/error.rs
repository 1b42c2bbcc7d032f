//! Why a simulation could not run.

use super::budget::EstimatePart;
use crate::profile::ProfileErrors;

/// Why `stampede sim` (or [`simulate`](super::simulate)) could not produce a result.
#[derive(Debug, thiserror::Error)]
pub enum SimError {
    /// The profile could not be loaded or is invalid (every problem, with file:line:col).
    #[error(transparent)]
    Profile(#[from] ProfileErrors),
    /// The profile targets an external API: there is nothing to simulate.
    #[error("placement.external: the simulator needs an embedded placement section")]
    ExternalPlacement,
    /// The workload shape is not simulated.
    #[error("workload.shape.{shape}: {message}")]
    UnsupportedShape {
        /// Shape name (`plan`).
        shape: &'static str,
        /// Why.
        message: String,
    },
    /// A setting is outside what the simulator (or the placement core) accepts.
    #[error("{field}: {message}")]
    Setting {
        /// Dotted path of the setting.
        field: String,
        /// What is wrong with it.
        message: String,
    },
    /// A chaos step cannot be applied.
    #[error("chaos[{index}]: {message}")]
    Chaos {
        /// Position of the step in `chaos:`.
        index: usize,
        /// What is wrong with it.
        message: String,
    },
    /// A `--sweep` argument is malformed.
    #[error("--sweep {arg}: {message}")]
    Sweep {
        /// The argument as given.
        arg: String,
        /// What is wrong with it.
        message: String,
    },
    /// The estimate of the simulation exceeds its budget; nothing was run.
    #[error("{}", over_budget(.figure, .estimate, .limit, .parts))]
    OverBudget {
        /// The budget's flag: `--max-events` or `--max-memory-mb`.
        figure: &'static str,
        /// The estimate, in events or MiB.
        estimate: u64,
        /// The budget, in the same unit.
        limit: u64,
        /// What the estimate is made of, largest first, each naming its profile figure.
        parts: Vec<EstimatePart>,
    },
    /// A run went over its event budget and was stopped.
    #[error("{}", event_budget(.max_events, .virtual_ns, .open, .retries))]
    EventBudget {
        /// The budget of this run (what the command had left).
        max_events: u64,
        /// Virtual time reached.
        virtual_ns: u64,
        /// Requests open when it stopped.
        open: u64,
        /// Placement retries so far.
        retries: u64,
    },
    /// Writing the report or the CSV failed.
    #[error("writing {what}: {source}")]
    Io {
        /// What was being written.
        what: String,
        /// The I/O error.
        source: std::io::Error,
    },
}

impl SimError {
    pub(crate) fn setting(field: impl Into<String>, message: impl Into<String>) -> Self {
        SimError::Setting {
            field: field.into(),
            message: message.into(),
        }
    }
}

fn event_budget(max_events: &u64, virtual_ns: &u64, open: &u64, retries: &u64) -> String {
    let saturated = if *retries > *max_events / 4 {
        ": the cluster looks saturated (creates refused and retried until their deadline)"
    } else {
        ""
    };
    format!(
        "the simulation was stopped at its event budget (--max-events {max_events}) after \
         {:.3} s of virtual time, with {open} requests still open and {retries} retries so \
         far{saturated}; lower the load or give the nodes room, or raise --max-events",
        *virtual_ns as f64 / 1e9
    )
}

fn over_budget(figure: &str, estimate: &u64, limit: &u64, parts: &[EstimatePart]) -> String {
    let unit = if figure == "--max-events" {
        "events"
    } else {
        "MiB"
    };
    let parts = parts
        .iter()
        .map(|p| format!("{} {}", p.what, p.amount))
        .collect::<Vec<_>>()
        .join(", ");
    format!(
        "the simulation would take about {estimate} {unit}, over its budget ({figure} \
         {limit}): {parts}; lower the figure behind the largest part or raise {figure}"
    )
}

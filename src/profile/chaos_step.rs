//! One step of a profile's `chaos:` drill, with its fault typed ([`ChaosFault`]): the
//! fault name and its parameters are checked once, as the profile is parsed, each error
//! at its own field (`chaos[2].params.latency`).

use std::borrow::Cow;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use stampede_node_model::config::FailureCode;
use stampede_node_model::fault::{FaultKind, FaultName, FaultParams};
use stampede_node_model::snapshot::ServiceStatus;

use super::command_action::{CommandAction, DEFAULT_COMMAND_TIMEOUT, MAX_COMMAND_TIMEOUT};
use super::limits::MAX_LATENCY;
use super::types::NodeSelector;

/// What a chaos step does, and through which backend.
#[derive(Debug, Clone, PartialEq)]
pub enum ChaosFault {
    /// A fault applied through the mock-node admin API.
    Node(FaultKind),
    /// `POST /nodes/{nodeID}` `draining` on the placement API (healed with `ready`), as
    /// an operator drains a node in E2B. The node then reports `draining`.
    Drain,
    /// A program run to apply the fault and another to heal it (Nomad, kubectl,
    /// Toxiproxy on a real cluster). What it does is unknown to stampede: the
    /// simulator cannot model it.
    Command(CommandAction),
}

impl ChaosFault {
    /// The step's name: `drain`, `command`, or the mock-node fault kind.
    pub fn name(&self) -> &'static str {
        match self {
            ChaosFault::Node(k) => k.as_str(),
            ChaosFault::Drain => DRAIN,
            ChaosFault::Command(_) => COMMAND,
        }
    }

    /// The fault the node shows: a drain is the `status: draining` it then reports; a
    /// command's effect is unknown (none).
    pub fn node_kind(&self) -> Option<FaultKind> {
        match self {
            ChaosFault::Node(k) => Some(*k),
            ChaosFault::Drain => Some(FaultKind::Status {
                status: ServiceStatus::Draining,
            }),
            ChaosFault::Command(_) => None,
        }
    }
}

/// One scheduled fault of a chaos drill.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "ChaosStepDoc", into = "ChaosStepDoc")]
pub struct ChaosStep {
    /// Offset from the workload's start.
    pub at: Duration,
    /// The fault, with its parameters.
    pub fault: ChaosFault,
    /// Which nodes.
    pub nodes: NodeSelector,
    /// How long before it heals; none = until the end of the workload.
    pub duration: Option<Duration>,
}

impl schemars::JsonSchema for ChaosStep {
    fn schema_name() -> Cow<'static, str> {
        ChaosStepDoc::schema_name()
    }

    fn json_schema(generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
        ChaosStepDoc::json_schema(generator)
    }
}

/// One scheduled fault of a chaos drill.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(rename = "ChaosStep")]
struct ChaosStepDoc {
    /// Offset from the workload's start.
    #[serde(with = "humantime_serde")]
    #[schemars(with = "String")]
    at: Duration,
    /// The fault and its backend: a fault kind of the mock-node admin API; `drain`:
    /// `POST /nodes/{nodeID}` `draining` on the placement API (healed with `ready`), as
    /// an operator drains a node in E2B; `command`: the programs `params.run` and
    /// `params.heal`.
    fault: StepName,
    /// Which nodes.
    nodes: NodeSelector,
    /// How long before it heals; none = until the end of the workload.
    #[serde(default, with = "humantime_serde")]
    #[schemars(with = "Option<String>")]
    duration: Option<Duration>,
    /// Fault parameters: `slow` needs `latency`, `errors` needs `probability` (and may
    /// give `code`), `status` needs `status`; the other kinds take none.
    #[serde(default, skip_serializing_if = "ChaosParams::is_empty")]
    params: ChaosParams,
}

/// A step's fault name: a mock-node [`FaultName`] or `drain`. Read and written as the
/// kebab-case name; the list of names is [`FaultName::ALL`], so a new fault kind needs
/// no change here.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum StepName {
    /// A fault of the mock-node admin API.
    Node(FaultName),
    /// Drained through the placement API.
    Drain,
    /// Programs run by the harness.
    Command,
}

const DRAIN: &str = "drain";
const COMMAND: &str = "command";

impl StepName {
    fn as_str(self) -> &'static str {
        match self {
            StepName::Node(n) => n.as_str(),
            StepName::Drain => DRAIN,
            StepName::Command => COMMAND,
        }
    }

    fn all() -> impl Iterator<Item = StepName> {
        FaultName::ALL
            .into_iter()
            .map(StepName::Node)
            .chain([StepName::Drain, StepName::Command])
    }
}

impl Serialize for StepName {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for StepName {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        StepName::all().find(|n| n.as_str() == text).ok_or_else(|| {
            let names: Vec<&str> = StepName::all().map(StepName::as_str).collect();
            serde::de::Error::custom(format!(
                "unknown fault `{text}` (expected one of {})",
                names.join(", ")
            ))
        })
    }
}

impl schemars::JsonSchema for StepName {
    fn schema_name() -> Cow<'static, str> {
        "StepName".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        let names: Vec<&str> = StepName::all().map(StepName::as_str).collect();
        schemars::json_schema!({
            "description": "A fault kind of the mock-node admin API, `drain` or `command`.",
            "type": "string",
            "enum": names,
        })
    }
}

/// Parameters of a chaos step's fault.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
struct ChaosParams {
    /// `slow`: added latency per RPC, e.g. `200ms`, at most 1h (`delay` is a synonym).
    #[serde(default, alias = "delay", skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<String>")]
    latency: Option<Latency>,
    /// `errors`: probability in `[0, 1]` that an RPC fails.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<f64>")]
    probability: Option<Probability>,
    /// `errors`: status code returned. Default `unavailable`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    code: Option<FailureCode>,
    /// `status`: what ServiceInfo reports: draining | unhealthy | standby | healthy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<String>")]
    status: Option<ServiceStatus>,
    /// `command`: program and arguments that apply the fault (no shell), e.g.
    /// `[nomad, node, drain, -enable, -yes, NODE_ID]`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    run: Option<Vec<String>>,
    /// `command`: program and arguments that heal it (required): run at the end of the
    /// window and on every exit path.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    heal: Option<Vec<String>>,
    /// `command`: deadline of each of `run` and `heal` (default 30s, at most 10m).
    #[serde(
        default,
        with = "humantime_serde",
        skip_serializing_if = "Option::is_none"
    )]
    #[schemars(with = "Option<String>")]
    timeout: Option<Duration>,
}

impl ChaosParams {
    fn is_empty(&self) -> bool {
        *self == ChaosParams::default()
    }

    /// The names of the parameters given.
    fn given(&self) -> impl Iterator<Item = &'static str> {
        [
            ("latency", self.latency.is_some()),
            ("probability", self.probability.is_some()),
            ("code", self.code.is_some()),
            ("status", self.status.is_some()),
            ("run", self.run.is_some()),
            ("heal", self.heal.is_some()),
            ("timeout", self.timeout.is_some()),
        ]
        .into_iter()
        .filter_map(|(k, given)| given.then_some(k))
    }

    /// The `command` step's action, every parameter checked.
    fn command(&self) -> Result<CommandAction, StepError> {
        let bad = |key: &str, message: &str| StepError {
            field: format!("params.{key}"),
            message: message.into(),
        };
        if let Some(key) = self
            .given()
            .find(|k| !["run", "heal", "timeout"].contains(k))
        {
            return Err(bad(key, "`command` takes only `run`, `heal` and `timeout`"));
        }
        let argv = |key: &str, v: &Option<Vec<String>>| match v {
            None => Err(bad(key, "required: the program and its arguments")),
            Some(a) if a.first().is_none_or(|p| p.trim().is_empty()) => {
                Err(bad(key, "must name a program"))
            }
            Some(a) => Ok(a.clone()),
        };
        let timeout = self.timeout.unwrap_or(DEFAULT_COMMAND_TIMEOUT);
        if timeout.is_zero() || timeout > MAX_COMMAND_TIMEOUT {
            return Err(bad(
                "timeout",
                &format!(
                    "must be > 0 and at most {}",
                    humantime::format_duration(MAX_COMMAND_TIMEOUT)
                ),
            ));
        }
        Ok(CommandAction {
            run: argv("run", &self.run)?,
            heal: argv("heal", &self.heal)?,
            timeout,
        })
    }
}

/// A latency of at most [`MAX_LATENCY`], written as a duration (`200ms`).
#[derive(Debug, Clone, Copy, PartialEq)]
struct Latency(Duration);

impl Serialize for Latency {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        humantime_serde::Serde::from(self.0).serialize(s)
    }
}

impl<'de> Deserialize<'de> for Latency {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let shape = || serde::de::Error::custom("must be a duration such as `200ms`");
        let text = String::deserialize(d).map_err(|_: D::Error| shape())?;
        let v = humantime::parse_duration(&text).map_err(|_| shape())?;
        if v > MAX_LATENCY {
            return Err(serde::de::Error::custom(format!(
                "must be at most {}",
                humantime::format_duration(MAX_LATENCY)
            )));
        }
        Ok(Latency(v))
    }
}

/// A probability, a number in `[0, 1]`.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Probability(f64);

impl Serialize for Probability {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_f64(self.0)
    }
}

impl<'de> Deserialize<'de> for Probability {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let bad = || serde::de::Error::custom("must be a number in [0, 1]");
        let v = f64::deserialize(d).map_err(|_: D::Error| bad())?;
        if (0.0..=1.0).contains(&v) {
            Ok(Probability(v))
        } else {
            Err(bad())
        }
    }
}

/// Why a step's fault and parameters do not go together; `field` is inside the step
/// (`params.latency`). Shown as `field: message`, which the profile loader turns into
/// the field.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {message}")]
pub struct StepError {
    /// Field inside the step.
    pub field: String,
    /// What is wrong.
    pub message: String,
}

impl TryFrom<ChaosStepDoc> for ChaosStep {
    type Error = StepError;

    fn try_from(d: ChaosStepDoc) -> Result<Self, StepError> {
        let p = &d.params;
        let name = match d.fault {
            StepName::Node(name) => name,
            StepName::Command => {
                return Ok(ChaosStep {
                    at: d.at,
                    fault: ChaosFault::Command(p.command()?),
                    nodes: d.nodes,
                    duration: d.duration,
                })
            }
            StepName::Drain => {
                if let Some(key) = p.given().next() {
                    return Err(StepError {
                        field: format!("params.{key}"),
                        message: "`drain` takes no parameters".into(),
                    });
                }
                return Ok(ChaosStep {
                    at: d.at,
                    fault: ChaosFault::Drain,
                    nodes: d.nodes,
                    duration: d.duration,
                });
            }
        };
        let wire = FaultParams {
            latency: p.latency.map(|l| l.0),
            probability: p.probability.map(|x| x.0),
            code: p.code,
            status: p.status,
        };
        if let Some(key) = p.given().find(|k| ["run", "heal", "timeout"].contains(k)) {
            return Err(StepError {
                field: format!("params.{key}"),
                message: format!("only `command` takes `{key}`"),
            });
        }
        let kind = FaultKind::from_wire(name, &wire).map_err(|e| StepError {
            field: format!("params.{}", e.param),
            message: e.message.into(),
        })?;
        // A parameter its kind does not take is a mistake (`latency` on `errors`), not
        // something to ignore.
        let taken = kind.params();
        let unused = [
            ("latency", taken.latency.is_some()),
            ("probability", taken.probability.is_some()),
            ("code", taken.code.is_some()),
            ("status", taken.status.is_some()),
        ];
        if let Some(key) = p
            .given()
            .find(|k| unused.iter().any(|(u, takes)| u == k && !takes))
        {
            return Err(StepError {
                field: format!("params.{key}"),
                message: format!("`{}` takes no parameter `{key}`", name.as_str()),
            });
        }
        Ok(ChaosStep {
            at: d.at,
            fault: ChaosFault::Node(kind),
            nodes: d.nodes,
            duration: d.duration,
        })
    }
}

impl From<ChaosStep> for ChaosStepDoc {
    fn from(s: ChaosStep) -> Self {
        let (fault, p, command) = match s.fault {
            ChaosFault::Drain => (StepName::Drain, FaultParams::default(), None),
            ChaosFault::Node(k) => (StepName::Node(k.name()), k.params(), None),
            ChaosFault::Command(c) => (StepName::Command, FaultParams::default(), Some(c)),
        };
        ChaosStepDoc {
            at: s.at,
            fault,
            nodes: s.nodes,
            duration: s.duration,
            params: ChaosParams {
                latency: p.latency.map(Latency),
                probability: p.probability.map(Probability),
                code: p.code,
                status: p.status,
                run: command.as_ref().map(|c| c.run.clone()),
                heal: command.as_ref().map(|c| c.heal.clone()),
                timeout: command.map(|c| c.timeout),
            },
        }
    }
}

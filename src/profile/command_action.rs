//! The `command` chaos step's action: a program run to apply a fault on a real cluster
//! (Nomad, kubectl, Toxiproxy...) and the program that rolls it back.

use std::time::Duration;

use serde::{Deserialize, Serialize};

/// Longest a step's `run` or `heal` may take by default (an assumption: a CLI call to
/// an orchestrator answers within seconds; a slower one sets `timeout`).
pub const DEFAULT_COMMAND_TIMEOUT: Duration = Duration::from_secs(30);

/// Longest `timeout` a profile may give (an assumption: a fault that takes longer to
/// apply is not a step of a drill).
pub const MAX_COMMAND_TIMEOUT: Duration = Duration::from_secs(600);

/// What a `command` step runs: `run` applies the fault, `heal` (required) rolls it
/// back, each an argv (no shell) that must exit 0 within `timeout`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CommandAction {
    /// Program and arguments that apply the fault.
    pub run: Vec<String>,
    /// Program and arguments that heal it: run at the end of the step's window and on
    /// every exit path (end, failed check, signal, error).
    pub heal: Vec<String>,
    /// Deadline of each of `run` and `heal`; past it the program is killed and the
    /// call failed.
    #[serde(with = "humantime_serde")]
    pub timeout: Duration,
}

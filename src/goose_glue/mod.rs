//! Keeping goose inside its box: the process-wide things goose touches, held in one
//! place so that a run (or several in one process) leaves none of them behind.
//!
//! - [`MutedStdout`]: goose prints on stdout from a worker thread, and panics when
//!   stdout is closed; stdout is muted while a workload runs.
//! - [`GooseScratch`]: goose writes its HTML reports into a directory of its own until
//!   the run's report directory exists; that directory is removed on every way out.
//! - [`killswitch`]: goose's kill switch is process-wide: cleared before a workload,
//!   pulled when a run is cancelled.

pub(crate) mod killswitch;
mod mute;
mod scratch;

pub(crate) use mute::MutedStdout;
pub(crate) use scratch::{GooseScratch, ScratchDirs};

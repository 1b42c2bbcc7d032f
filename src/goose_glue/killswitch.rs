//! goose keeps one kill switch for the whole process: a previous run (or accounting
//! mode) may have left it set, and pulling it is how a cancelled run makes goose stop
//! its users and write its report.

/// Clears the kill switch before a workload starts.
pub(crate) fn reset() {
    goose::reset_killswitch();
}

/// Pulls the kill switch: goose stops its users (between launches and transactions)
/// and writes its report. `reason` is logged by goose.
pub(crate) fn pull(reason: &str) {
    goose::trigger_killswitch(reason);
}

//! Whether a run keeps its client ledger and runs the set audit: decided here once,
//! for `stampede run` and `stampede sim` alike.

use crate::profile::{Checks, Profile};

/// Whether `profile`'s runs need the set audit (lost / duplicated / orphaned): when
/// it has a chaos schedule, or its checks (or a per-mode or per-`k` override of them)
/// name `lost` or `duplicated`.
pub fn needs_set_audit(profile: &Profile) -> bool {
    !profile.chaos.is_empty() || checks_sets(&profile.checks)
}

fn checks_sets(c: &Checks) -> bool {
    c.lost.is_some()
        || c.duplicated.is_some()
        || c.per_mode.values().any(checks_sets)
        || c.per_k.values().any(checks_sets)
}

//! Test-only accounting mutations (cargo feature `mutations`, off by default): each
//! switch plants one known regression in [`NodeAccounting`](super::NodeAccounting), so
//! that a test can show the nightly guard catching it. A build without the feature has
//! none of this code.
//!
//! The switch is the environment variable [`MUTATION_ENV`], read when a
//! [`PlacementCore`](super::PlacementCore) is built: a test sets it on the `stampede`
//! process it starts (`stampede sim` or `stampede run`), never on its own.

/// The environment variable naming the mutation (`stale-sync`, `double-count`,
/// `deletes-ignored`); unset or empty = the faithful code.
pub const MUTATION_ENV: &str = "STAMPEDE_MUTATION";

/// One planted accounting regression.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mutation {
    /// A sync's report replaces the local count without keeping the creates placed
    /// after the report was taken: `reconciled` drops its unconfirmed adds at every
    /// sync (`optimistic` already does, as E2B).
    StaleSyncErasesAdds,
    /// A create is counted both in the sync's report and in the local adds: the
    /// optimistic delta survives syncs, and `reconciled` keeps adds a sync confirmed.
    DoubleCountAfterSync,
    /// Deletes are not subtracted: a deleted sandbox stays counted until a sync.
    DeletesNotSubtracted,
}

impl Mutation {
    /// Every mutation with its name in [`MUTATION_ENV`].
    pub const ALL: [(&'static str, Mutation); 3] = [
        ("stale-sync", Mutation::StaleSyncErasesAdds),
        ("double-count", Mutation::DoubleCountAfterSync),
        ("deletes-ignored", Mutation::DeletesNotSubtracted),
    ];

    /// The mutation [`MUTATION_ENV`] names. An unknown name panics: a test that asks
    /// for a mutation must never silently run the faithful code.
    pub fn from_env() -> Option<Mutation> {
        let name = std::env::var(MUTATION_ENV).ok()?;
        if name.is_empty() {
            return None;
        }
        match Self::ALL.iter().find(|(n, _)| *n == name) {
            Some((_, m)) => Some(*m),
            None => panic!("{MUTATION_ENV}={name}: not a mutation"),
        }
    }
}

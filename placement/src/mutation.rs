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
pub(crate) const MUTATION_ENV: &str = "STAMPEDE_MUTATION";

/// One planted accounting regression.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mutation {
    /// The add is made when a create is sent, before its RPC, instead of being counted
    /// as in flight beside the synced figure: a sync that lands while the create runs
    /// overwrites it (the node counts a sandbox only once it runs), and the create's
    /// success adds nothing, its add having been made. The sandbox is missing from
    /// every mode's count until a later sync reports it. This is the ordering the
    /// optimistic-accounting write-up rejected ("Add before the RPC").
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

//! Which sandboxes the API kills by itself, as E2B's: the evictor kills tracked sandboxes
//! at their end time (`packages/api/internal/orchestrator/evictor/evict.go`, reading
//! `packages/api/internal/sandbox/storage/redis/items.go`), and a sync kills orphans,
//! sandboxes a node runs that the store does not know, once they are a minute old
//! (`packages/api/internal/sandbox/store.go` `Reconcile`, `storage/redis/main.go`).
//! Both kills go through the node's Delete, and a success or a NotFound releases the
//! sandbox's optimistic vCPU ([`PlacementCore::delete_ended`](super::PlacementCore::delete_ended),
//! E2B's `killSandboxOnNode` in `packages/api/internal/orchestrator/delete_instance.go`).
//!
//! No clock here: times are whatever the driver measures them in (wall-clock offsets in
//! the service, virtual nanoseconds in the simulator), compared only.

use std::collections::BTreeSet;
use std::time::Duration;

/// How often the evictor looks for expired sandboxes: E2B's `pollInterval`, 50 ms.
pub const EVICT_POLL: Duration = Duration::from_millis(50);

/// Expired sandboxes one evictor tick takes at most: E2B's `expiredItemsBatchSize`, 256.
pub const EVICT_BATCH: usize = 256;

/// Evictions in flight at most: the fallback of E2B's `max-concurrent-evictions` flag,
/// 256 (`packages/shared/pkg/featureflags/flags.go`); a tick skips what does not fit.
pub const MAX_CONCURRENT_EVICTIONS: usize = 256;

/// A listed sandbox younger than this is never an orphan: E2B's `orphanGracePeriod`, 1
/// minute (a create may still be registering it).
pub const ORPHAN_GRACE: Duration = Duration::from_secs(60);

/// One evictor tick: of the tracked sandboxes `(id, end time)`, those whose end time is
/// at or before `now`, not already being evicted (`in_flight`), earliest end first, at
/// most [`EVICT_BATCH`] and no more than the free share of
/// [`MAX_CONCURRENT_EVICTIONS`].
pub fn due_evictions<'a, T: Ord + Copy>(
    tracked: impl IntoIterator<Item = (&'a str, T)>,
    now: T,
    in_flight: &BTreeSet<String>,
) -> Vec<String> {
    let mut expired: Vec<(T, &str)> = tracked
        .into_iter()
        .filter(|&(_, end)| end <= now)
        .map(|(id, end)| (end, id))
        .collect();
    expired.sort_unstable();
    let free = MAX_CONCURRENT_EVICTIONS.saturating_sub(in_flight.len());
    expired
        .into_iter()
        .take(EVICT_BATCH)
        .filter(|(_, id)| !in_flight.contains(*id))
        .take(free)
        .map(|(_, id)| id.to_string())
        .collect()
}

/// Whether a sandbox a node lists is an orphan to kill: unknown to this instance (not
/// tracked, not being placed) and started at least [`ORPHAN_GRACE`] before `now`.
/// `started` and `now` are on one clock, `grace` is [`ORPHAN_GRACE`] in its unit.
pub fn is_orphan_to_kill<T: Ord + Copy + std::ops::Sub<Output = T>>(
    known: bool,
    started: T,
    now: T,
    grace: T,
) -> bool {
    !known && started <= now && now - started >= grace
}

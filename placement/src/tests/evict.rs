//! The core's kill rules, as E2B's: the evictor's selection
//! (`packages/api/internal/orchestrator/evictor/evict.go`, `storage/redis/items.go`,
//! `packages/shared/pkg/featureflags/flags.go`) and the orphan rule
//! (`packages/api/internal/sandbox/storage/redis/main.go`).

use std::collections::BTreeSet;
use std::time::Duration;

use crate::evict::{
    due_evictions, is_orphan_to_kill, EVICT_BATCH, EVICT_POLL, MAX_CONCURRENT_EVICTIONS,
    ORPHAN_GRACE,
};

#[test]
fn e2b_constants() {
    assert_eq!(EVICT_POLL, Duration::from_millis(50));
    assert_eq!(EVICT_BATCH, 256);
    assert_eq!(MAX_CONCURRENT_EVICTIONS, 256);
    assert_eq!(ORPHAN_GRACE, Duration::from_secs(60));
}

/// End time at or before now, earliest first, not the ones already being evicted.
#[test]
fn due_are_the_expired_not_in_flight_earliest_first() {
    let tracked = [
        ("c", 30u64),
        ("a", 10),
        ("late", 41),
        ("b", 20),
        ("now", 40),
    ];
    let none = BTreeSet::new();
    assert_eq!(due_evictions(tracked, 40, &none), ["a", "b", "c", "now"]);
    let busy: BTreeSet<String> = ["b".to_string()].into();
    assert_eq!(due_evictions(tracked, 40, &busy), ["a", "c", "now"]);
    assert!(due_evictions(tracked, 5, &none).is_empty());
}

/// One tick takes at most 256 expired items, and only as many as free evictor slots.
#[test]
fn a_tick_is_bounded_by_the_batch_and_the_free_concurrency() {
    let ids: Vec<String> = (0..1000).map(|i| format!("s{i:04}")).collect();
    let tracked: Vec<(&str, u64)> = ids.iter().map(|id| (id.as_str(), 1)).collect();
    let none = BTreeSet::new();
    assert_eq!(due_evictions(tracked.iter().copied(), 2, &none).len(), 256);
    let busy: BTreeSet<String> = (0..200).map(|i| format!("x{i}")).collect();
    assert_eq!(due_evictions(tracked.iter().copied(), 2, &busy).len(), 56);
    let full: BTreeSet<String> = (0..256).map(|i| format!("x{i}")).collect();
    assert!(due_evictions(tracked.iter().copied(), 2, &full).is_empty());
}

/// Unknown and at least a minute old (a start in the future is young).
#[test]
fn an_orphan_is_unknown_and_past_the_grace() {
    let g = Duration::from_secs(60);
    let at = |s: u64| Duration::from_secs(s);
    assert!(is_orphan_to_kill(false, at(100), at(160), g));
    assert!(!is_orphan_to_kill(false, at(100), at(159), g));
    assert!(!is_orphan_to_kill(true, at(0), at(1000), g));
    assert!(!is_orphan_to_kill(false, at(200), at(100), g));
}

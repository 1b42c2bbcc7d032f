//! The test-only accounting mutations do what their names say, so a guard that misses
//! one misses a real regression, not a switch that changed nothing.

use crate::accounting::NodeAccounting;
use crate::mutation::Mutation;
use crate::AccountingMode;

const MODES: [AccountingMode; 2] = [AccountingMode::Optimistic, AccountingMode::Reconciled];

/// A node running `base` (4 vCPU), synced, with `mutation` planted.
fn node(mutation: Option<Mutation>) -> NodeAccounting {
    let mut acct = NodeAccounting::default();
    acct.set_mutation(mutation);
    acct.apply_sync(4, Some(&[("base".to_string(), 4)]), None, 3);
    acct
}

/// A sync that lands while a create runs: the node does not count the starting sandbox.
fn sync_during_create(acct: &mut NodeAccounting) {
    acct.apply_sync(4, Some(&[("base".to_string(), 4)]), None, 3);
}

#[test]
fn faithful_core_keeps_a_create_in_flight_across_a_sync() {
    let mut acct = node(None);
    acct.start_placing("a", 2);
    sync_during_create(&mut acct);
    for mode in MODES {
        assert_eq!(acct.believed(mode), 6, "{mode:?} in flight");
    }
    acct.create_succeeded("a", 2);
    for mode in MODES {
        assert_eq!(acct.believed(mode), 6, "{mode:?} after success");
    }
}

#[test]
fn stale_sync_mutation_loses_a_create_until_a_sync_reports_it() {
    let mut acct = node(Some(Mutation::StaleSyncErasesAdds));
    acct.start_placing("a", 2);
    for mode in MODES {
        assert_eq!(acct.believed(mode), 6, "{mode:?} before the sync");
    }
    sync_during_create(&mut acct);
    for mode in MODES {
        assert_eq!(acct.believed(mode), 4, "{mode:?}: the sync erased the add");
    }
    acct.create_succeeded("a", 2);
    for mode in MODES {
        assert_eq!(acct.believed(mode), 4, "{mode:?}: success adds nothing");
    }
    acct.apply_sync(
        6,
        Some(&[("base".to_string(), 4), ("a".to_string(), 2)]),
        None,
        3,
    );
    for mode in MODES {
        assert_eq!(acct.believed(mode), 6, "{mode:?}: the next sync reports it");
    }
    // The create was still in flight: a per-node starting limit still sees it.
    let mut acct = node(Some(Mutation::StaleSyncErasesAdds));
    acct.start_placing("b", 1);
    sync_during_create(&mut acct);
    assert_eq!(acct.in_flight_count(), 1);
    acct.create_ended_without_sandbox("b");
    assert_eq!(acct.in_flight_count(), 0);
    for mode in MODES {
        assert_eq!(acct.believed(mode), 4, "{mode:?} after a failed create");
    }
}

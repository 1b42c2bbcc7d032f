//! `reconciled` under lagged metrics: a node's ServiceInfo figure and the ids behind it
//! (the stampede extension) are a snapshot taken some time before the sync, while `List`
//! answers live. Each sync goes through [`snapshot`], as the service and the simulator do.

use crate::sync_reply::snapshot;
use crate::{AccountingMode, InfoReply, Listed, NodeMetrics, NodeStatus, PlacementCore};
use crate::{PlacementConfig, SyncSnapshot};

/// One sync whose figure (`allocated`) and ids (`behind`) were taken earlier, while `live`
/// is what `List` answers now (`(id, vcpu)`).
fn lagged_sync(core: &mut PlacementCore, allocated: u32, behind: &[&str], live: &[(&str, u32)]) {
    let info = InfoReply {
        status: NodeStatus::Ready,
        metrics: NodeMetrics {
            cpu_allocated: allocated,
            cpu_count: 16,
            ..NodeMetrics::default()
        },
        ids: Some(behind.iter().map(|s| (*s).to_string()).collect()),
    };
    let listed: Vec<Listed> = live
        .iter()
        .map(|(id, vcpu)| Listed {
            id: (*id).to_string(),
            vcpu: *vcpu,
        })
        .collect();
    let snap: SyncSnapshot = snapshot(&info, Some(&listed), core.node("n").unwrap().accounting());
    core.apply_sync("n", snap);
}

/// A node reporting 4 vCPU of sandboxes this instance did not place (`base`, 4 vCPU).
fn node(mode: AccountingMode) -> PlacementCore {
    let mut core = PlacementCore::new(PlacementConfig {
        mode,
        ..PlacementConfig::default()
    });
    core.add_node("n");
    lagged_sync(&mut core, 4, &["base"], &[("base", 4)]);
    core
}

fn believed(core: &PlacementCore) -> u64 {
    core.believed_allocated_vcpu("n").unwrap()
}

/// The nightly profile found this: a sandbox created and deleted between two syncs, still
/// named by the second sync's lagged ids and figure, was counted by that figure with
/// nothing to cancel it (this instance had forgotten it, so it had vCPU 0 in the snapshot).
#[test]
fn reconciled_does_not_count_a_sandbox_deleted_before_a_lagged_sync_names_it() {
    let mut core = node(AccountingMode::Reconciled);
    core.start_placing("n", "s1", 3);
    core.create_succeeded("n", "s1", 3);
    assert_eq!(believed(&core), 7);
    core.delete_succeeded("n", "s1", 3);
    assert_eq!(believed(&core), 4);
    // Figure and ids taken while s1 ran; List no longer has it. Truth: 4.
    lagged_sync(&mut core, 7, &["base", "s1"], &[("base", 4)]);
    assert_eq!(believed(&core), 4);
    // A sync taken after the delete: the figure drops, nothing is held any more.
    lagged_sync(&mut core, 4, &["base"], &[("base", 4)]);
    assert_eq!(believed(&core), 4);
    let acc = core.node("n").unwrap().accounting();
    assert_eq!((acc.pending_removes(), acc.unlisted_deletes()), (0, 0));
}

/// The same sandbox confirmed by a sync before its delete was already held (a pending
/// remove); a lagged sync naming it again keeps holding it.
#[test]
fn reconciled_holds_a_confirmed_delete_while_a_lagged_sync_names_it() {
    let mut core = node(AccountingMode::Reconciled);
    core.create_succeeded("n", "s1", 3);
    lagged_sync(&mut core, 7, &["base", "s1"], &[("base", 4), ("s1", 3)]);
    core.delete_succeeded("n", "s1", 3);
    lagged_sync(&mut core, 7, &["base", "s1"], &[("base", 4)]);
    assert_eq!(believed(&core), 4);
    lagged_sync(&mut core, 4, &["base"], &[("base", 4)]);
    assert_eq!(believed(&core), 4);
}

/// A delete no sync ever named leaves no record behind once a sync does not name it:
/// the record cannot outlive the next sync that misses it.
#[test]
fn reconciled_forgets_a_delete_at_the_first_sync_that_does_not_name_it() {
    let mut core = node(AccountingMode::Reconciled);
    for i in 0..50 {
        let id = format!("short-{i}");
        core.create_succeeded("n", &id, 1);
        core.delete_succeeded("n", &id, 1);
    }
    assert_eq!(core.node("n").unwrap().accounting().unlisted_deletes(), 50);
    assert_eq!(believed(&core), 4);
    // Taken before any of them was created.
    lagged_sync(&mut core, 4, &["base"], &[("base", 4)]);
    let acc = core.node("n").unwrap().accounting();
    assert_eq!((acc.pending_removes(), acc.unlisted_deletes()), (0, 0));
    assert_eq!(believed(&core), 4);
}

/// The other direction: a sandbox created after the lagged figure was taken is kept as
/// an add (List shows it running) and released once a sync names it, never counted twice.
#[test]
fn reconciled_keeps_an_add_a_lagged_sync_does_not_name_yet() {
    let mut core = node(AccountingMode::Reconciled);
    core.create_succeeded("n", "s1", 3);
    for _ in 0..3 {
        lagged_sync(&mut core, 4, &["base"], &[("base", 4), ("s1", 3)]);
        assert_eq!(believed(&core), 7);
    }
    lagged_sync(&mut core, 7, &["base", "s1"], &[("base", 4), ("s1", 3)]);
    assert_eq!(believed(&core), 7);
    let acc = core.node("n").unwrap().accounting();
    assert_eq!((acc.pending_adds(), acc.unlisted_deletes()), (0, 0));
}

/// A create still in flight that a sync already names (the node counts a starting
/// sandbox) is counted once, by the figure.
#[test]
fn reconciled_counts_a_create_in_flight_once_when_a_sync_names_it() {
    let mut core = node(AccountingMode::Reconciled);
    core.start_placing("n", "s1", 3);
    assert_eq!(believed(&core), 7);
    lagged_sync(&mut core, 7, &["base", "s1"], &[("base", 4), ("s1", 3)]);
    assert_eq!(believed(&core), 7);
    core.create_succeeded("n", "s1", 3);
    assert_eq!(believed(&core), 7);
    lagged_sync(&mut core, 7, &["base", "s1"], &[("base", 4), ("s1", 3)]);
    assert_eq!(believed(&core), 7);
}

/// E2B's `optimistic` on the same lagged sequence (its faithful behaviour, unchanged): the
/// delete is wiped by the sync and the lagged figure counts the sandbox again.
#[test]
fn optimistic_counts_a_deleted_sandbox_a_lagged_sync_names_as_e2b_does() {
    let mut core = node(AccountingMode::Optimistic);
    core.create_succeeded("n", "s1", 3);
    core.delete_succeeded("n", "s1", 3);
    lagged_sync(&mut core, 7, &["base", "s1"], &[("base", 4)]);
    assert_eq!(believed(&core), 7);
}

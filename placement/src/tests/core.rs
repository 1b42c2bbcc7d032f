//! Unit tests of the sans-IO placement core pinning E2B's behaviour.

use std::collections::BTreeSet;

use crate::{
    AccountingMode, CreateOutcome, Decision, NoCandidate, NodeId, NodeMetrics, NodeStatus,
    PlacementAttempt, PlacementConfig, PlacementCore, PlacementFailure, SyncSnapshot,
};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

fn metrics(allocated: u32, cpu_count: u32) -> NodeMetrics {
    NodeMetrics {
        cpu_allocated: allocated,
        cpu_count,
        ..NodeMetrics::default()
    }
}

fn ready(allocated: u32, cpu_count: u32, ids: Option<Vec<(String, u32)>>) -> SyncSnapshot {
    SyncSnapshot {
        status: NodeStatus::Ready,
        metrics: metrics(allocated, cpu_count),
        sandboxes: ids,
        listed_now: None,
    }
}

fn core_with(mode: AccountingMode, nodes: &[(&str, u32, u32)]) -> PlacementCore {
    let mut core = PlacementCore::new(PlacementConfig {
        mode,
        ..PlacementConfig::default()
    });
    for &(id, allocated, cpus) in nodes {
        core.add_node(id);
        core.apply_sync(id, ready(allocated, cpus, Some(vec![])));
    }
    core
}

#[test]
fn defaults_are_e2bs() {
    let c = PlacementConfig::default();
    assert_eq!((c.k, c.r, c.alpha, c.max_retries), (3, 4.0, 0.5, 3));
    assert!(c.validate().is_empty());
    let bad = PlacementConfig {
        k: 0,
        r: 0.0,
        alpha: -1.0,
        ..c
    };
    let fields: Vec<_> = bad.validate().iter().map(|e| e.field).collect();
    assert_eq!(fields, ["k", "r", "alpha"]);
}

#[test]
fn lowest_score_wins_among_all_when_k_covers_the_fleet() {
    let mut core = core_with(
        AccountingMode::Reported,
        &[("a", 30, 16), ("b", 2, 16), ("c", 10, 16)],
    );
    let mut rng = ChaCha8Rng::seed_from_u64(3);
    for _ in 0..50 {
        assert_eq!(
            core.choose(1, &BTreeSet::new(), &mut rng).as_deref(),
            Some("b")
        );
    }
    // Score is relative to capacity: 10 of 64 vCPU beats 2 of 4.
    let mut core = core_with(
        AccountingMode::Reported,
        &[("small", 2, 1), ("big", 10, 16)],
    );
    assert_eq!(
        core.choose(1, &BTreeSet::new(), &mut rng).as_deref(),
        Some("big")
    );
    let s = core.score_of("big", 1).unwrap();
    assert_eq!(s, 11.0 / 64.0);
}

#[test]
fn cpu_count_zero_is_never_chosen() {
    let mut core = core_with(AccountingMode::Reported, &[("zero", 0, 0), ("ok", 500, 1)]);
    let mut rng = ChaCha8Rng::seed_from_u64(9);
    for _ in 0..200 {
        assert_eq!(
            core.choose(1, &BTreeSet::new(), &mut rng).as_deref(),
            Some("ok")
        );
    }
    let mut only_zero = core_with(AccountingMode::Reported, &[("zero", 0, 0)]);
    assert_eq!(
        only_zero.try_choose(1, &BTreeSet::new(), &mut rng),
        Err(NoCandidate::NoCompatibleNode)
    );
}

#[test]
fn only_ready_and_not_excluded_nodes_are_sampled() {
    let mut core = core_with(
        AccountingMode::Reported,
        &[("a", 0, 16), ("b", 0, 16), ("c", 0, 16), ("d", 0, 16)],
    );
    core.set_status("a", NodeStatus::Draining);
    core.set_status("b", NodeStatus::Unhealthy);
    let excluded: BTreeSet<NodeId> = ["c".into()].into();
    let mut rng = ChaCha8Rng::seed_from_u64(1);
    for _ in 0..100 {
        assert_eq!(core.choose(1, &excluded, &mut rng).as_deref(), Some("d"));
    }
    let all: BTreeSet<NodeId> = ["c".into(), "d".into()].into();
    assert_eq!(
        core.try_choose(1, &all, &mut rng),
        Err(NoCandidate::CapacityUnavailable)
    );
}

#[test]
fn starting_filter_skips_busy_nodes() {
    let mut core = PlacementCore::new(PlacementConfig {
        mode: AccountingMode::Reported,
        max_starting_per_node: Some(1),
        ..PlacementConfig::default()
    });
    for (id, alloc) in [("idle", 0), ("busy", 50)] {
        core.add_node(id);
        core.apply_sync(id, ready(alloc, 16, None));
    }
    core.start_placing("idle", "s1", 1);
    core.start_placing("idle", "s2", 1);
    let mut rng = ChaCha8Rng::seed_from_u64(5);
    // "idle" has 2 > 1 creates in flight: skipped although it scores best.
    assert_eq!(
        core.choose(1, &BTreeSet::new(), &mut rng).as_deref(),
        Some("busy")
    );
    core.create_failed("idle", "s1");
    assert_eq!(
        core.choose(1, &BTreeSet::new(), &mut rng).as_deref(),
        Some("idle")
    );
}

#[test]
fn resource_exhausted_retries_without_exclusion_or_attempt() {
    let mut core = core_with(AccountingMode::InFlight, &[("only", 0, 16)]);
    let mut rng = ChaCha8Rng::seed_from_u64(2);
    let mut att = PlacementAttempt::new("sbx", 1);
    for _ in 0..10 {
        assert_eq!(att.next(&mut core, &mut rng), Ok("only".into()));
        assert_eq!(core.in_flight("only"), Some(1));
        assert_eq!(
            att.report(&mut core, CreateOutcome::ResourceExhausted),
            Decision::Retry
        );
        assert_eq!(core.in_flight("only"), Some(0));
    }
    assert!(att.excluded().is_empty());
    assert_eq!((att.attempts(), att.refusals()), (0, 10));
    att.next(&mut core, &mut rng).unwrap();
    assert_eq!(
        att.report(&mut core, CreateOutcome::Created),
        Decision::Placed("only".into())
    );
    let n = core.node("only").unwrap().counters();
    assert_eq!(
        (n.create_successes, n.create_refusals, n.create_fails),
        (1, 10, 0)
    );
}

/// E2B (`placement/placement.go`): the loop runs while `attempt < maxRetries`; the
/// failure is decided after it (a deadline first), so the third failure is not yet one.
#[test]
fn other_errors_exclude_and_stop_after_three_attempts() {
    let mut core = core_with(
        AccountingMode::Reported,
        &[
            ("a", 0, 16),
            ("b", 1, 16),
            ("c", 2, 16),
            ("d", 3, 16),
            ("e", 4, 16),
        ],
    );
    let mut rng = ChaCha8Rng::seed_from_u64(4);
    let mut att = PlacementAttempt::new("sbx", 1);
    let mut tried = Vec::new();
    let failure = loop {
        let node = match att.next(&mut core, &mut rng) {
            Ok(node) => node,
            Err(f) => break f,
        };
        assert!(!tried.contains(&node), "excluded node {node} chosen again");
        tried.push(node);
        assert_eq!(
            att.report(&mut core, CreateOutcome::Failed),
            Decision::Retry
        );
        assert!(tried.len() <= 3, "more than max_retries creates sent");
    };
    assert_eq!(tried.len(), 3);
    assert_eq!(
        failure,
        PlacementFailure::CreateFailed {
            attempts: 3,
            forwarded: None
        }
    );
    assert_eq!(att.excluded().len(), 3);
    assert!(core.nodes().all(|n| n.in_flight() == 0));
}

/// E2B (`placement/placement.go`): with every node excluded after a create error the
/// failure is that error (`SandboxCreateError`), not a lack of capacity.
#[test]
fn every_node_excluded_fails_before_attempts_run_out() {
    let mut core = PlacementCore::new(PlacementConfig {
        max_retries: 10,
        ..PlacementConfig::default()
    });
    core.add_node("a");
    core.apply_sync("a", ready(0, 4, Some(vec![])));
    let mut rng = ChaCha8Rng::seed_from_u64(4);
    let mut att = PlacementAttempt::new("sbx", 1);
    att.next(&mut core, &mut rng).unwrap();
    assert_eq!(
        att.report(&mut core, CreateOutcome::Failed),
        Decision::Retry
    );
    assert_eq!(
        att.next(&mut core, &mut rng),
        Err(PlacementFailure::CreateFailed {
            attempts: 1,
            forwarded: None
        })
    );
}

/// One scripted sequence on one node (16 vCPU, 4 reported): start s1 (2), start s2 (1),
/// s1 ok, s2 refused, start+ok s3 (4), delete s3, sync listing s1 only (reported 6),
/// delete s1, then a sync that still lists s1 (stale), then a sync without it.
fn scripted(mode: AccountingMode) -> Vec<u64> {
    let mut core = core_with(mode, &[("n", 4, 16)]);
    let mut seen = Vec::new();
    let mut look = |core: &PlacementCore| seen.push(core.believed_allocated_vcpu("n").unwrap());
    core.start_placing("n", "s1", 2);
    core.start_placing("n", "s2", 1);
    look(&core); // a
    core.create_succeeded("n", "s1", 2);
    core.create_refused("n", "s2");
    look(&core); // b
    core.start_placing("n", "s3", 4);
    core.create_succeeded("n", "s3", 4);
    look(&core); // c
    core.delete_succeeded("n", "s3", 4);
    look(&core); // d
    core.apply_sync("n", ready(6, 16, Some(vec![("s1".into(), 2)])));
    look(&core); // e
    core.delete_succeeded("n", "s1", 2);
    look(&core); // f
    core.apply_sync("n", ready(6, 16, Some(vec![("s1".into(), 2)])));
    look(&core); // g
    core.apply_sync("n", ready(4, 16, Some(vec![])));
    look(&core); // h
    seen
}

#[test]
fn believed_allocation_per_mode_after_a_scripted_sequence() {
    //                                                 a  b  c   d  e  f  g  h
    assert_eq!(scripted(AccountingMode::Reported), [4, 4, 4, 4, 6, 6, 6, 4]);
    assert_eq!(scripted(AccountingMode::InFlight), [7, 4, 4, 4, 6, 6, 6, 4]);
    // optimistic: +2 (s1), +4 -4 (s3), wiped by the sync, -2 (s1), wiped again while
    // the stale sync still lists s1: it counts s1 again.
    assert_eq!(
        scripted(AccountingMode::Optimistic),
        [7, 6, 10, 6, 6, 4, 6, 4]
    );
    // reconciled: the delete of s1 is held until a sync stops listing it.
    assert_eq!(
        scripted(AccountingMode::Reconciled),
        [7, 6, 10, 6, 6, 4, 4, 4]
    );
}

#[test]
fn reconciled_keeps_an_add_until_a_sync_lists_it() {
    let mut core = core_with(AccountingMode::Reconciled, &[("n", 0, 16)]);
    core.start_placing("n", "s1", 3);
    core.create_succeeded("n", "s1", 3);
    // A sync taken before s1 landed (lagging metrics): the add is kept.
    core.apply_sync("n", ready(0, 16, Some(vec![])));
    assert_eq!(core.believed_allocated_vcpu("n"), Some(3));
    // Optimistic forgets it at the same point.
    let mut opt = core_with(AccountingMode::Optimistic, &[("n", 0, 16)]);
    opt.create_succeeded("n", "s1", 3);
    opt.apply_sync("n", ready(0, 16, Some(vec![])));
    assert_eq!(opt.believed_allocated_vcpu("n"), Some(0));
    // Listed: released, the reported figure covers it (no double count).
    core.apply_sync("n", ready(3, 16, Some(vec![("s1".into(), 3)])));
    assert_eq!(core.believed_allocated_vcpu("n"), Some(3));
}

#[test]
fn reconciled_drops_an_add_no_sync_ever_saw_after_the_grace() {
    let mut core = core_with(AccountingMode::Reconciled, &[("n", 0, 16)]);
    core.create_succeeded("n", "lost", 2);
    core.apply_sync("n", ready(0, 16, Some(vec![])));
    assert_eq!(core.believed_allocated_vcpu("n"), Some(2));
    core.apply_sync("n", ready(0, 16, Some(vec![])));
    assert_eq!(core.believed_allocated_vcpu("n"), Some(0));
}

#[test]
fn unknown_nodes_are_ignored() {
    let mut core = core_with(AccountingMode::Reconciled, &[("n", 0, 16)]);
    core.start_placing("ghost", "s", 1);
    core.create_succeeded("ghost", "s", 1);
    core.delete_succeeded("ghost", "s", 1);
    core.apply_sync("ghost", ready(1, 1, None));
    assert_eq!(core.believed_allocated_vcpu("ghost"), None);
    assert_eq!(core.len(), 1);
    assert!(!core.add_node("n"));
    assert!(core.remove_node("n").is_some());
    assert!(core.is_empty());
}

/// chaos-stale-heartbeat found this: with frozen metrics (ids from the frozen
/// ServiceInfo snapshot) `reconciled` gave up its adds after two syncs although `List`
/// showed the sandboxes running, and the herd came back.
#[test]
fn reconciled_keeps_adds_while_metrics_are_frozen() {
    let mut core = core_with(AccountingMode::Reconciled, &[("n", 4, 16)]);
    core.start_placing("n", "a", 2);
    core.create_succeeded("n", "a", 2);
    for _ in 0..5 {
        core.apply_sync(
            "n",
            SyncSnapshot {
                status: NodeStatus::Ready,
                metrics: metrics(4, 16),
                sandboxes: Some(vec![]),
                listed_now: Some(vec!["a".to_string()]),
            },
        );
        assert_eq!(core.believed_allocated_vcpu("n"), Some(6));
    }
    // Once the node stops running it, the grace applies as before.
    for _ in 0..2 {
        core.apply_sync(
            "n",
            SyncSnapshot {
                status: NodeStatus::Ready,
                metrics: metrics(4, 16),
                sandboxes: Some(vec![]),
                listed_now: Some(vec![]),
            },
        );
    }
    assert_eq!(core.believed_allocated_vcpu("n"), Some(4));
}

#[test]
fn keeping_only_the_configured_mode_covers_nodes_added_before_and_after() {
    for mode in AccountingMode::ALL {
        let mut core = core_with(mode, &[("a", 0, 8)]);
        core.keep_only_configured_mode();
        core.add_node("b");
        for id in ["a", "b"] {
            let acc = core.node(id).unwrap().accounting();
            for m in AccountingMode::ALL {
                assert_eq!(
                    acc.keeps(m),
                    m != AccountingMode::Reconciled || mode == m,
                    "{mode} keeps {m}"
                );
            }
        }
    }
}

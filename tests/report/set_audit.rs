//! The set audit finds exactly the anomalies planted in a seeded ledger/inventory pair.

use std::collections::BTreeMap;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use stampede::audit::{audit, Inventory};
use stampede::collect::{NodeSample, Sample, Truth};
use stampede::report::SetAudit;
use stampede::workload::{Ledger, LedgerEntry, Outcome};

const NODES: usize = 5;

fn node(k: usize) -> String {
    format!("node-{k:02}")
}

fn entry(index: usize, outcome: Outcome, id: Option<String>) -> LedgerEntry {
    LedgerEntry {
        index,
        target: 0,
        intended_ms: index as f64 * 10.0,
        sent_ms: index as f64 * 10.0,
        latency_us: 2_000,
        outcome,
        sandbox_id: id,
        node: None,
        deleted: None,
    }
}

/// A consistent run: `n` creates, most 201 (each id on one node), some refused with 429,
/// a tenth of the created ones deleted by the client. No anomaly.
fn clean_run(seed: u64, n: usize) -> (Ledger, Inventory) {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut ledger = Ledger::new();
    let mut inv = Inventory::default();
    for k in 0..NODES {
        inv.nodes.insert(node(k), Vec::new());
    }
    for i in 0..n {
        if rng.random_bool(0.1) {
            ledger.record(entry(i, Outcome::Status(429), None));
            continue;
        }
        let id = format!("sbx-{i:04}");
        let mut e = entry(i, Outcome::Status(201), Some(id.clone()));
        if rng.random_bool(0.1) {
            e.deleted = Some(Outcome::Status(204));
        } else {
            let k = rng.random_range(0..NODES);
            inv.nodes.get_mut(&node(k)).unwrap().push(id);
        }
        ledger.record(e);
    }
    ledger.finish();
    (ledger, inv)
}

/// Acknowledged, not deleted ids with the node holding each, in id order.
fn held(inv: &Inventory) -> Vec<(String, String)> {
    let mut v: Vec<(String, String)> = inv
        .nodes
        .iter()
        .flat_map(|(n, ids)| ids.iter().map(move |i| (i.clone(), n.clone())))
        .collect();
    v.sort();
    v
}

fn counts(r: &SetAudit) -> [u64; 5] {
    [
        r.lost.count,
        r.lost_to_node_restart.count,
        r.duplicated.count,
        r.orphaned.count,
        r.recovered.count,
    ]
}

#[test]
fn clean_run_has_no_findings() {
    let (ledger, inv) = clean_run(11, 300);
    assert!(ledger.created() > 200, "the fixture must create sandboxes");
    assert_eq!(audit(&ledger, &inv), SetAudit::default());
}

#[test]
fn one_lost_one_duplicated_one_orphaned_are_found_exactly() {
    let (ledger, mut inv) = clean_run(42, 300);
    let held = held(&inv);
    let mut rng = ChaCha8Rng::seed_from_u64(7);
    let a = rng.random_range(0..held.len());
    let b = (a + 1 + rng.random_range(0..held.len() - 1)) % held.len();
    let (lost_id, lost_node) = held[a].clone();
    let (dup_id, dup_node) = held[b].clone();
    inv.nodes
        .get_mut(&lost_node)
        .unwrap()
        .retain(|i| *i != lost_id);
    let other = (0..NODES).map(node).find(|n| *n != dup_node).unwrap();
    inv.nodes.get_mut(&other).unwrap().push(dup_id.clone());
    inv.nodes
        .get_mut(&node(3))
        .unwrap()
        .push("sbx-nobody-asked".into());

    let r = audit(&ledger, &inv);
    assert_eq!(r.lost.ids, vec![lost_id]);
    assert_eq!(r.duplicated.ids, vec![dup_id]);
    assert_eq!(r.orphaned.ids, vec!["sbx-nobody-asked".to_string()]);
    assert_eq!(counts(&r), [1, 0, 1, 1, 0]);
}

#[test]
fn deleted_expired_and_preexisting_ids_are_not_findings() {
    let (mut ledger, mut inv) = clean_run(5, 100);
    let (gone, n) = held(&inv)[0].clone();
    inv.nodes.get_mut(&n).unwrap().retain(|i| *i != gone);
    inv.gone.insert(gone);
    inv.nodes
        .get_mut(&node(0))
        .unwrap()
        .push("sbx-from-before".into());
    inv.preexisting.insert("sbx-from-before".into());
    // A DELETE answered 404 means the sandbox had already vanished: still a loss.
    let (vanished, n) = held(&inv)[1].clone();
    inv.nodes.get_mut(&n).unwrap().retain(|i| *i != vanished);
    let e = ledger
        .entries
        .iter_mut()
        .find(|e| e.sandbox_id.as_deref() == Some(vanished.as_str()))
        .unwrap();
    e.deleted = Some(Outcome::Status(404));
    let r = audit(&ledger, &inv);
    assert_eq!(r.lost.ids, vec![vanished]);
    assert_eq!(counts(&r), [1, 0, 0, 0, 0]);
}

#[test]
fn one_id_acknowledged_to_two_requests_is_duplicated() {
    let (mut ledger, inv) = clean_run(9, 50);
    let (id, _) = held(&inv)[0].clone();
    let mut twin = entry(1000, Outcome::Status(201), Some(id.clone()));
    twin.sent_ms = 10_000.0;
    ledger.record(twin);
    let r = audit(&ledger, &inv);
    assert_eq!(r.duplicated.ids, vec![id]);
    assert_eq!(counts(&r), [0, 0, 1, 0, 0]);
}

fn sample(t_ms: f64, nodes: &BTreeMap<String, (Vec<String>, &str)>) -> Sample {
    Sample {
        t_ms,
        truth: Truth {
            nodes: nodes
                .iter()
                .map(|(id, (ids, sid))| NodeSample {
                    id: id.clone(),
                    sandboxes: ids.len() as u64,
                    allocated_vcpu: ids.len() as f64,
                    ids: Some(ids.clone()),
                    status: "healthy".into(),
                    service_id: Some(sid.to_string()),
                    refused: None,
                })
                .collect(),
        },
        believed: Vec::new(),
        allocated_after: Default::default(),
        calls: Vec::new(),
    }
}

#[test]
fn sandboxes_wiped_by_a_restart_are_lost_to_node_restart_not_lost() {
    let (ledger, mut inv) = clean_run(3, 200);
    let victim = node(2);
    let before: Vec<String> = inv.nodes[&victim].clone();
    assert!(!before.is_empty());
    // Truth samples: the victim's ids seen at 1 s (incarnation a), restart before 2.5 s
    // (incarnation b, empty), then one new sandbox seen at 3 s that later vanishes: that
    // one was not wiped by the restart and is a real loss.
    let mut snap: BTreeMap<String, (Vec<String>, &str)> = inv
        .nodes
        .iter()
        .map(|(n, ids)| (n.clone(), (ids.clone(), "a")))
        .collect();
    let s1 = sample(1_000.0, &snap);
    snap.insert(victim.clone(), (Vec::new(), "b"));
    let s2 = sample(2_500.0, &snap);
    let late = before[0].clone();
    snap.insert(victim.clone(), (vec![late.clone()], "b"));
    let s3 = sample(3_000.0, &snap);
    inv.note_samples(&[s1, s2, s3]);
    assert_eq!(inv.restarts[&victim], vec![2_500.0]);
    inv.nodes.insert(victim.clone(), Vec::new());

    let r = audit(&ledger, &inv);
    let mut wiped: Vec<String> = before.iter().filter(|i| **i != late).cloned().collect();
    wiped.sort();
    wiped.truncate(20);
    assert_eq!(r.lost.ids, vec![late]);
    assert_eq!(r.lost_to_node_restart.count, before.len() as u64 - 1);
    assert_eq!(r.lost_to_node_restart.ids, wiped);
    assert_eq!(r.duplicated.count + r.orphaned.count, 0);
}

#[test]
fn landed_timeouts_are_recovered_and_the_excess_is_orphaned() {
    let (mut ledger, mut inv) = clean_run(21, 100);
    // Two timed-out creates sent at 5 s and 6 s; three unexplained sandboxes appear,
    // first seen at 5.5 s, 7 s and 0.5 s. Only the first two can come from the timeouts.
    for (i, t) in [(500, 5_000.0), (501, 6_000.0)] {
        let mut e = entry(i, Outcome::Timeout, None);
        e.sent_ms = t;
        ledger.record(e);
    }
    // A 500 that names its id (the service put it in the error body) and did land.
    ledger.record(entry(502, Outcome::Status(500), Some("sbx-named".into())));
    let extra = [
        ("sbx-x1", 5_500.0),
        ("sbx-x2", 7_000.0),
        ("sbx-early", 500.0),
    ];
    for (id, t) in extra {
        inv.nodes.get_mut(&node(1)).unwrap().push(id.into());
        let snap = BTreeMap::from([(node(1), (vec![id.to_string()], "a"))]);
        inv.note_samples(&[sample(t, &snap)]);
    }
    inv.nodes
        .get_mut(&node(4))
        .unwrap()
        .push("sbx-named".into());
    let r = audit(&ledger, &inv);
    assert_eq!(r.recovered.ids, vec!["sbx-named", "sbx-x1", "sbx-x2"]);
    assert_eq!(r.orphaned.ids, vec!["sbx-early"]);
    assert_eq!(counts(&r), [0, 0, 0, 1, 3]);
}

#[test]
fn findings_list_at_most_twenty_ids_but_count_all() {
    let (ledger, mut inv) = clean_run(8, 200);
    let n = held(&inv).len();
    for ids in inv.nodes.values_mut() {
        ids.clear();
    }
    let r = audit(&ledger, &inv);
    assert_eq!(r.lost.count, n as u64);
    assert_eq!(r.lost.ids.len(), 20);
    assert!(r.lost.ids.windows(2).all(|w| w[0] < w[1]));
}

#[test]
fn cancelled_creates_are_unknown_not_lost_and_explain_late_sandboxes() {
    let (mut ledger, mut inv) = clean_run(33, 100);
    // Two creates given up on a signal at 8 s; one of them landed (first seen at 8.5 s).
    for i in [600, 601] {
        let mut e = entry(i, Outcome::Cancelled, None);
        e.sent_ms = 8_000.0;
        ledger.record(e);
    }
    inv.nodes.get_mut(&node(2)).unwrap().push("sbx-late".into());
    let snap = BTreeMap::from([(node(2), (vec!["sbx-late".to_string()], "a"))]);
    inv.note_samples(&[sample(8_500.0, &snap)]);
    let r = audit(&ledger, &inv);
    assert_eq!(r.recovered.ids, vec!["sbx-late"]);
    assert_eq!(
        counts(&r),
        [0, 0, 0, 0, 1],
        "nothing lost, nothing orphaned"
    );
}

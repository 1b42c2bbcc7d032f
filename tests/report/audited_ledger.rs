//! A set-audited run's compact ledger and sample history give the same findings as the
//! whole ledger and every sample, planted anomalies included, while keeping only the
//! unsettled and the anomalous.

use std::collections::BTreeMap;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use stampede::aggregate::{RunShape, SettledIds};
use stampede::audit::{audit, Inventory};
use stampede::collect::{NodeSample, Sample, SampleHistory, Truth};
use stampede::report::SetAudit;
use stampede::workload::{Ledger, LedgerEntry, Outcome};

const NODES: usize = 4;

fn node(k: usize) -> String {
    format!("node-{k}")
}

/// One create's answer at slot `index`, sent at `t_ms`.
fn answer(index: usize, t_ms: f64, outcome: Outcome, id: Option<&str>, k: usize) -> LedgerEntry {
    let created = outcome.is_created();
    LedgerEntry {
        index,
        target: 0,
        intended_ms: t_ms,
        sent_ms: t_ms,
        latency_us: 3_000,
        outcome,
        sandbox_id: id.map(str::to_string),
        node: created.then(|| node(k)),
        deleted: None,
    }
}

/// The same run told to a whole ledger and a whole sample list, and to an audited
/// ledger and a forgetting history.
struct Twin {
    full: Ledger,
    compact: Ledger,
    samples: Vec<Sample>,
    history: SampleHistory,
    /// Node -> (ids now, incarnation).
    truth: BTreeMap<String, (Vec<String>, String)>,
}

impl Twin {
    fn new() -> Self {
        let settled = SettledIds::default();
        let truth = (0..NODES)
            .map(|k| (node(k), (Vec::new(), "a".to_string())))
            .collect();
        Twin {
            full: Ledger::new(),
            compact: Ledger::audited(RunShape::Paced, true, settled.clone(), true),
            samples: Vec::new(),
            history: SampleHistory::new().forgetting(settled).with_windows(),
            truth,
        }
    }

    fn record(&mut self, e: LedgerEntry) {
        self.full.record(e.clone());
        self.compact.record(e);
    }

    fn delete(&mut self, index: usize, outcome: Outcome) {
        self.full.record_delete(index, outcome.clone());
        self.compact.record_delete(index, outcome);
    }

    fn place(&mut self, k: usize, id: &str) {
        self.truth.get_mut(&node(k)).unwrap().0.push(id.to_string());
    }

    fn remove(&mut self, id: &str) {
        for (ids, _) in self.truth.values_mut() {
            ids.retain(|i| i != id);
        }
    }

    fn sample(&mut self, t_ms: f64) {
        let nodes = self
            .truth
            .iter()
            .map(|(id, (ids, sid))| NodeSample {
                id: id.clone(),
                sandboxes: ids.len() as u64,
                allocated_vcpu: ids.len() as f64,
                ids: Some(ids.clone()),
                status: "healthy".into(),
                service_id: Some(sid.clone()),
                refused: None,
            })
            .collect();
        let s = Sample {
            t_ms,
            truth: Truth { nodes },
            believed: Vec::new(),
            allocated_after: Default::default(),
            calls: Vec::new(),
        };
        self.history.note(&s);
        self.samples.push(s);
    }

    /// Both audits, against the final truth.
    fn audits(mut self) -> (SetAudit, SetAudit, Ledger, usize) {
        self.full.finish();
        self.compact.finish();
        let mut nodes = BTreeMap::new();
        for (n, (ids, _)) in &self.truth {
            nodes.insert(n.clone(), ids.clone());
        }
        let mut whole = Inventory {
            nodes: nodes.clone(),
            ..Inventory::default()
        };
        whole.note_samples(&self.samples);
        let sighted = self.history.sighted();
        let mut folded = Inventory {
            nodes,
            ..Inventory::default()
        };
        folded.note_history(self.history);
        (
            audit(&self.full, &whole),
            audit(&self.compact, &folded),
            self.compact,
            sighted,
        )
    }
}

#[test]
fn the_audited_ledger_finds_the_planted_anomalies_the_whole_ledger_finds() {
    let mut rng = ChaCha8Rng::seed_from_u64(52);
    let mut run = Twin::new();
    let mut slot = 0;
    let mut next = |run: &mut Twin, t: f64, outcome: Outcome, id: Option<&str>, k: usize| {
        run.record(answer(slot, t, outcome, id, k));
        slot += 1;
        slot - 1
    };
    // A clean stream: 2,000 creates, each deleted 2 s later and gone from its node.
    let mut live: Vec<(usize, String, f64)> = Vec::new();
    for i in 0..2_000usize {
        let t = i as f64 * 10.0;
        let id = format!("sbx-{i:05}");
        let k = rng.random_range(0..NODES);
        let s = next(&mut run, t, Outcome::Status(201), Some(&id), k);
        run.place(k, &id);
        live.push((s, id, t));
        while live.first().is_some_and(|(_, _, at)| *at + 2_000.0 <= t) {
            let (s, id, _) = live.remove(0);
            run.remove(&id);
            run.delete(s, Outcome::Status(204));
        }
        if i % 50 == 0 {
            run.sample(t);
        }
        match i {
            // Lost: acknowledged, never deleted, gone from its node.
            300 => {
                let s = next(&mut run, t, Outcome::Status(201), Some("lost-1"), 1);
                run.place(1, "lost-1");
                run.sample(t + 1.0);
                run.remove("lost-1");
                let _ = s;
            }
            // Lost: its delete was answered 404, so it was gone before.
            400 => {
                let s = next(&mut run, t, Outcome::Status(201), Some("gone-404"), 2);
                run.place(2, "gone-404");
                run.sample(t + 1.0);
                run.remove("gone-404");
                run.delete(s, Outcome::Status(404));
            }
            // Lost to a restart: node-3 restarts after it was last seen there.
            500 => {
                next(&mut run, t, Outcome::Status(201), Some("restart-1"), 3);
                run.place(3, "restart-1");
                run.sample(t + 1.0);
                run.remove("restart-1");
                run.truth.get_mut(&node(3)).unwrap().1 = "b".into();
                run.sample(t + 2.0);
            }
            // Duplicated: one id acknowledged twice, both deleted (settled twice).
            600 => {
                for _ in 0..2 {
                    let s = next(&mut run, t, Outcome::Status(201), Some("twice"), 0);
                    run.delete(s, Outcome::Status(204));
                }
            }
            // Duplicated: acknowledged twice, the first deleted, the second left alive.
            700 => {
                let s = next(&mut run, t, Outcome::Status(201), Some("twice-live"), 0);
                run.delete(s, Outcome::Status(204));
                next(
                    &mut run,
                    t + 5.0,
                    Outcome::Status(201),
                    Some("twice-live"),
                    0,
                );
                run.place(0, "twice-live");
            }
            // Recovered: a 503 whose id is on a node at the end.
            800 => {
                next(&mut run, t, Outcome::Status(503), Some("uncertain-1"), 2);
                run.place(2, "uncertain-1");
            }
            // Recovered: a timeout without an id, then a stranger seen after it.
            900 => {
                next(&mut run, t, Outcome::Timeout, None, 0);
                run.place(1, "stranger-late");
                run.sample(t + 1.0);
            }
            // Orphaned: a stranger seen before any uncertain request is left.
            1_000 => {
                run.place(2, "stranger-early");
            }
            // Not a finding: deleted (204) yet still listed at the end.
            1_100 => {
                let s = next(&mut run, t, Outcome::Status(201), Some("still-there"), 1);
                run.place(1, "still-there");
                run.delete(s, Outcome::Status(204));
            }
            _ => {}
        }
    }
    // Duplicated across nodes: a live id listed by two nodes at the end.
    let (_, id, _) = live.last().unwrap().clone();
    run.place(0, &id);
    run.place(1, &id);
    run.sample(20_100.0);
    let (whole, compact, ledger, sighted) = run.audits();
    assert_eq!(compact, whole);
    assert_eq!(whole.lost.ids, ["gone-404", "lost-1"]);
    assert_eq!(whole.lost_to_node_restart.ids, ["restart-1"]);
    assert_eq!(whole.duplicated.ids, [id.as_str(), "twice", "twice-live"]);
    assert_eq!(whole.recovered.ids, ["stranger-late", "uncertain-1"]);
    assert_eq!(whole.orphaned.ids, ["stranger-early"]);
    // What the compact side kept: the unsettled and the anomalous, not the 2,000.
    assert!(
        ledger.entries.len() < 400,
        "kept {} entries",
        ledger.entries.len()
    );
    assert!(sighted < 400, "kept {sighted} sightings");
}

//! Property tests of the placement core's invariants.

use std::collections::BTreeMap;

use crate::sync_reply::{snapshot, InfoReply, Listed};
use crate::{
    score, AccountingMode, NodeMetrics, NodeStatus, PlacementConfig, PlacementCore, SyncSnapshot,
};
use proptest::prelude::*;

/// One event against the single node "n": `kind` picks the event, `slot` the sandbox.
#[derive(Debug, Clone)]
enum Op {
    Start {
        slot: usize,
        vcpu: u32,
    },
    Created {
        slot: usize,
    },
    Failed {
        slot: usize,
    },
    Refused {
        slot: usize,
    },
    Delete {
        slot: usize,
    },
    Sync,
    /// A sync carrying an older snapshot (lagging node); `age` syncs back.
    StaleSync {
        age: usize,
    },
    /// A sync whose metrics and ids are `age` syncs old while `List` answers live (the
    /// stampede extension with lagged metrics): an id no longer listed gets the vCPU the
    /// core recorded for it.
    LaggedIds {
        age: usize,
    },
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => (0..6usize, 1..5u32).prop_map(|(slot, vcpu)| Op::Start { slot, vcpu }),
        3 => (0..6usize).prop_map(|slot| Op::Created { slot }),
        1 => (0..6usize).prop_map(|slot| Op::Failed { slot }),
        1 => (0..6usize).prop_map(|slot| Op::Refused { slot }),
        2 => (0..6usize).prop_map(|slot| Op::Delete { slot }),
        2 => Just(Op::Sync),
        1 => (1..4usize).prop_map(|age| Op::StaleSync { age }),
    ]
}

#[derive(Clone, Copy)]
enum Slot {
    Idle,
    InFlight(u32),
    Live(u32),
}

/// The node's truth plus the events fed to one core per mode, and to one more per mode
/// that keeps only that mode's bookkeeping (`lean`).
struct Model {
    baseline: u32,
    slots: Vec<(String, Slot)>,
    next_id: usize,
    cores: Vec<PlacementCore>,
    lean: Vec<PlacementCore>,
    history: Vec<SyncSnapshot>,
    max_truth: u64,
    started_vcpu: u64,
}

impl Model {
    fn new(baseline: u32) -> Self {
        let cores = |lean: bool| {
            AccountingMode::ALL
                .iter()
                .map(|&mode| {
                    let mut c = PlacementCore::new(PlacementConfig {
                        mode,
                        ..PlacementConfig::default()
                    });
                    c.add_node("n");
                    if lean {
                        c.keep_only_configured_mode();
                    }
                    c
                })
                .collect()
        };
        let mut m = Self {
            baseline,
            slots: vec![(String::new(), Slot::Idle); 6],
            next_id: 0,
            cores: cores(false),
            lean: cores(true),
            history: Vec::new(),
            max_truth: u64::from(baseline),
            started_vcpu: 0,
        };
        m.sync();
        m
    }

    fn truth(&self) -> u64 {
        let live: u64 = self
            .slots
            .iter()
            .map(|(_, s)| match s {
                Slot::Live(v) => u64::from(*v),
                _ => 0,
            })
            .sum();
        u64::from(self.baseline) + live
    }

    fn in_flight_vcpu(&self) -> u64 {
        self.slots
            .iter()
            .map(|(_, s)| match s {
                Slot::InFlight(v) => u64::from(*v),
                _ => 0,
            })
            .sum()
    }

    fn snapshot(&self) -> SyncSnapshot {
        let ids = self
            .slots
            .iter()
            .filter_map(|(id, s)| match s {
                Slot::Live(v) => Some((id.clone(), *v)),
                _ => None,
            })
            .collect();
        SyncSnapshot {
            status: NodeStatus::Ready,
            metrics: NodeMetrics {
                cpu_allocated: u32::try_from(self.truth()).unwrap(),
                cpu_count: 16,
                ..NodeMetrics::default()
            },
            sandboxes: Some(ids),
            listed_now: None,
        }
    }

    fn sync(&mut self) {
        let snap = self.snapshot();
        self.history.push(snap.clone());
        for c in self.cores.iter_mut().chain(&mut self.lean) {
            c.apply_sync("n", snap.clone());
        }
    }

    fn apply(&mut self, op: &Op) {
        match *op {
            Op::Start { slot, vcpu } => {
                if let Slot::Idle = self.slots[slot].1 {
                    self.next_id += 1;
                    let id = format!("s{}", self.next_id);
                    for c in self.cores.iter_mut().chain(&mut self.lean) {
                        c.start_placing("n", &id, vcpu);
                    }
                    self.slots[slot] = (id, Slot::InFlight(vcpu));
                    self.started_vcpu += u64::from(vcpu);
                }
            }
            Op::Created { slot } | Op::Failed { slot } | Op::Refused { slot } => {
                let (id, Slot::InFlight(vcpu)) = self.slots[slot].clone() else {
                    return;
                };
                for c in self.cores.iter_mut().chain(&mut self.lean) {
                    match op {
                        Op::Created { .. } => c.create_succeeded("n", &id, vcpu),
                        Op::Failed { .. } => c.create_failed("n", &id),
                        _ => c.create_refused("n", &id),
                    }
                }
                self.slots[slot].1 = match op {
                    Op::Created { .. } => Slot::Live(vcpu),
                    _ => Slot::Idle,
                };
            }
            Op::Delete { slot } => {
                let (id, Slot::Live(vcpu)) = self.slots[slot].clone() else {
                    return;
                };
                for c in self.cores.iter_mut().chain(&mut self.lean) {
                    c.delete_succeeded("n", &id, vcpu);
                }
                self.slots[slot].1 = Slot::Idle;
            }
            Op::Sync => self.sync(),
            Op::StaleSync { age } => {
                let k = self.history.len().saturating_sub(age + 1);
                let snap = self.history[k].clone();
                for c in self.cores.iter_mut().chain(&mut self.lean) {
                    c.apply_sync("n", snap.clone());
                }
            }
            Op::LaggedIds { age } => {
                let k = self.history.len().saturating_sub(age + 1);
                let old = &self.history[k];
                let info = InfoReply {
                    status: old.status,
                    metrics: old.metrics,
                    ids: old
                        .sandboxes
                        .as_ref()
                        .map(|l| l.iter().map(|(id, _)| id.clone()).collect()),
                };
                let listed: Vec<Listed> = (self.snapshot().sandboxes.into_iter().flatten())
                    .map(|(id, vcpu)| Listed { id, vcpu })
                    .collect();
                for c in self.cores.iter_mut().chain(&mut self.lean) {
                    let snap = snapshot(&info, Some(&listed), c.node("n").unwrap().accounting());
                    c.apply_sync("n", snap);
                }
            }
        }
        self.max_truth = self.max_truth.max(self.truth());
    }

    fn believed(&self, mode: AccountingMode) -> u64 {
        let i = AccountingMode::ALL.iter().position(|&m| m == mode).unwrap();
        self.cores[i].believed_allocated_vcpu("n").unwrap()
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// With syncs that tell the truth, `reconciled` is exact between syncs (truth plus
    /// this instance's creates in flight), hence never above truth + in-flight, and equal
    /// to the truth once the creates ended and one sync was applied.
    #[test]
    fn reconciled_never_double_counts_nor_forgets(
        baseline in 0..20u32,
        ops in proptest::collection::vec(op().prop_filter("fresh syncs", |o| !matches!(o, Op::StaleSync { .. })), 0..60),
    ) {
        let mut m = Model::new(baseline);
        for op in &ops {
            m.apply(op);
            let believed = m.believed(AccountingMode::Reconciled);
            prop_assert!(believed <= m.truth() + m.in_flight_vcpu());
            prop_assert_eq!(believed, m.truth() + m.in_flight_vcpu());
        }
        for slot in 0..6 {
            m.apply(&Op::Failed { slot });
        }
        m.apply(&Op::Sync);
        for mode in AccountingMode::ALL {
            prop_assert_eq!(m.believed(mode), m.truth(), "{}", mode);
        }
    }

    /// Whatever the order and staleness of syncs, no mode's belief wraps below zero or
    /// grows beyond everything that could possibly be on the node.
    #[test]
    fn accounting_never_negative_nor_unbounded(
        baseline in 0..20u32,
        ops in proptest::collection::vec(op(), 0..80),
    ) {
        let mut m = Model::new(baseline);
        for op in &ops {
            m.apply(op);
            for mode in AccountingMode::ALL {
                let b = m.believed(mode);
                prop_assert!(b <= m.max_truth + m.started_vcpu, "{mode}: {b}");
            }
        }
    }

    /// A core that keeps only its configured mode's bookkeeping believes what a core
    /// keeping every mode's does, through fresh, stale and lagged syncs.
    #[test]
    fn keeping_only_the_configured_mode_changes_no_figure(
        baseline in 0..20u32,
        ops in proptest::collection::vec(
            prop_oneof![4 => op(), 1 => (1..4usize).prop_map(|age| Op::LaggedIds { age })],
            0..80,
        ),
    ) {
        let mut m = Model::new(baseline);
        for op in &ops {
            m.apply(op);
            for (full, lean) in m.cores.iter().zip(&m.lean) {
                prop_assert_eq!(
                    lean.believed_allocated_vcpu("n"),
                    full.believed_allocated_vcpu("n"),
                    "{}", full.config().mode
                );
            }
        }
    }

    /// More load never lowers the score; more CPUs never raise it.
    #[test]
    fn score_is_monotone_in_load(
        req in 0..64u32,
        reserved in 0..10_000u64,
        extra in 0..1_000u64,
        pct in 0..10_000u32,
        extra_pct in 0..1_000u32,
        cpus in 1..512u32,
        more_cpus in 0..64u32,
        r in 0.5..8.0f64,
        alpha in 0.0..2.0f64,
    ) {
        let base = score(req, reserved, pct, cpus, r, alpha);
        prop_assert!(score(req, reserved + extra, pct, cpus, r, alpha) >= base);
        prop_assert!(score(req, reserved, pct + extra_pct, cpus, r, alpha) >= base);
        prop_assert!(score(req + 1, reserved, pct, cpus, r, alpha) >= base);
        prop_assert!(score(req, reserved, pct, cpus + more_cpus, r, alpha) <= base);
        prop_assert!(base < score(req, reserved, pct, 0, r, alpha));
    }
}

/// Regression guard for the map the model relies on: ids are never reused.
#[test]
fn model_ids_are_unique() {
    let mut m = Model::new(0);
    let mut seen = BTreeMap::new();
    for slot in 0..6 {
        m.apply(&Op::Start { slot, vcpu: 1 });
        m.apply(&Op::Failed { slot });
        m.apply(&Op::Start { slot, vcpu: 1 });
        assert!(seen.insert(m.slots[slot].0.clone(), ()).is_none());
    }
}

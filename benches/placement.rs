//! One Best-of-K placement decision (sample K=3, score, pick) at 10, 100 and 1000 nodes.
//! E2B publishes 38.8 us on average for K=3 (`placement_benchmark_speed_test.go`).

use std::collections::BTreeSet;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use stampede::placement::{
    AccountingMode, NodeMetrics, NodeStatus, PlacementConfig, PlacementCore, SyncSnapshot,
};

fn fleet(n: usize, mode: AccountingMode, rng: &mut ChaCha8Rng) -> PlacementCore {
    let mut core = PlacementCore::new(PlacementConfig {
        mode,
        ..PlacementConfig::default()
    });
    for i in 0..n {
        let id = format!("node-{i:04}");
        core.add_node(id.clone());
        let sandboxes: Vec<(String, u32)> = (0..rng.random_range(0..20))
            .map(|s| (format!("{id}-s{s}"), 1))
            .collect();
        core.apply_sync(
            &id,
            SyncSnapshot {
                status: NodeStatus::Ready,
                metrics: NodeMetrics {
                    cpu_allocated: sandboxes.len() as u32,
                    cpu_count: 192,
                    cpu_percent: rng.random_range(0..5_000),
                    ..NodeMetrics::default()
                },
                sandboxes: Some(sandboxes),
                listed_now: None,
            },
        );
    }
    core
}

fn decision(c: &mut Criterion) {
    let mut group = c.benchmark_group("placement_decision");
    for n in [10usize, 100, 1000] {
        for mode in [AccountingMode::Reported, AccountingMode::Reconciled] {
            let mut rng = ChaCha8Rng::seed_from_u64(42);
            let mut core = fleet(n, mode, &mut rng);
            let excluded = BTreeSet::new();
            group.bench_with_input(BenchmarkId::new(mode.as_str(), n), &n, |b, _| {
                b.iter(|| core.choose(1, &excluded, &mut rng))
            });
        }
    }
    group.finish();
}

criterion_group!(benches, decision);
criterion_main!(benches);

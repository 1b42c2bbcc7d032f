//! Simulator speed: the e2b-pr2201 profile (25 s virtual, 4 modes; target < 100 ms wall)
//! and a scale run of 1,000 nodes x 1,000,000 placements (target < 10 s), each against
//! a baseline measured in the same run: one bare Best-of-K decision on the same fleet
//! size (what a placement costs without the simulation around it).
//!
//! The scale run has a second baseline, also measured in the same run: a bare event
//! loop, the least any discrete-event simulation of that workload does per placement
//! (the bare decision, a drawn create latency, and the three events a placement with a
//! lifetime needs, arrival, create done and delete, through the simulator's own event
//! queue), without a node model, accounting or measurement.
//!
//! `profiles/sim-churn-1000.yaml` (1,000 nodes x 1,000,000 placements at 20,000/s, 5 s
//! lifetimes) runs against the same two baselines, the bare event loop at its rate.
//!
//! `cargo bench --bench sim`; `SIM_BENCH_10K=1` runs 10,000 nodes x 1,000,000 placements
//! (default: x 100,000).

use std::collections::BTreeSet;
use std::hint::black_box;
use std::path::Path;
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, Criterion};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use stampede::placement::{
    AccountingMode, NodeId, NodeMetrics, NodeStatus, PlacementConfig, PlacementCore, SyncSnapshot,
};
use stampede::profile::{load_and_validate, parse, Profile, Source};
use stampede::sim::{simulate_profile, simulate_setup, EventQueue, SimBudget, SimSetup};

fn scale_profile(nodes: usize, placements: u64, lifetime_s: u64) -> Profile {
    let per_second = 10_000;
    let secs = placements / per_second;
    let yaml = format!(
        "name: sim-scale
seed: 1
cluster:
  nodes: {nodes}
  node:
    cpu_count: 192
    overcommit: 0
    max_sandboxes: 0
    max_starting: 0
    create_latency: {{dist: uniform, min: 0ms, max: 2ms}}
    baseline_vcpu: {{min: 0, max: 4}}
placement:
  embedded:
    accounting: optimistic
    sync_interval: 20s
workload:
  shape:
    rate: {{per_second: {per_second}, duration: {secs}s}}
  lifetime: {{dist: constant, value: {lifetime_s}s}}
collect:
  interval: 1s
"
    );
    parse(&Source::inline("sim-scale.yaml", yaml)).expect("bench profile parses")
}

/// A synced fleet of `n` idle nodes, as the simulator's cores see it.
fn bare_core(n: usize) -> PlacementCore {
    let mut core = PlacementCore::new(PlacementConfig::default());
    for i in 0..n {
        let id = format!("node-{i:05}");
        core.add_node(id.clone());
        let metrics = NodeMetrics {
            cpu_count: 192,
            cpu_allocated: (i % 5) as u32,
            ..NodeMetrics::default()
        };
        core.apply_sync(
            &id,
            SyncSnapshot {
                status: NodeStatus::Ready,
                metrics,
                sandboxes: Some(Vec::new()),
                listed_now: None,
            },
        );
    }
    core
}

/// Wall time of one bare Best-of-K decision on `n` nodes: the mean over `reps`
/// decisions, once per batch, `batches` times.
fn decision_times(n: usize, reps: u32, batches: usize) -> Vec<Duration> {
    let mut core = bare_core(n);
    let mut rng = ChaCha8Rng::seed_from_u64(1);
    let none = BTreeSet::new();
    (0..batches)
        .map(|_| {
            let t = Instant::now();
            for _ in 0..reps {
                black_box(core.choose(1, &none, &mut rng));
            }
            t.elapsed() / reps
        })
        .collect()
}

/// What the bare event loop schedules.
enum BareEvent {
    Arrival,
    CreateDone(NodeId),
    Delete(NodeId),
}

/// Wall time per placement of the bare event loop over `n` nodes: `placements` arrivals,
/// `per_second` of them a second, each a bare decision whose create ends after a
/// latency drawn as the scale profile draws it (uniform 0-2 ms) and whose sandbox is
/// deleted `lifetime_s` later, through the simulator's event queue.
fn bare_event_loop(n: usize, placements: u64, lifetime_s: u64, per_second: u64) -> Duration {
    let arrival_ns = 1_000_000_000 / per_second;
    const MAX_LATENCY_NS: u64 = 2_000_000;
    let mut core = bare_core(n);
    let mut rng = ChaCha8Rng::seed_from_u64(1);
    let none = BTreeSet::new();
    let lifetime = lifetime_s * 1_000_000_000;
    let mut queue = EventQueue::default();
    let (mut arrived, mut deleted) = (0u64, 0u64);
    let t = Instant::now();
    queue.push(0, BareEvent::Arrival);
    while let Some((now, e)) = queue.pop() {
        match e {
            BareEvent::Arrival => {
                arrived += 1;
                if arrived < placements {
                    queue.push(now + arrival_ns, BareEvent::Arrival);
                }
                if let Some(node) = core.choose(1, &none, &mut rng) {
                    let latency = rng.random_range(0..=MAX_LATENCY_NS);
                    queue.push(now + latency, BareEvent::CreateDone(node));
                }
            }
            BareEvent::CreateDone(node) => queue.push(now + lifetime, BareEvent::Delete(node)),
            BareEvent::Delete(node) => {
                black_box(node);
                deleted += 1;
            }
        }
    }
    let wall = t.elapsed();
    assert_eq!(deleted, placements, "every placement ran its three events");
    wall / placements as u32
}

fn scale_run(nodes: usize, placements: u64, lifetime_s: u64) {
    let profile = scale_profile(nodes, placements, lifetime_s);
    let what = format!("scale {nodes} nodes x {placements} placements, {lifetime_s} s lifetime");
    against_floors(&what, &profile, (nodes, placements, lifetime_s, 10_000));
}

/// `profile` simulated in its configured mode, against a bare decision on its fleet and
/// the bare event loop of `(nodes, placements, lifetime_s, per_second)` around it.
fn against_floors(what: &str, profile: &Profile, floor_of: (usize, u64, u64, u64)) {
    let (nodes, placements, lifetime_s, per_second) = floor_of;
    let setup = SimSetup::from_profile(profile, AccountingMode::Optimistic).expect("setup");
    // The baseline is measured around the run (before and after), in batches, and its
    // median taken: one batch alone moved by 2x between runs on the shared machine.
    let mut base = decision_times(nodes, 20_000, 7);
    let mut floor: Vec<Duration> = (0..3)
        .map(|_| bare_event_loop(nodes, placements, lifetime_s, per_second))
        .collect();
    let t = Instant::now();
    let run = simulate_setup(
        &setup,
        "scale".into(),
        Default::default(),
        &SimBudget::default(),
    )
    .expect("within the default budget");
    let wall = t.elapsed();
    base.extend(decision_times(nodes, 20_000, 7));
    floor.extend((0..3).map(|_| bare_event_loop(nodes, placements, lifetime_s, per_second)));
    floor.sort();
    let (floor_lo, floor_hi) = (floor[0], floor[floor.len() - 1]);
    let floor = floor[floor.len() / 2];
    base.sort();
    let (lo, hi) = (base[0], base[base.len() - 1]);
    let base = base[base.len() / 2];
    let per_placement = wall / run.result.requests.max(1) as u32;
    println!(
        "sim {what}: {} placements, {:.2} s wall, {:.0} s virtual \
         ({:.0}x real time), {} events ({:.1} M events/s), {:.2} us per placement = \
         {:.1}x a bare decision ({:.2} us median of 14 batches, {:.2}..{:.2}) = {:.1}x a bare \
         event loop ({:.2} us median of 6 runs, {:.2}..{:.2}; itself {:.1}x a bare decision), \
         ok {}, CV {:.3}",
        run.result.requests,
        wall.as_secs_f64(),
        run.virtual_ns as f64 / 1e9,
        run.virtual_ns as f64 / 1e9 / wall.as_secs_f64(),
        run.events,
        run.events as f64 / wall.as_secs_f64() / 1e6,
        per_placement.as_secs_f64() * 1e6,
        per_placement.as_secs_f64() / base.as_secs_f64(),
        base.as_secs_f64() * 1e6,
        lo.as_secs_f64() * 1e6,
        hi.as_secs_f64() * 1e6,
        per_placement.as_secs_f64() / floor.as_secs_f64(),
        floor.as_secs_f64() * 1e6,
        floor_lo.as_secs_f64() * 1e6,
        floor_hi.as_secs_f64() * 1e6,
        floor.as_secs_f64() / base.as_secs_f64(),
        run.result.ok,
        run.result.skew.cv,
    );
}

fn pr2201(c: &mut Criterion) {
    let profile = load_and_validate(Path::new("profiles/e2b-pr2201.yaml")).expect("profile");
    let mut g = c.benchmark_group("sim");
    g.bench_function("e2b_pr2201_4_modes", |b| {
        b.iter(|| black_box(simulate_profile(&profile).expect("simulates")))
    });
    g.bench_function("baseline_one_decision_10_nodes", |b| {
        let mut core = bare_core(10);
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        let none = BTreeSet::new();
        b.iter(|| black_box(core.choose(1, &none, &mut rng)))
    });
    g.finish();
    // Ratio to real time: 4 runs x 25 s of virtual time.
    let t = Instant::now();
    let report = simulate_profile(&profile).expect("simulates");
    let wall = t.elapsed();
    let virtual_s: f64 = report.runs.iter().map(|r| r.wall_ms / 1000.0).sum();
    println!(
        "sim e2b-pr2201: 4 modes in {:.2} ms wall for {virtual_s:.0} s virtual ({:.0}x real time); \
         CV {}",
        wall.as_secs_f64() * 1000.0,
        virtual_s / wall.as_secs_f64(),
        report
            .runs
            .iter()
            .map(|r| format!("{} {:.3}", r.label, r.skew.cv))
            .collect::<Vec<_>>()
            .join(", ")
    );
}

fn scale(_c: &mut Criterion) {
    // 10,000 creates/s: a 5 s lifetime keeps ~50 sandboxes per node alive, 1 s ~10.
    scale_run(1_000, 1_000_000, 5);
    scale_run(1_000, 1_000_000, 1);
    if std::env::var_os("SIM_BENCH_10K").is_some() {
        scale_run(10_000, 1_000_000, 5);
    } else {
        scale_run(10_000, 100_000, 5);
    }
    let churn = load_and_validate(Path::new("profiles/sim-churn-1000.yaml")).expect("profile");
    against_floors("sim-churn-1000", &churn, (1_000, 1_000_000, 5, 20_000));
}

criterion_group!(benches, pr2201, scale);
criterion_main!(benches);

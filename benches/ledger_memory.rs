//! Heap bytes per create of a run's client ledger and truth-sample history, counted by
//! a global allocator over one simulated stream, the three ways a run can keep them,
//! each measured in the same process:
//!
//! 1. `bounded` (the bare baseline): a run that audits no sets ([`Ledger::bounded`],
//!    samples' ids dropped);
//! 2. `audited`: a run with `lost`/`duplicated` checks ([`Ledger::audited`] and a
//!    [`SampleHistory`] that forgets settled ids);
//! 3. `whole`: every entry and every sample kept ([`Ledger::new`] and a `Vec<Sample>`),
//!    as the set audit was fed before the audited ledger.
//!
//! The stream: RATE creates/s (default 200) for SECS (default 120) on 10 nodes, E2B-long
//! ids (21 bytes), each deleted (204) 10 s after its 201 and gone from its node, a truth
//! sample every second listing every live id. Live heap is read at FROM and TO seconds
//! of stream time (defaults 40 and 115); the figure is its growth over the creates in
//! between. No network and no clock: the figures are exact for the stream and do not
//! depend on the machine's load.
//!
//! `cargo bench --bench ledger_memory`; sizes from `BENCH_RATE`, `BENCH_SECS`;
//! `BENCH_TRACE=1` prints the live heap every 5 s of stream time on stderr.

use std::alloc::{GlobalAlloc, Layout, System};
use std::collections::VecDeque;
use std::sync::atomic::{AtomicI64, Ordering};

use stampede::aggregate::{RunShape, SettledIds};
use stampede::collect::{NodeSample, Sample, SampleHistory, Truth};
use stampede::workload::{Ledger, LedgerEntry, Outcome};

/// The system allocator, counting live bytes.
struct Counting;

static LIVE: AtomicI64 = AtomicI64::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        LIVE.fetch_add(layout.size() as i64, Ordering::Relaxed);
        // SAFETY: forwarded unchanged to the system allocator.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size() as i64, Ordering::Relaxed);
        // SAFETY: `ptr` came from `alloc` with this layout.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        LIVE.fetch_add(new_size as i64 - layout.size() as i64, Ordering::Relaxed);
        // SAFETY: forwarded unchanged to the system allocator.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

const NODES: usize = 10;
const LIFETIME_S: u64 = 10;

/// How a run keeps its ledger and samples.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Keep {
    Bounded,
    Audited,
    Whole,
}

/// Live heap bytes at FROM and TO seconds of the stream, and the creates in between.
fn stream(keep: Keep, rate: u64, secs: u64, from: u64, to: u64) -> (i64, i64, u64) {
    let trace = std::env::var_os("BENCH_TRACE").is_some();
    let settled = SettledIds::default();
    let mut ledger = match keep {
        Keep::Bounded => Ledger::bounded(RunShape::Paced, true),
        Keep::Audited => Ledger::audited(RunShape::Paced, true, settled.clone(), false),
        Keep::Whole => Ledger::new(),
    };
    let mut history = (keep == Keep::Audited).then(|| SampleHistory::new().forgetting(settled));
    let mut kept: Vec<Sample> = Vec::new();
    let mut live: VecDeque<(usize, u64, String, usize)> = VecDeque::new();
    let (mut at_from, mut at_to, mut between) = (0, 0, 0);
    let mut slot = 0usize;
    for second in 0..secs {
        if second == from {
            at_from = LIVE.load(Ordering::Relaxed);
        }
        if second == to {
            at_to = LIVE.load(Ordering::Relaxed);
        }
        if trace && second % 5 == 0 {
            eprintln!(
                "{keep:?} {second} s: {} bytes live",
                LIVE.load(Ordering::Relaxed)
            );
        }
        for k in 0..rate {
            let t_ms = (second * 1000) as f64 + k as f64 * 1000.0 / rate as f64;
            let id = format!("i{slot:0>20}");
            let node = slot % NODES;
            ledger.record(LedgerEntry {
                index: slot,
                target: 0,
                intended_ms: t_ms,
                sent_ms: t_ms,
                latency_us: 20_000,
                outcome: Outcome::Status(201),
                sandbox_id: Some(id.clone()),
                node: Some(format!("node-{node:02}")),
                deleted: None,
            });
            live.push_back((slot, second, id, node));
            if (from..to).contains(&second) {
                between += 1;
            }
            slot += 1;
        }
        while live
            .front()
            .is_some_and(|(_, born, _, _)| born + LIFETIME_S <= second)
        {
            if let Some((s, _, _, _)) = live.pop_front() {
                ledger.record_delete(s, Outcome::Status(204));
            }
        }
        let sample = truth_sample(second, &live, keep != Keep::Bounded);
        match (&mut history, keep) {
            (Some(h), _) => h.note(&sample),
            (None, Keep::Whole) => kept.push(sample),
            _ => drop(sample),
        }
    }
    ledger.finish();
    std::hint::black_box((&ledger, &history, &kept));
    (at_from, at_to, between)
}

/// The truth at `second`: every live id on its node (ids only when `ids`).
fn truth_sample(second: u64, live: &VecDeque<(usize, u64, String, usize)>, ids: bool) -> Sample {
    let mut per_node: Vec<Vec<String>> = vec![Vec::new(); NODES];
    for (_, _, id, node) in live {
        per_node[*node].push(id.clone());
    }
    let nodes = per_node
        .into_iter()
        .enumerate()
        .map(|(k, list)| NodeSample {
            id: format!("node-{k:02}"),
            sandboxes: list.len() as u64,
            allocated_vcpu: list.len() as f64,
            ids: ids.then_some(list),
            status: "healthy".into(),
            service_id: Some("incarnation-1".into()),
            refused: None,
        })
        .collect();
    Sample {
        t_ms: (second * 1000) as f64,
        truth: Truth { nodes },
        believed: Vec::new(),
        allocated_after: Default::default(),
        calls: Vec::new(),
    }
}

fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn main() {
    let rate = env_u64("BENCH_RATE", 200).max(1);
    let secs = env_u64("BENCH_SECS", 120).max(3);
    let (from, to) = (secs / 3, secs * 23 / 24);
    println!(
        "{rate} creates/s for {secs} s, {LIFETIME_S} s lifetimes, {NODES} nodes; \
         live heap growth from {from} s to {to} s"
    );
    println!("| keeps | heap at {from} s | heap at {to} s | bytes per create | vs bounded |");
    println!("|---|---|---|---|---|");
    let mut bare = None;
    for keep in [Keep::Bounded, Keep::Audited, Keep::Whole] {
        let (a, b, n) = stream(keep, rate, secs, from, to);
        let per = (b - a) as f64 / n.max(1) as f64;
        let base = *bare.get_or_insert(per);
        println!(
            "| {keep:?} | {:.1} MiB | {:.1} MiB | {per:.1} | {:+.1} |",
            a as f64 / 1048576.0,
            b as f64 / 1048576.0,
            per - base
        );
    }
}

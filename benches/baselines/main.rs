//! Figures as ratios against bare baselines, each pair measured in the same run with
//! the same client:
//!
//! 1. mock-node `Create` (unique ids) and `ServiceInfo` vs a bare tonic server with the
//!    same protos (a map store, a constant reply);
//! 2. the embedded service's `POST /sandboxes` (through one mock node) vs a bare axum
//!    handler answering the same JSON, and vs that handler making one bare tonic
//!    Create call before it answers (the floor of a service that asks its node);
//! 3. a burst of 500 (`profiles/burst-500.yaml`): the server-side arrival spread vs the
//!    client's own send spread.
//!
//! Servers run on a runtime of their own (one worker thread, like a separate process
//! pinned to one core), the client on another (one worker). Rounds alternate baseline
//! and subject; the ratio is the median subject rate over the median baseline rate.
//!
//! `cargo bench --bench baselines` (all), or name parts: `-- grpc h2load rest burst`.
//! Sizes: `BENCH_REQUESTS` (gRPC, default 100000), `BENCH_H2LOAD_REQUESTS` (default
//! 200000), `BENCH_REST_REQUESTS` (default 20000),
//! `BENCH_ROUNDS` (default 3), `BENCH_BURSTS` (default 5).

mod burst;
mod floor;
mod grpc;
mod h2load;
mod load;
mod rest;
mod table;

use table::Table;

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn main() {
    // `cargo bench` passes `--bench`; every other argument names a part.
    let parts: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with('-'))
        .collect();
    let wants = |p: &str| parts.is_empty() || parts.iter().any(|x| x == p);
    let rounds = env_usize("BENCH_ROUNDS", 3).max(1);
    let mut table = Table::default();
    if wants("grpc") {
        let n = env_usize("BENCH_REQUESTS", 100_000);
        grpc::run(n, rounds, &mut table);
    }
    if wants("h2load") {
        let n = env_usize("BENCH_H2LOAD_REQUESTS", 200_000);
        h2load::run(n, rounds, &mut table);
    }
    if wants("rest") {
        let n = env_usize("BENCH_REST_REQUESTS", 20_000);
        rest::run(n, rounds, &mut table);
    }
    if wants("burst") {
        burst::run(env_usize("BENCH_BURSTS", 5).max(1), &mut table);
    }
    print!("{}", table.markdown());
}

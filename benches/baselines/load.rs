//! The one client loop every pair shares, and the two runtimes.

use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A runtime of `threads` worker threads named `name`.
pub fn runtime(name: &str, threads: usize) -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(threads)
        .thread_name(name)
        .enable_all()
        .build()
        .expect("a tokio runtime")
}

/// Name prefix of the server runtime's threads, whose CPU time [`server_cpu`] sums.
pub const SERVER_THREADS: &str = "bench-server";

/// Name prefix of the runtime a subject's mock node runs on when its CPU is kept apart
/// from the subject's (the `rest` part).
pub const MOCK_THREADS: &str = "bench-mock";

/// CPU time used so far by this process's threads named [`SERVER_THREADS`] (Linux
/// `/proc/self/task/*/schedstat`, nanoseconds on CPU). A round's difference is the
/// server's own cost of the round's requests, whatever else the machine runs: unlike
/// the wall-clock rate, other processes on the cores do not inflate it.
pub fn server_cpu() -> Duration {
    cpu_of(SERVER_THREADS)
}

/// CPU time used so far by this process's threads whose name starts with `prefix`.
pub fn cpu_of(prefix: &str) -> Duration {
    let mut ns = 0u64;
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return Duration::ZERO;
    };
    for task in tasks.flatten() {
        let dir = task.path();
        let named = std::fs::read_to_string(dir.join("comm"))
            .map(|c| c.starts_with(prefix))
            .unwrap_or(false);
        if !named {
            continue;
        }
        if let Ok(stat) = std::fs::read_to_string(dir.join("schedstat")) {
            ns += stat
                .split_whitespace()
                .next()
                .and_then(|v| v.parse::<u64>().ok())
                .unwrap_or(0);
        }
    }
    Duration::from_nanos(ns)
}

/// A round's rate and the server CPU it took.
#[derive(Debug, Clone, Copy)]
pub struct Measured {
    /// Wall-clock rate seen by the client.
    pub rate: Rate,
    /// Answered requests per second of server CPU.
    pub per_cpu_second: f64,
}

/// Runs `round` on the calling thread and charges it the server CPU it used.
pub fn measured(round: impl FnOnce() -> Rate, n: usize) -> Measured {
    let before = server_cpu();
    let rate = round();
    let cpu = server_cpu().saturating_sub(before).as_secs_f64();
    let answered = (n - rate.errors.min(n)) as f64;
    Measured {
        rate,
        per_cpu_second: if cpu > 0.0 { answered / cpu } else { f64::NAN },
    }
}

/// Throughput of one round.
#[derive(Debug, Clone, Copy)]
pub struct Rate {
    /// Answered requests per second (errors excluded).
    pub per_second: f64,
    /// Requests that failed.
    pub errors: usize,
}

/// Sends `n` requests, `concurrency` at a time (closed loop): worker `w` of the pool
/// calls `call(w, i)` for each request index `i` it claims. Returns the answered rate.
pub async fn closed_loop<F, Fut>(n: usize, concurrency: usize, call: F) -> Rate
where
    F: Fn(usize, usize) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = bool> + Send,
{
    let next = Arc::new(AtomicUsize::new(0));
    let errors = Arc::new(AtomicUsize::new(0));
    let call = Arc::new(call);
    let started = Instant::now();
    let mut tasks = tokio::task::JoinSet::new();
    for w in 0..concurrency {
        let (next, errors, call) = (next.clone(), errors.clone(), call.clone());
        tasks.spawn(async move {
            loop {
                let i = next.fetch_add(1, Relaxed);
                if i >= n {
                    return;
                }
                if !call(w, i).await {
                    errors.fetch_add(1, Relaxed);
                }
            }
        });
    }
    while tasks.join_next().await.is_some() {}
    let secs = started.elapsed().as_secs_f64();
    let errors = errors.load(Relaxed);
    Rate {
        per_second: (n - errors.min(n)) as f64 / secs,
        errors,
    }
}

//! The one client loop every pair shares, and the two runtimes.

use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
use std::sync::Arc;
use std::time::Instant;

/// A runtime of `threads` worker threads named `name`.
pub fn runtime(name: &str, threads: usize) -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(threads)
        .thread_name(name)
        .enable_all()
        .build()
        .expect("a tokio runtime")
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

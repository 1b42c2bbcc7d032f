//! The threads that compile and evaluate Nomad `filter` expressions, away from the async
//! runtime that serves the nodes' gRPC.
//!
//! A filter's cost is CPU work the executor must never do: a few hostile filters on the
//! runtime's worker threads (or on as many blocking threads as there are requests) keep
//! every node of the fleet from answering. This pool runs that work on
//! [`FILTER_THREADS`] threads of lowered priority, with at most [`FILTER_QUEUE`] jobs
//! waiting; a job beyond that is refused at once ([`PoolFull`]), so a flood of filters
//! costs a bounded amount of CPU and memory and the rest of the fleet keeps a core.

use std::sync::mpsc::{sync_channel, Receiver, SyncSender, TrySendError};
use std::sync::{Arc, Mutex};

/// Threads evaluating filters. One: E2B's API lists nodes once per discovery tick, and a
/// single thread leaves the other cores to the nodes whatever the flood.
pub(crate) const FILTER_THREADS: usize = 1;

/// Jobs that may wait for a thread. With the worst filter within the limits costing tens
/// of milliseconds, a full queue is answered within about a second.
pub(crate) const FILTER_QUEUE: usize = 16;

/// How much less urgent a filter thread is than the rest of the process (a `nice`
/// increment).
const NICE_INCREMENT: i32 = 10;

type Job = Box<dyn FnOnce() + Send>;

/// The queue was full: the job was not taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("mock-node: {FILTER_QUEUE} filters are already waiting; retry later")]
pub(crate) struct PoolFull;

/// Why a job gave no result.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub(crate) enum PoolError {
    /// The queue was full.
    #[error(transparent)]
    Full(#[from] PoolFull),
    /// The job panicked or the pool stopped before it ran.
    #[error("mock-node: the filter job was lost")]
    Lost,
}

/// A fixed set of threads fed by a bounded queue. Dropping the pool lets its threads
/// finish the jobs already queued and exit.
pub(crate) struct FilterPool {
    tx: SyncSender<Job>,
}

impl FilterPool {
    /// Starts `threads` threads (at least one) behind a queue of `queue` jobs.
    pub(crate) fn new(threads: usize, queue: usize) -> std::io::Result<FilterPool> {
        let (tx, rx) = sync_channel::<Job>(queue);
        let rx = Arc::new(Mutex::new(rx));
        for k in 0..threads.max(1) {
            let rx = rx.clone();
            std::thread::Builder::new()
                .name(format!("nomad-filter-{k}"))
                .spawn(move || worker(&rx))?;
        }
        Ok(FilterPool { tx })
    }

    /// Queues `job`; its result arrives on the receiver. Refused at once when the queue
    /// is full.
    pub(crate) fn submit<R: Send + 'static>(
        &self,
        job: impl FnOnce() -> R + Send + 'static,
    ) -> Result<tokio::sync::oneshot::Receiver<R>, PoolError> {
        let (done, result) = tokio::sync::oneshot::channel();
        let boxed: Job = Box::new(move || {
            // The receiver is gone when the client hung up; nothing to answer then.
            let _ = done.send(job());
        });
        match self.tx.try_send(boxed) {
            Ok(()) => Ok(result),
            Err(TrySendError::Full(_)) => Err(PoolFull.into()),
            Err(TrySendError::Disconnected(_)) => Err(PoolError::Lost),
        }
    }

    /// Runs `job` on a pool thread and waits for its result without blocking the
    /// executor; refused at once when the queue is full.
    pub(crate) async fn run<R: Send + 'static>(
        &self,
        job: impl FnOnce() -> R + Send + 'static,
    ) -> Result<R, PoolError> {
        self.submit(job)?.await.map_err(|_| PoolError::Lost)
    }
}

fn worker(rx: &Mutex<Receiver<Job>>) {
    lower_priority();
    loop {
        // The lock is held only while waiting for the next job, never while running one.
        let job = {
            let rx = rx.lock().unwrap_or_else(|p| p.into_inner());
            rx.recv()
        };
        let Ok(job) = job else { return };
        // A panicking job drops its sender: its caller sees `Lost`, the thread goes on.
        let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(job));
    }
}

/// Raises this thread's nice value by [`NICE_INCREMENT`] (Linux sets it per thread, at
/// most 19). Under contention the nodes' threads run first, and a filter still gets its
/// share: a filter thread that only ran on idle CPU would starve on a busy machine.
fn lower_priority() {
    #[cfg(target_os = "linux")]
    // SAFETY: system calls on the calling thread's own id; no memory is shared.
    unsafe {
        let tid = libc::syscall(libc::SYS_gettid) as libc::id_t;
        *libc::__errno_location() = 0;
        let now = libc::getpriority(libc::PRIO_PROCESS, tid);
        if *libc::__errno_location() == 0 {
            let _ = libc::setpriority(libc::PRIO_PROCESS, tid, (now + NICE_INCREMENT).min(19));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test]
    async fn a_full_queue_refuses_at_once_and_the_pool_keeps_working() {
        let pool = FilterPool::new(1, 2).expect("threads start");
        let (started, running) = std::sync::mpsc::channel::<()>();
        let (release, gate) = std::sync::mpsc::channel::<()>();
        let first = pool
            .submit(move || {
                let _ = started.send(());
                let _ = gate.recv_timeout(Duration::from_secs(10));
            })
            .expect("the first job is taken");
        running
            .recv_timeout(Duration::from_secs(10))
            .expect("the thread runs the first job");
        // The thread is held: two jobs wait, the third is refused without waiting.
        let waiting: Vec<_> = (0..2)
            .map(|k| pool.submit(move || k).expect("a queued job is taken"))
            .collect();
        assert_eq!(pool.submit(|| 9).err(), Some(PoolError::Full(PoolFull)));
        release.send(()).expect("the first job listens");
        first.await.expect("the first job ran");
        for (k, w) in waiting.into_iter().enumerate() {
            assert_eq!(w.await.expect("a queued job ran"), k);
        }
        assert_eq!(pool.run(|| 7).await, Ok(7));
        let panicked = pool.run(|| -> u8 { panic!("a bad job") }).await;
        assert_eq!(panicked, Err(PoolError::Lost));
        assert_eq!(pool.run(|| 8).await, Ok(8), "the thread survives a panic");
    }
}

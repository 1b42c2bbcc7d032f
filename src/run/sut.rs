//! The embedded system under test (mock-node fleet and placement replicas) runs on a
//! tokio runtime of its own, as it would in a process of its own: its connection tasks
//! then wake when their bytes arrive instead of queueing behind the workload's
//! hundreds of user tasks on a shared run queue, so the service sees a burst when it
//! reaches the socket, not when the client's queue drains.

use std::future::Future;

use super::StageError;

/// Worker threads of the system under test's runtime.
const SUT_WORKERS: usize = 2;

/// A runtime hosting the embedded fleet and service of one run.
pub(super) struct SutRuntime {
    rt: tokio::runtime::Runtime,
}

impl SutRuntime {
    /// A fresh runtime for one run.
    pub(super) fn start() -> Result<Self, StageError> {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(SUT_WORKERS)
            .thread_name("stampede-sut")
            .enable_all()
            .build()
            .map_err(|e| StageError::Fleet(format!("cannot start its runtime: {e}")))?;
        Ok(Self { rt })
    }

    /// Runs `f` on the system under test's runtime (tasks it spawns stay there).
    pub(super) async fn run<F>(&self, f: F) -> Result<F::Output, StageError>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        self.rt
            .spawn(f)
            .await
            .map_err(|e| StageError::Placement(format!("embedded task failed: {e}")))
    }

    /// Stops the runtime without blocking the caller's (its parts are stopped first).
    pub(super) fn stop(self) {
        self.rt.shutdown_background();
    }
}

//! E2B's evictor in the service: every [`EVICT_POLL`] the sandboxes whose end time has
//! passed are killed through the same path as `DELETE /sandboxes/{id}` (store entry
//! removed, node Delete, optimistic vCPU released on success or NotFound), at most
//! [`MAX_CONCURRENT_EVICTIONS`](stampede_placement::MAX_CONCURRENT_EVICTIONS) at a
//! time. Which ones is the core's decision ([`due_evictions`]). The ids it killed are
//! kept ([`Shared::evicted`]) so that a set audit forgives those and no others.
//! `ServeConfig::evictor` off (`stampede serve --no-evictor`) leaves it out.

use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::time::SystemTime;

use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use super::kill::delete_sandbox;
use super::state::{lock, Shared};
use stampede_placement::{due_evictions, EVICT_POLL};

/// Run the evictor until `cancel`; evictions in flight then finish (as E2B's do).
pub(crate) async fn evict_forever(shared: Arc<Shared>, cancel: CancellationToken) {
    let mut tick = tokio::time::interval(EVICT_POLL);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    let mut running = JoinSet::new();
    loop {
        tokio::select! {
            () = cancel.cancelled() => break,
            Some(_) = running.join_next(), if !running.is_empty() => continue,
            _ = tick.tick() => {}
        }
        let due = {
            let known = lock(&shared.sandboxes);
            let removing = lock(&shared.removing);
            due_evictions(
                known.iter().map(|(id, r)| (id.as_str(), r.end_at)),
                SystemTime::now(),
                &removing,
            )
        };
        for id in due {
            lock(&shared.removing).insert(id.clone());
            // Recorded before the Delete: an audit that reads the nodes and then this
            // list cannot miss one in flight; one whose Delete fails stays on its node.
            lock(&shared.evicted).push(id.clone());
            let shared = shared.clone();
            running.spawn(async move {
                if delete_sandbox(shared.clone(), id).await.is_ok() {
                    shared.telemetry.evictions.fetch_add(1, Relaxed);
                }
            });
        }
    }
    while running.join_next().await.is_some() {}
}

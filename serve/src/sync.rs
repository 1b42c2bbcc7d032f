//! The node manager's sync: `ServiceInfo` then `List` on every node, fed to the core as
//! one [`Input::Synced`] (the placer builds the snapshot), tried up to [`SYNC_MAX_RETRIES`] times a cycle; a cycle that
//! never completes marks the node unhealthy (or leaves it connecting if it never
//! answered). Sandboxes a node runs that this instance does not know are counted as
//! orphans and, with `kill_orphans` (the default of a single instance), killed as E2B's
//! `Store.Reconcile` does once a minute old.

use std::collections::BTreeSet;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use stampede_proto::ServiceInfoResponse;

use super::node_client::ListedOnNode;
use super::state::{lock, NodeConn, Shared};
use stampede_placement::is_orphan_to_kill;
use stampede_placement::{DeleteOutcome, InfoReply, Input, Output};

/// Nodes synced at once. Enough to overlap every round trip of a usual fleet; on a
/// fleet of thousands, all at once would open thousands of connections together and
/// most would miss their RPC deadline (measured: 1,800 of 10,000 synced), while a
/// bounded window lets each sync finish in its deadline.
const SYNC_CONCURRENCY: usize = 256;

/// Sync every node once (up to [`SYNC_CONCURRENCY`] at a time), serialized with other
/// syncs.
pub(crate) async fn sync_all(shared: &Arc<Shared>) {
    use futures::StreamExt;
    let _one_at_a_time = shared.sync_lock.lock().await;
    let mut waiting = shared.nodes.values();
    let mut running = futures::stream::FuturesUnordered::new();
    for node in waiting.by_ref().take(SYNC_CONCURRENCY) {
        running.push(sync_node(shared, node));
    }
    while running.next().await.is_some() {
        if let Some(node) = waiting.next() {
            running.push(sync_node(shared, node));
        }
    }
}

/// Tries of one node's sync per cycle (E2B's `nodemanager/sync.go`, `syncMaxRetries`).
pub const SYNC_MAX_RETRIES: usize = 4;

/// A sync reply the placer holds in transit ([`Output::SyncAt`]) is applied when its
/// drawn transit is over, counted from when the node's `ServiceInfo` answer came back
/// (the loopback leg before it is this service's own, and small).
async fn arrive(shared: &Shared, node: &NodeConn, out: Option<Output>, built: Instant) {
    let Some(Output::SyncAt { at, .. }) = out else {
        return;
    };
    let left = at
        .saturating_sub(shared.now())
        .saturating_sub(built.elapsed());
    tokio::time::sleep(left).await;
    shared.handle(Input::SyncArrived {
        node: node.id.as_str().into(),
    });
}

/// One node's sync cycle as E2B's `nodemanager/sync.go` runs it: up to
/// [`SYNC_MAX_RETRIES`] tries of ServiceInfo then List; a ServiceInfo answer is applied
/// (status, metrics) even when the List after it fails; a cycle without a complete try
/// marks the node unhealthy locally (still `connecting` if it never answered at all).
async fn sync_node(shared: &Arc<Shared>, node: &NodeConn) {
    let started = Instant::now();
    let limit = shared.cfg.rpc_timeout;
    let mut answered = false;
    for _ in 0..SYNC_MAX_RETRIES {
        let info = match node.client.service_info(limit).await {
            Ok(i) => i,
            Err(e) => {
                tracing::debug!(node = %node.id, error = %e, "ServiceInfo failed");
                continue;
            }
        };
        let built = Instant::now();
        answered = true;
        note_service_info(node, &info);
        let reply = info_reply(node, &info);
        match node.client.list(limit).await {
            Ok(listed) => {
                let out = shared.handle(Input::Synced {
                    node: node.id.as_str().into(),
                    info: reply,
                    listed: Some(listed.iter().map(ListedOnNode::listed).collect()),
                });
                arrive(shared, node, out, built).await;
                shared.telemetry.syncs.fetch_add(1, Relaxed);
                lock(&node.info).synced_once = true;
                finish_sync(shared, node, &listed, started).await;
                return;
            }
            Err(e) => {
                tracing::debug!(node = %node.id, error = %e, "List failed");
                let out = shared.handle(Input::Synced {
                    node: node.id.as_str().into(),
                    info: reply,
                    listed: None,
                });
                arrive(shared, node, out, built).await;
            }
        }
    }
    shared.telemetry.sync_failures.fetch_add(1, Relaxed);
    shared.handle(Input::SyncFailed {
        node: node.id.as_str().into(),
        answered,
    });
    let status = lock(&shared.placer)
        .core()
        .node(&node.id)
        .map(|n| n.reported_status());
    let mut ni = lock(&node.info);
    ni.sync_failures += 1;
    if let Some(status) = status {
        ni.note_status(status);
    }
}

/// ServiceInfo's details besides the metrics.
fn note_service_info(node: &NodeConn, info: &ServiceInfoResponse) {
    let mut ni = lock(&node.info);
    ni.service_id = info.service_id.clone();
    ni.version = info.service_version.clone();
    ni.commit = info.service_commit.clone();
    let m = info.machine_info.clone().unwrap_or_default();
    ni.machine = [
        m.cpu_family,
        m.cpu_model,
        m.cpu_model_name,
        m.cpu_architecture,
    ];
    ni.memory_used_bytes = info.metric_memory_used_bytes;
}

/// After a complete sync: forget sandboxes the node lost, count (and maybe kill) orphans.
async fn finish_sync(
    shared: &Arc<Shared>,
    node: &NodeConn,
    listed: &[ListedOnNode],
    started: Instant,
) {
    let orphans = reconcile_registry(shared, node, listed, started);
    lock(&node.info).orphans = orphans.len() as u64;
    shared
        .telemetry
        .orphans_seen
        .fetch_add(orphans.len() as u64, Relaxed);
    if shared.cfg.kill_orphans {
        kill_orphans(shared, node, listed, &orphans).await;
    }
}

/// E2B's `Store.Reconcile`: the orphans old enough ([`is_orphan_to_kill`], the core's
/// rule) are killed at once, in parallel, through the node's Delete; a success or a
/// NotFound releases their vCPU ([`PlacementCore::delete_ended`](stampede_placement::PlacementCore::delete_ended)).
async fn kill_orphans(
    shared: &Arc<Shared>,
    node: &NodeConn,
    listed: &[ListedOnNode],
    orphans: &[String],
) {
    let since_epoch = |t: SystemTime| t.duration_since(UNIX_EPOCH).unwrap_or_default();
    let now = since_epoch(SystemTime::now());
    let orphan: BTreeSet<&str> = orphans.iter().map(String::as_str).collect();
    let old_enough: Vec<&ListedOnNode> = listed
        .iter()
        .filter(|s| orphan.contains(s.id.as_str()))
        .filter(|s| {
            // A node that does not say when it started one: taken as started now.
            let started = s.started.map_or(now, since_epoch);
            is_orphan_to_kill(false, started, now, shared.cfg.orphan_grace)
        })
        .collect();
    let kills = old_enough.iter().map(|s| async move {
        let outcome = match node.client.delete(&s.id, shared.cfg.rpc_timeout).await {
            Ok(()) => DeleteOutcome::Deleted,
            Err(e) if e.code() == tonic::Code::NotFound => DeleteOutcome::NotOnNode,
            Err(e) => {
                tracing::debug!(node = %node.id, sandbox = %s.id, error = %e, "orphan kill failed");
                DeleteOutcome::Failed
            }
        };
        shared.handle(Input::DeleteEnded {
            node: node.id.as_str().into(),
            sandbox_id: s.id.as_str().into(),
            vcpu: s.vcpu,
            released: outcome.releases_vcpu(),
        });
        if outcome != DeleteOutcome::Failed {
            shared.telemetry.orphans_killed.fetch_add(1, Relaxed);
        }
    });
    futures::future::join_all(kills).await;
}

/// The placer's reading of a `ServiceInfo` answer, with the status set through
/// `POST /nodes/{nodeID}` in its place when there is one.
fn info_reply(node: &NodeConn, info: &ServiceInfoResponse) -> InfoReply {
    let mut reply = InfoReply::from(info);
    let mut ni = lock(&node.info);
    if let Some(s) = ni.status_override {
        reply.status = s;
    }
    ni.note_status(reply.status);
    reply
}

/// Forget sandboxes of this node that its `List` no longer shows although they were
/// created before the sync started (expired, or lost to a restart); return the listed
/// ids this instance does not know (orphans), excluding creates in progress.
fn reconcile_registry(
    shared: &Shared,
    node: &NodeConn,
    listed: &[ListedOnNode],
    sync_started: Instant,
) -> Vec<String> {
    let on_node: BTreeSet<&str> = listed.iter().map(|s| s.id.as_str()).collect();
    let mut known = lock(&shared.sandboxes);
    known.retain(|id, r| {
        r.node != node.id || on_node.contains(id.as_str()) || r.placed_at >= sync_started
    });
    let placing = lock(&shared.placing);
    let removing = lock(&shared.removing);
    listed
        .iter()
        .filter(|s| {
            !known.contains_key(&s.id) && !placing.contains(&s.id) && !removing.contains(&s.id)
        })
        .map(|s| s.id.clone())
        .collect()
}

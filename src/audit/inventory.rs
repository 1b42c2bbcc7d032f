//! What the nodes hold after the run, and what is known about how ids came and went.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use stampede_node_model::fault::FaultKind;

use crate::api_key::ApiKey;
use crate::chaos::AppliedFault;
use crate::collect::{list_over_grpc, Sample, SampleHistory, SeenAt, TruthSource};
use crate::mock_admin::{MockAdmin, MockAdminError};
use crate::serve::EvictedIds;

/// Every node's sandboxes after the run, plus the history the set audit needs to tell a
/// loss from an expected disappearance. Times are ms after the workload's start gate.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Inventory {
    /// Final ids per node id: the union of admin `/nodes` and gRPC `List`. An id listed
    /// twice by one node appears twice.
    pub nodes: BTreeMap<String, Vec<String>>,
    /// Restart times per node (from the chaos schedule and from `service_id` changes).
    pub restarts: BTreeMap<String, Vec<f64>>,
    /// Where each id was seen in the truth samples taken during the run.
    pub seen: BTreeMap<String, BTreeMap<String, SeenAt>>,
    /// Ids known to be gone legitimately (deleted by the API's evictor or by someone
    /// else than the workload). A node never drops a sandbox by itself.
    pub gone: BTreeSet<String>,
    /// Ids on the nodes before the workload began: not this run's, ignored.
    pub preexisting: BTreeSet<String>,
    /// Reads that failed but were covered by another source (`List on ...: ...`).
    pub read_errors: Vec<String>,
}

impl Inventory {
    /// Records where each id was seen and every `service_id` change (a restart, dated at
    /// the first sample showing the new incarnation). Samples must be in time order.
    pub fn note_samples(&mut self, samples: &[Sample]) {
        let mut h = SampleHistory::new();
        for s in samples {
            h.note(s);
        }
        self.note_history(h);
    }

    /// Takes the sightings and restarts of a run's sample history.
    pub fn note_history(&mut self, history: SampleHistory) {
        let (seen, restarts) = history.into_sightings();
        for (id, at) in seen {
            self.seen.entry(id).or_default().extend(at);
        }
        for (node, times) in restarts {
            for t in times {
                self.add_restart(&node, t);
            }
        }
    }

    /// Records the `restart` faults of a chaos schedule.
    pub fn note_restarts(&mut self, applied: &[AppliedFault]) {
        for a in applied {
            if a.planned.kind == FaultKind::Restart && a.was_applied() {
                for n in &a.planned.nodes {
                    self.add_restart(n, a.applied_at_ms);
                }
            }
        }
    }

    /// Marks as gone the sandboxes the API's evictor deleted.
    pub fn note_evicted<I: IntoIterator<Item = String>>(&mut self, ids: I) {
        self.gone.extend(ids);
    }

    /// Marks every id currently on the nodes as not this run's (call before the gate).
    pub fn note_preexisting(&mut self, before: &Inventory) {
        for ids in before.nodes.values() {
            self.preexisting.extend(ids.iter().cloned());
        }
    }

    fn add_restart(&mut self, node: &str, at_ms: f64) {
        crate::collect::add_restart(&mut self.restarts, node, at_ms);
    }

    /// Whether `node` restarted at or after `t_ms`.
    pub fn restarted_since(&self, node: &str, t_ms: f64) -> bool {
        self.restarts
            .get(node)
            .is_some_and(|r| r.iter().any(|&at| at >= t_ms))
    }
}

/// Why the inventory could not be read.
#[derive(Debug, thiserror::Error)]
pub enum InventoryError {
    /// An admin `/nodes` call failed.
    #[error("cannot read the fleet's node list")]
    Admin(#[from] MockAdminError),
    /// An orchestrator's `List` failed and no other source covers it.
    #[error("{0}")]
    List(String),
    /// The source does not list sandbox ids (an E2B API's `/nodes`).
    #[error("this truth source lists no sandbox ids: the set audit needs mock-node admin URLs or orchestrator addresses")]
    NoIds,
}

/// Reads every node's final inventory: for mock-node fleets, admin `GET /nodes` ids AND
/// gRPC `List` on each node's address (union; a failed `List` is noted in `read_errors`
/// since the admin ids cover it); for orchestrators, `List` alone (node key = address).
/// Call it after every fault is healed and one sync interval plus a margin has passed,
/// so that the service's orphan clean-up has run. History fields are left empty: fill
/// them with the `note_*` methods.
pub async fn collect_inventory(
    client: &reqwest::Client,
    source: &TruthSource,
    admin_token: Option<&str>,
) -> Result<Inventory, InventoryError> {
    let mut inv = Inventory::default();
    match source {
        TruthSource::MockAdmin(urls, token) => {
            let token = admin_token.or(token.as_ref().map(ApiKey::expose));
            for base in urls {
                let nodes = MockAdmin::new(client.clone(), base, token).nodes().await?;
                for n in nodes.nodes {
                    let mut ids = n.sandbox_ids;
                    match list_ids(&n.grpc_addr.to_string()).await {
                        Ok(listed) => {
                            let known: BTreeSet<String> = ids.iter().cloned().collect();
                            ids.extend(listed.into_iter().filter(|i| !known.contains(i)));
                        }
                        Err(e) => inv.read_errors.push(e.to_string()),
                    }
                    inv.nodes.entry(n.id).or_default().extend(ids);
                }
            }
        }
        TruthSource::Orchestrators(addrs) => {
            for a in addrs {
                let listed = list_ids(a).await.map_err(InventoryError::List)?;
                inv.nodes.entry(a.clone()).or_default().extend(listed);
            }
        }
        TruthSource::E2bApi { .. } => return Err(InventoryError::NoIds),
    }
    Ok(inv)
}

/// Why the evicted ids of a placement service could not be read.
#[derive(Debug, thiserror::Error)]
pub enum EvictedReadError {
    /// No service to ask: the target's evictions cannot be observed.
    #[error("no placement service answers admin calls here (no admin token or no service)")]
    NoService,
    /// The request failed (E2B's own API has no such route: 404).
    #[error("GET {url} failed")]
    Http {
        /// The URL asked.
        url: String,
        /// What went wrong.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
}

/// Ids the placement services at `bases` evicted, read from each one's
/// `GET /admin/evicted` (stampede's service only). `None` when a service answers 404:
/// it has no such list (E2B's API), so its evictions are not known.
pub async fn read_evicted(
    client: &reqwest::Client,
    bases: &[String],
    admin_token: Option<&ApiKey>,
) -> Result<Option<Vec<String>>, EvictedReadError> {
    let Some(token) = admin_token.filter(|_| !bases.is_empty()) else {
        return Err(EvictedReadError::NoService);
    };
    let mut ids = Vec::new();
    for base in bases {
        let url = format!("{}/admin/evicted", base.trim_end_matches('/'));
        let http = |source: Box<dyn std::error::Error + Send + Sync>| EvictedReadError::Http {
            url: url.clone(),
            source,
        };
        let resp = client
            .get(&url)
            .header("X-Admin-Token", token.expose())
            .timeout(Duration::from_secs(10))
            .send()
            .await
            .map_err(|e| http(e.into()))?;
        if resp.status() == reqwest::StatusCode::NOT_FOUND {
            return Ok(None);
        }
        if !resp.status().is_success() {
            return Err(http(format!("status {}", resp.status()).into()));
        }
        let body: EvictedIds = resp.json().await.map_err(|e| http(e.into()))?;
        ids.extend(body.sandbox_ids);
    }
    Ok(Some(ids))
}

/// Sandbox ids an orchestrator at `addr` (`host:port`) lists with `SandboxService/List`.
/// (`collect::list_over_grpc` does the same but is not exported from `collect`.)
async fn list_ids(addr: &str) -> Result<Vec<String>, String> {
    let node = list_over_grpc(addr).await.map_err(|e| e.to_string())?;
    Ok(node.ids.unwrap_or_default())
}

//! Faults on mock-node fleets (through mock-node's admin client), drains through the
//! placement APIs and `command` programs: apply a fault, get a guard that heals it.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use mock_node::admin_client::checked;
use mock_node::api::FaultInfo;

use super::backend::command::run_argv;
use super::plan::PlannedFault;
use crate::api_key::ApiKey;
use crate::error_chain::chain_text;
use crate::mock_admin::{MockAdmin, MockAdminError};
use crate::profile::CommandAction;

/// Deadline of one drain call to a placement API.
const CALL_TIMEOUT: Duration = Duration::from_secs(10);

/// Why an admin call failed.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ChaosError {
    /// The request did not complete (connection refused, timeout, bad body).
    #[error("{method} {url}: {message}")]
    Http {
        /// `GET`, `POST` or `DELETE`.
        method: &'static str,
        /// URL called.
        url: String,
        /// What went wrong.
        message: String,
    },
    /// The admin API answered with an error status.
    #[error("{method} {url}: status {status}: {message}")]
    Status {
        /// `GET`, `POST` or `DELETE`.
        method: &'static str,
        /// URL called.
        url: String,
        /// HTTP status.
        status: u16,
        /// The API's error message.
        message: String,
    },
    /// No admin API serves this node.
    #[error("no fleet serves node `{0}`")]
    UnknownNode(String),
    /// A `drain` step, but no placement API to send it to.
    #[error("a drain needs the placement API's URL (none given)")]
    NoApi,
    /// A `command` step's program failed, timed out or could not start.
    #[error("command {phase} `{program}`: {message}")]
    Command {
        /// `run` or `heal`.
        phase: &'static str,
        /// The program.
        program: String,
        /// What went wrong (exit status and the end of its stderr).
        message: String,
    },
}

/// A client of one or more mock-node admin APIs (`POST/GET /faults`, `DELETE /faults/{id}`).
/// Cheap to clone.
#[derive(Clone)]
pub struct ChaosClient {
    inner: Arc<Inner>,
}

struct Inner {
    http: reqwest::Client,
    token: Option<String>,
    /// One admin client per fleet, in the order of `fleets`.
    admins: Vec<MockAdmin>,
    /// Placement API base URLs and admin token, for `drain` steps.
    api: Vec<String>,
    api_token: Option<ApiKey>,
    /// Admin base URLs, without a trailing slash.
    fleets: Vec<String>,
    /// Which fleet serves which node; empty = everything goes to fleet 0.
    owner: BTreeMap<String, usize>,
    /// Drains and commands in force (no fleet lists them): key -> what heals it.
    /// Shared with the clients [`with_api`](ChaosClient::with_api) derives.
    outside: Arc<std::sync::Mutex<OutsideFaults>>,
}

/// The faults applied outside any mock-node fleet, by guard key.
#[derive(Debug, Default)]
struct OutsideFaults {
    next: u64,
    active: BTreeMap<u64, String>,
}

impl std::fmt::Debug for ChaosClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The bearer token is a secret: never printed.
        f.debug_struct("ChaosClient")
            .field("fleets", &self.inner.fleets)
            .field("token", &self.inner.token.as_ref().map(|_| "<redacted>"))
            .finish()
    }
}

impl ChaosClient {
    /// A client of one fleet's admin API (`http://127.0.0.1:4567`) that serves every node.
    pub fn new(admin_url: &str, token: Option<String>) -> Self {
        Self::build(vec![trim(admin_url)], token, BTreeMap::new())
    }

    /// A client of no mock-node fleet: for drills whose steps all go through the
    /// placement API (`drain`) or programs (`command`), as against a real cluster.
    pub fn without_fleet() -> Self {
        Self::build(Vec::new(), None, BTreeMap::new())
    }

    /// A client of several fleets: reads each one's `GET /nodes` to learn which fleet
    /// serves which node, so that a fault is sent to the fleets of its nodes.
    pub async fn discover(
        admin_urls: &[String],
        token: Option<String>,
    ) -> Result<Self, ChaosError> {
        let fleets: Vec<String> = admin_urls.iter().map(|u| trim(u)).collect();
        let probe = Self::build(fleets.clone(), token.clone(), BTreeMap::new());
        let mut owner = BTreeMap::new();
        for (k, admin) in probe.inner.admins.iter().enumerate() {
            let nodes = admin.nodes().await.map_err(admin_error)?;
            for n in nodes.nodes {
                owner.entry(n.id).or_insert(k);
            }
        }
        Ok(Self::build(fleets, token, owner))
    }

    fn build(fleets: Vec<String>, token: Option<String>, owner: BTreeMap<String, usize>) -> Self {
        let http = crate::http_client::client();
        let admins = fleets
            .iter()
            .map(|base| MockAdmin::new(http.clone(), base, token.as_deref()))
            .collect();
        ChaosClient {
            inner: Arc::new(Inner {
                http,
                token,
                admins,
                api: Vec::new(),
                api_token: None,
                fleets,
                owner,
                outside: Arc::default(),
            }),
        }
    }

    /// The same client, applying `drain` steps through the placement APIs at `services`
    /// (`POST /nodes/{nodeID}` with `X-Admin-Token: admin_token`). Each instance keeps
    /// its own view, so the drain is sent to every one of them.
    pub fn with_api(self, services: Vec<String>, admin_token: Option<ApiKey>) -> Self {
        let inner = &self.inner;
        ChaosClient {
            inner: Arc::new(Inner {
                http: inner.http.clone(),
                token: inner.token.clone(),
                admins: inner.admins.clone(),
                api: services.iter().map(|u| trim(u)).collect(),
                api_token: admin_token,
                fleets: inner.fleets.clone(),
                owner: inner.owner.clone(),
                outside: inner.outside.clone(),
            }),
        }
    }

    /// `POST /nodes/{node}` `{"status": status}` on every placement API.
    async fn set_node_status(&self, nodes: &[String], status: &str) -> Result<(), ChaosError> {
        if self.inner.api.is_empty() {
            return Err(ChaosError::NoApi);
        }
        for base in &self.inner.api {
            for n in nodes {
                let url = format!("{base}/nodes/{n}");
                let mut req = self
                    .inner
                    .http
                    .post(&url)
                    .timeout(CALL_TIMEOUT)
                    .json(&serde_json::json!({ "status": status }));
                if let Some(t) = &self.inner.api_token {
                    req = req.header("X-Admin-Token", t.expose());
                }
                let resp = req.send().await.map_err(|e| http("POST", &url, e))?;
                checked("POST", &url, resp).await.map_err(call_error)?;
            }
        }
        Ok(())
    }

    /// Admin base URLs, in the order given.
    pub fn fleets(&self) -> &[String] {
        &self.inner.fleets
    }

    fn fleet_of(&self, node: &str) -> Result<usize, ChaosError> {
        if self.inner.owner.is_empty() {
            return Ok(0);
        }
        self.inner
            .owner
            .get(node)
            .copied()
            .ok_or_else(|| ChaosError::UnknownNode(node.to_string()))
    }

    /// Applies `fault` (one `POST /faults` per fleet holding its nodes) and returns the
    /// guard that heals it. A `restart` is instant: its guard has nothing to heal.
    pub async fn apply(&self, fault: &PlannedFault) -> Result<FaultGuard, ChaosError> {
        if let Some(c) = &fault.command {
            let mut guard = FaultGuard {
                client: self.clone(),
                ids: Vec::new(),
                drained: Vec::new(),
                command: Some((c.clone(), fault.nodes.clone())),
                armed: true,
                outside: Some(self.outside_applied(format!(
                    "command on {} (heal it with: {})",
                    fault.nodes.join(","),
                    c.heal.join(" ")
                ))),
            };
            if let Err(e) = run_argv("run", &c.run, &fault.nodes, c.timeout).await {
                // `run` may have done part of its work: roll it back.
                let _ = guard.try_heal().await;
                return Err(e);
            }
            return Ok(guard);
        }
        if fault.through_api {
            let mut guard = FaultGuard {
                client: self.clone(),
                ids: Vec::new(),
                drained: fault.nodes.clone(),
                command: None,
                armed: true,
                outside: Some(self.outside_applied(format!(
                    "drain of {} (heal it with {} and body {{\"status\": \"ready\"}}, X-Admin-Token)",
                    fault.nodes.join(","),
                    self.inner
                        .api
                        .iter()
                        .flat_map(|b| fault.nodes.iter().map(move |n| format!("POST {b}/nodes/{n}")))
                        .collect::<Vec<_>>()
                        .join(", ")
                ))),
            };
            if let Err(e) = self.set_node_status(&fault.nodes, "draining").await {
                // Heal what may have been drained before the error.
                let _ = guard.try_heal().await;
                return Err(e);
            }
            return Ok(guard);
        }
        let mut per_fleet: BTreeMap<usize, Vec<String>> = BTreeMap::new();
        for n in &fault.nodes {
            per_fleet
                .entry(self.fleet_of(n)?)
                .or_default()
                .push(n.clone());
        }
        let mut guard = FaultGuard {
            client: self.clone(),
            ids: Vec::new(),
            drained: Vec::new(),
            command: None,
            armed: !fault.kind.is_instant(),
            outside: None,
        };
        for (k, nodes) in per_fleet {
            let mut body = fault.request();
            body.nodes = nodes;
            // On error the guard drops here and heals the parts already applied.
            let created = self.inner.admins[k]
                .add_fault(&body)
                .await
                .map_err(call_error)?;
            guard.ids.push((k, created.id));
        }
        Ok(guard)
    }

    /// Every fault of every fleet (`GET /faults`), healed ones included, as
    /// `(fleet index, fault)`.
    pub async fn list(&self) -> Result<Vec<(usize, FaultInfo)>, ChaosError> {
        let mut out = Vec::new();
        for (k, admin) in self.inner.admins.iter().enumerate() {
            let r = admin.faults().await.map_err(call_error)?;
            out.extend(r.faults.into_iter().map(|f| (k, f)));
        }
        Ok(out)
    }

    /// Heals fault `id` of fleet `fleet`; a fault already healed (404) is not an error.
    pub async fn heal(&self, fleet: usize, id: u64) -> Result<(), ChaosError> {
        let admin = self
            .inner
            .admins
            .get(fleet)
            .ok_or_else(|| ChaosError::UnknownNode(format!("fleet #{fleet}")))?;
        admin.heal_fault(id).await.map(|_| ()).map_err(call_error)
    }

    /// Drains and commands this client applied and has not healed, each with what
    /// heals it by hand (an abort prints them: no fleet lists them).
    pub fn outside_active(&self) -> Vec<String> {
        self.outside().active.values().cloned().collect()
    }

    fn outside(&self) -> std::sync::MutexGuard<'_, OutsideFaults> {
        self.inner
            .outside
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Records a drain or command in force; the key forgets it.
    fn outside_applied(&self, what: String) -> u64 {
        let mut o = self.outside();
        o.next += 1;
        let key = o.next;
        o.active.insert(key, what);
        key
    }

    fn outside_healed(&self, key: Option<u64>) {
        if let Some(k) = key {
            self.outside().active.remove(&k);
        }
    }
}

fn trim(url: &str) -> String {
    url.trim_end_matches('/').to_string()
}

/// A failed `GET /nodes`, as the chaos client reports its calls.
fn admin_error(e: MockAdminError) -> ChaosError {
    match e {
        MockAdminError::Request {
            method, ref url, ..
        } => ChaosError::Http {
            method,
            url: url.clone(),
            message: chain_text(&e),
        },
        e => call_error(e),
    }
}

/// A failed fault call: the transport's own message, or the API's status and message.
fn call_error(e: MockAdminError) -> ChaosError {
    match e {
        MockAdminError::Status {
            method,
            url,
            status,
            message,
        } => ChaosError::Status {
            method,
            url,
            status,
            message,
        },
        MockAdminError::Request {
            method,
            url,
            source,
        } => ChaosError::Http {
            method,
            url,
            message: source.to_string(),
        },
    }
}

fn http(method: &'static str, url: &str, e: reqwest::Error) -> ChaosError {
    ChaosError::Http {
        method,
        url: url.to_string(),
        message: e.to_string(),
    }
}

/// An applied fault. [`heal`](Self::heal) removes it; dropping an unhealed guard spawns
/// a best-effort `DELETE` on the current tokio runtime (if there is one).
#[must_use = "dropping the guard heals the fault"]
#[derive(Debug)]
pub struct FaultGuard {
    client: ChaosClient,
    /// `(fleet index, fault id)` per fleet the fault was sent to.
    ids: Vec<(usize, u64)>,
    /// Nodes a `drain` set to draining through the placement API (healed: `ready`).
    drained: Vec<String>,
    /// A `command` step's action and nodes (healed: its `heal` program).
    command: Option<(CommandAction, Vec<String>)>,
    armed: bool,
    /// Its key among the client's drains and commands in force.
    outside: Option<u64>,
}

impl FaultGuard {
    /// The admin API's fault id(s): `"7"`, or `"7+3"` when split over several fleets.
    pub fn id(&self) -> String {
        if !self.drained.is_empty() {
            return format!("drain:{}", self.drained.join(","));
        }
        if let Some((_, nodes)) = &self.command {
            return format!("command:{}", nodes.join(","));
        }
        let ids: Vec<String> = self.ids.iter().map(|(_, id)| id.to_string()).collect();
        ids.join("+")
    }

    /// `(fleet index, fault id)` pairs.
    pub fn ids(&self) -> &[(usize, u64)] {
        &self.ids
    }

    /// Removes the fault now (already healed by its duration counts as healed). On
    /// error the drop makes one more attempt in the background.
    pub async fn heal(mut self) -> Result<(), ChaosError> {
        self.try_heal().await
    }

    /// Removes the fault now, keeping the guard armed on error so the caller can retry.
    pub async fn try_heal(&mut self) -> Result<(), ChaosError> {
        if !self.armed {
            return Ok(());
        }
        let mut first_err = None;
        if let Some((c, nodes)) = &self.command {
            if let Err(e) = run_argv("heal", &c.heal, nodes, c.timeout).await {
                first_err.get_or_insert(e);
            }
        }
        if !self.drained.is_empty() {
            if let Err(e) = self.client.set_node_status(&self.drained, "ready").await {
                first_err.get_or_insert(e);
            }
        }
        for &(k, id) in &self.ids {
            if let Err(e) = self.client.heal(k, id).await {
                first_err.get_or_insert(e);
            }
        }
        match first_err {
            None => {
                self.armed = false;
                self.client.outside_healed(self.outside.take());
                Ok(())
            }
            Some(e) => Err(e),
        }
    }
}

impl Drop for FaultGuard {
    fn drop(&mut self) {
        if !self.armed || (self.ids.is_empty() && self.drained.is_empty() && self.command.is_none())
        {
            return;
        }
        let Ok(rt) = tokio::runtime::Handle::try_current() else {
            tracing::warn!(ids = ?self.ids, "fault guard dropped outside a runtime: not healed");
            return;
        };
        let client = self.client.clone();
        let ids = std::mem::take(&mut self.ids);
        let drained = std::mem::take(&mut self.drained);
        let command = self.command.take();
        let outside = self.outside.take();
        rt.spawn(async move {
            let mut healed = true;
            if let Some((c, nodes)) = command {
                if let Err(e) = run_argv("heal", &c.heal, &nodes, c.timeout).await {
                    healed = false;
                    tracing::warn!(error = %e, "healing a dropped command fault failed");
                }
            }
            if !drained.is_empty() {
                if let Err(e) = client.set_node_status(&drained, "ready").await {
                    healed = false;
                    tracing::warn!(nodes = ?drained, error = %e, "undraining a dropped drain failed");
                }
            }
            if healed {
                client.outside_healed(outside);
            }
            for (k, id) in ids {
                if let Err(e) = client.heal(k, id).await {
                    tracing::warn!(fault = id, error = %e, "healing a dropped fault failed");
                }
            }
        });
    }
}

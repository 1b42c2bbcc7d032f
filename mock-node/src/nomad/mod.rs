//! The part of Nomad's HTTP API that E2B's API reads to discover orchestrators.
//!
//! E2B's API (`packages/api/internal/orchestrator/discovery/`) lists the registrations
//! of its orchestrator service names (`GET /v1/service/<name>`), unions them with the
//! ready nodes of pool `default` (`GET /v1/nodes?filter=...`, dialled on port 5008), and
//! lists allocations to find template managers (`GET /v1/allocations`). mock-node
//! answers those calls for its whole virtual fleet, as KWOK fakes a control plane:
//! a real API pointed here with `NOMAD_ADDRESS` finds thousands of nodes in one process.
//!
//! Faithful to Nomad (`command/agent/http.go`, `service_registration_endpoint.go`):
//! JSON bodies (`[]` when empty), the `X-Nomad-Index` / `X-Nomad-LastContact` /
//! `X-Nomad-KnownLeader` headers the Go client requires, errors as `text/plain` with
//! Nomad's status and text, an unknown path as 404 with an empty body, an unknown
//! service as 200 `[]`, `filter` evaluated per object (400 on a bad expression). A node
//! whose gRPC listener is down (a `kill` fault) has no registration, as a failed
//! allocation has none; its Nomad node stays `ready`. A restart gives it a new
//! allocation id. Blocking queries (`index`, `wait`) are validated and answered at once.

pub(crate) mod filter;
mod filter_pool;
pub(crate) mod identity;
mod wire;

use std::collections::HashMap;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use axum::extract::{Path, Query, State};
use axum::http::{header, HeaderMap, HeaderValue, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::any;
use axum::Router;
use serde::Serialize;
use tokio::net::TcpListener;
use tokio::task::JoinHandle;

use crate::fleet::FleetShared;
pub(crate) use filter_pool::FilterPool;
use filter_pool::PoolError;
pub(crate) use identity::NomadIdentity;
use wire::{NodeListStub, ServiceListEntry, ServiceRegistration, ServiceStub};

/// How the virtual fleet presents itself to Nomad clients.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NomadOptions {
    /// Address of the Nomad HTTP API. Default `127.0.0.1:0`.
    pub addr: SocketAddr,
    /// Service name every node registers. Default `stampede-orchestrator`: never E2B's
    /// production `orchestrator`, so a production API cannot discover the mocks.
    pub service_name: String,
    /// Node pool of every virtual Nomad node. Default `default`, the pool E2B's legacy
    /// node-list discovery reads (it then finds the same node ids as the registrations,
    /// so nothing is counted twice).
    pub node_pool: String,
    /// Datacenter of nodes and registrations. Default `dc1` (Nomad's default).
    pub datacenter: String,
    /// Region this agent answers for. Default `global` (Nomad's default).
    pub region: String,
}

impl Default for NomadOptions {
    fn default() -> Self {
        Self {
            addr: SocketAddr::from((Ipv4Addr::LOCALHOST, 0)),
            service_name: "stampede-orchestrator".into(),
            node_pool: "default".into(),
            datacenter: "dc1".into(),
            region: "global".into(),
        }
    }
}

/// Job id the registrations carry.
const JOB_ID: &str = "stampede-mock-node";

/// Index of the first state; the Go client only needs a number it can parse.
const FIRST_INDEX: u64 = 10;

struct NomadState {
    fleet: Arc<FleetShared>,
    opts: NomadOptions,
    seed: u64,
    /// Raised each time the set of visible registrations changes (a blocking-query index).
    index: AtomicU64,
    last_view: Mutex<u64>,
    /// Where filters are compiled and evaluated, never on the executor.
    filters: FilterPool,
}

/// Starts the threads that compile and evaluate filters ([`spawn`] takes them).
pub(crate) fn filter_threads() -> std::io::Result<FilterPool> {
    FilterPool::new(filter_pool::FILTER_THREADS, filter_pool::FILTER_QUEUE)
}

/// Serves the Nomad API on `listener` until the fleet shuts down, its filters on
/// `filters`.
pub(crate) fn spawn(
    fleet: Arc<FleetShared>,
    listener: TcpListener,
    opts: NomadOptions,
    seed: u64,
    token: Option<stampede_http_kit::Secret>,
    filters: FilterPool,
) -> JoinHandle<()> {
    let stop = fleet.shutdown.clone();
    let state = Arc::new(NomadState {
        fleet,
        opts,
        seed,
        index: AtomicU64::new(FIRST_INDEX),
        last_view: Mutex::new(0),
        filters,
    });
    let mut app = Router::new()
        .route("/v1/service/{*rest}", any(service))
        .route("/v1/service/", any(missing_service_name))
        .route("/v1/services", any(services))
        .route("/v1/nodes", any(nodes))
        .route("/v1/allocations", any(allocations))
        .fallback(not_found)
        .with_state(state);
    if let Some(token) = token {
        let expected: Arc<str> = token.expose().into();
        app = app.layer(axum::middleware::from_fn(
            move |req: axum::extract::Request, next: axum::middleware::Next| {
                let expected = expected.clone();
                async move { nomad_token(expected, req, next).await }
            },
        ));
    }
    // The policy of every listener of the project: a stalled client cannot hold it open.
    tokio::spawn(stampede_http_kit::serve_bounded(
        listener,
        app,
        stampede_http_kit::LOCAL_API_LIMITS,
        stop,
        body_timed_out,
    ))
}

/// Nomad's ACL check: the token in `X-Nomad-Token`, else 403 "Permission denied".
async fn nomad_token(
    expected: Arc<str>,
    req: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    let ok = req
        .headers()
        .get("X-Nomad-Token")
        .is_some_and(|v| stampede_http_kit::constant_time_eq(v.as_bytes(), expected.as_bytes()));
    if ok {
        next.run(req).await
    } else {
        (
            StatusCode::FORBIDDEN,
            [(header::CONTENT_TYPE, "text/plain")],
            "Permission denied",
        )
            .into_response()
    }
}

/// A request body that missed its deadline: plain text, as a Nomad agent writes errors.
fn body_timed_out(e: stampede_http_kit::BodyTimedOut) -> axum::response::Response {
    use axum::response::IntoResponse;
    (axum::http::StatusCode::REQUEST_TIMEOUT, e.to_string()).into_response()
}

/// Why a Nomad call was refused; the text is the one a Nomad agent writes.
#[derive(Debug, thiserror::Error)]
enum NomadError {
    /// 400 with Nomad's message (bad `index`, `wait`, missing names, bad URI).
    #[error("{0}")]
    BadRequest(&'static str),
    /// 400: the filter does not parse.
    #[error("failed to create result paginator: {0}")]
    FilterSyntax(#[source] filter::FilterError),
    /// 400: the filter fails on an object (unknown field, type mismatch).
    #[error("failed to read result page: {0}")]
    FilterEval(#[source] filter::FilterError),
    /// 405 for a method the route does not take.
    #[error("Invalid method")]
    Method,
    /// 500 for a region this agent does not serve.
    #[error("No path to region")]
    NoRegion,
    /// 403: registrations follow the nodes; a client cannot delete one.
    #[error("Permission denied: mock-node registrations follow its nodes")]
    ReadOnly,
    /// 503: the filter threads have a full queue (mock-node's own bound).
    #[error("{0}")]
    FiltersBusy(#[source] PoolError),
    /// 503: the filter spent its CPU budget (mock-node's own bound).
    #[error("{0}")]
    FilterOverBudget(#[source] filter::FilterError),
}

impl IntoResponse for NomadError {
    fn into_response(self) -> Response {
        let status = match self {
            NomadError::BadRequest(_) | NomadError::FilterSyntax(_) | NomadError::FilterEval(_) => {
                StatusCode::BAD_REQUEST
            }
            NomadError::Method => StatusCode::METHOD_NOT_ALLOWED,
            NomadError::NoRegion => StatusCode::INTERNAL_SERVER_ERROR,
            NomadError::ReadOnly => StatusCode::FORBIDDEN,
            NomadError::FiltersBusy(_) | NomadError::FilterOverBudget(_) => {
                StatusCode::SERVICE_UNAVAILABLE
            }
        };
        // Nomad's error shape: a status and a plain-text message.
        (
            status,
            [(header::CONTENT_TYPE, "text/plain")],
            self.to_string(),
        )
            .into_response()
    }
}

/// Nomad's unknown-path answer (`handleRootFallthrough`): 404 with no body.
async fn not_found() -> Response {
    StatusCode::NOT_FOUND.into_response()
}

async fn missing_service_name(method: Method) -> Response {
    if method != Method::GET {
        return NomadError::Method.into_response();
    }
    NomadError::BadRequest("missing service name").into_response()
}

/// Query parameters every list call shares.
struct ListQuery {
    /// The filter as given: parsed and compiled on the filter threads.
    filter: Option<String>,
    namespace: Option<String>,
    prefix: Option<String>,
}

/// Validates the parameters Nomad's `parse` validates (the filter is left to the filter
/// threads).
fn list_query(s: &NomadState, q: &HashMap<String, String>) -> Result<ListQuery, NomadError> {
    if let Some(region) = q.get("region").filter(|r| !r.is_empty()) {
        if *region != s.opts.region {
            return Err(NomadError::NoRegion);
        }
    }
    if let Some(w) = q.get("wait").filter(|w| !w.is_empty()) {
        if humantime::parse_duration(w).is_err() {
            return Err(NomadError::BadRequest("Invalid wait time"));
        }
    }
    if let Some(i) = q.get("index").filter(|i| !i.is_empty()) {
        if i.parse::<u64>().is_err() {
            return Err(NomadError::BadRequest("Invalid index"));
        }
    }
    Ok(ListQuery {
        filter: q.get("filter").filter(|f| !f.is_empty()).cloned(),
        namespace: q.get("namespace").filter(|n| !n.is_empty()).cloned(),
        prefix: q.get("prefix").filter(|p| !p.is_empty()).cloned(),
    })
}

/// Compiles `raw` and keeps the objects it selects, within `budget`: a filter that does
/// not compile or fails on an object is Nomad's 400, one over its budget a 503.
/// Stops (answering nothing) once `gone` is set: the client hung up.
fn compile_and_select<T: Serialize>(
    items: Vec<T>,
    raw: &str,
    gone: &AtomicBool,
    budget: &filter::CpuBudget,
) -> Result<Vec<T>, NomadError> {
    if gone.load(Ordering::Relaxed) {
        return Ok(Vec::new());
    }
    let f = filter::Filter::new_within(raw, budget).map_err(|e| match e {
        filter::FilterError::OverBudget => NomadError::FilterOverBudget(e),
        e => NomadError::FilterSyntax(e),
    })?;
    select(items, &f, gone, budget)
}

/// Keeps the objects the filter selects; an evaluation error is Nomad's 400, passing
/// spending `budget` a 503. Stops (answering nothing) once `gone` is set: the client hung up.
fn select<T: Serialize>(
    items: Vec<T>,
    f: &filter::Filter,
    gone: &AtomicBool,
    budget: &filter::CpuBudget,
) -> Result<Vec<T>, NomadError> {
    let mut out = Vec::with_capacity(items.len());
    for item in items {
        if gone.load(Ordering::Relaxed) {
            return Ok(Vec::new());
        }
        if budget.spent() {
            return Err(NomadError::FilterOverBudget(
                filter::FilterError::OverBudget,
            ));
        }
        let datum = serde_json::to_value(&item).unwrap_or(serde_json::Value::Null);
        match f.eval(&datum) {
            Ok(true) => out.push(item),
            Ok(false) => {}
            Err(e) => return Err(NomadError::FilterEval(e)),
        }
    }
    Ok(out)
}

/// A 200 with the Go client's required headers.
fn ok_json<T: Serialize>(index: u64, body: &T) -> Response {
    let json = serde_json::to_vec(body).unwrap_or_else(|_| b"[]".to_vec());
    let mut h = HeaderMap::new();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    h.insert("X-Nomad-Index", HeaderValue::from(index));
    h.insert("X-Nomad-LastContact", HeaderValue::from_static("0"));
    h.insert("X-Nomad-KnownLeader", HeaderValue::from_static("true"));
    (StatusCode::OK, h, json).into_response()
}

impl NomadState {
    fn namespace_matches(&self, ns: Option<&str>) -> bool {
        matches!(ns, None | Some("default") | Some("*"))
    }

    /// Registrations of the nodes whose gRPC endpoint is up, and the index of that view.
    fn registrations(&self) -> (Vec<ServiceRegistration>, u64) {
        let regs: Vec<ServiceRegistration> = self
            .fleet
            .nodes
            .iter()
            .zip(&self.fleet.discovery)
            .enumerate()
            .filter(|(_, (n, _))| !n.is_killed())
            .map(|(k, (n, ident))| {
                let service_id = n.model().service_id().to_string();
                let alloc = identity::alloc_uuid(self.seed, k, &service_id);
                ServiceRegistration {
                    id: format!(
                        "_nomad-task-{alloc}-mock-node-mock-node-{}-grpc",
                        self.opts.service_name
                    ),
                    service_name: self.opts.service_name.clone(),
                    namespace: "default".into(),
                    node_id: ident.node_id.clone(),
                    datacenter: self.opts.datacenter.clone(),
                    job_id: JOB_ID.into(),
                    alloc_id: alloc,
                    tags: Vec::new(),
                    address: ident.advertised.ip().to_string(),
                    port: ident.advertised.port(),
                    create_index: FIRST_INDEX,
                    modify_index: FIRST_INDEX,
                }
            })
            .collect();
        // The index moves whenever the visible set changes (ids and allocations).
        let view = regs.iter().fold(0xcbf2_9ce4_8422_2325_u64, |h, r| {
            r.alloc_id
                .bytes()
                .fold(h, |h, b| (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3))
        });
        let mut last = self.last_view.lock().unwrap_or_else(|p| p.into_inner());
        if *last != view {
            *last = view;
            self.index.fetch_add(1, Ordering::Relaxed);
        }
        let index = self.index.load(Ordering::Relaxed);
        drop(last);
        let regs = regs
            .into_iter()
            .map(|mut r| {
                r.modify_index = index;
                r
            })
            .collect();
        (regs, index)
    }

    fn node_stubs(&self) -> Vec<NodeListStub> {
        self.fleet
            .discovery
            .iter()
            .map(|ident| NodeListStub {
                address: ident.advertised.ip().to_string(),
                id: ident.node_id.clone(),
                attributes: None,
                datacenter: self.opts.datacenter.clone(),
                name: ident.name.clone(),
                node_class: String::new(),
                node_pool: self.opts.node_pool.clone(),
                version: wire::NOMAD_VERSION.into(),
                drain: false,
                scheduling_eligibility: "eligible".into(),
                status: "ready".into(),
                status_description: String::new(),
                drivers: serde_json::Map::new(),
                node_resources: None,
                reserved_resources: None,
                last_drain: None,
                create_index: FIRST_INDEX,
                modify_index: FIRST_INDEX,
            })
            .collect()
    }
}

/// Sets its flag when dropped: the handler's future is dropped when its client hangs up.
struct SetOnDrop(Arc<AtomicBool>);

impl Drop for SetOnDrop {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

/// Every list call: GET only, Nomad's query parameters, `items` built from them, the
/// filter compiled and applied per object on the filter threads (never the executor's;
/// 503 when their queue is full), stopped when the client hangs up, Nomad's headers.
async fn answer_list<T: Serialize + Send + 'static>(
    s: &NomadState,
    method: &Method,
    q: &HashMap<String, String>,
    items: impl FnOnce(&ListQuery) -> (Vec<T>, u64),
) -> Response {
    if *method != Method::GET {
        return NomadError::Method.into_response();
    }
    let lq = match list_query(s, q) {
        Ok(lq) => lq,
        Err(e) => return e.into_response(),
    };
    let (items, index) = items(&lq);
    let Some(raw) = lq.filter else {
        return ok_json(index, &items);
    };
    let gone = Arc::new(AtomicBool::new(false));
    let _hung_up = SetOnDrop(gone.clone());
    let selected = s
        .filters
        .run(move || {
            // The budget is the filter thread's CPU from when it takes the job.
            let budget = filter::CpuBudget::starting_now(filter::FILTER_CPU_BUDGET);
            compile_and_select(items, &raw, &gone, &budget)
        })
        .await;
    match selected {
        Ok(Ok(items)) => ok_json(index, &items),
        Ok(Err(e)) => e.into_response(),
        Err(e @ PoolError::Full(_)) => NomadError::FiltersBusy(e).into_response(),
        Err(e @ PoolError::Lost) => {
            tracing::warn!(error = %e, "filter evaluation failed");
            StatusCode::INTERNAL_SERVER_ERROR.into_response()
        }
    }
}

async fn service(
    State(s): State<Arc<NomadState>>,
    method: Method,
    Path(rest): Path<String>,
    Query(q): Query<HashMap<String, String>>,
) -> Response {
    let parts: Vec<&str> = rest.split('/').collect();
    match parts.as_slice() {
        [""] if method == Method::GET => {
            NomadError::BadRequest("missing service name").into_response()
        }
        [name] => {
            answer_list(&s, &method, &q, |lq| {
                let (regs, index) = s.registrations();
                let ours =
                    *name == s.opts.service_name && s.namespace_matches(lq.namespace.as_deref());
                (if ours { regs } else { Vec::new() }, index)
            })
            .await
        }
        // `/v1/service/<name>/<id>` is Nomad's DELETE of one registration; the virtual
        // fleet's registrations follow its nodes, so a client cannot remove one.
        [_, id] => {
            if method != Method::DELETE {
                NomadError::Method.into_response()
            } else if id.is_empty() {
                NomadError::BadRequest("missing service id").into_response()
            } else {
                NomadError::ReadOnly.into_response()
            }
        }
        _ => NomadError::BadRequest("invalid URI").into_response(),
    }
}

async fn services(
    State(s): State<Arc<NomadState>>,
    method: Method,
    Query(q): Query<HashMap<String, String>>,
) -> Response {
    answer_list(&s, &method, &q, |lq| {
        let (regs, index) = s.registrations();
        let mut out = Vec::new();
        if !regs.is_empty() && s.namespace_matches(lq.namespace.as_deref()) {
            out.push(ServiceListEntry {
                namespace: "default".into(),
                services: vec![ServiceStub {
                    service_name: s.opts.service_name.clone(),
                    tags: Vec::new(),
                }],
            });
        }
        (out, index)
    })
    .await
}

async fn nodes(
    State(s): State<Arc<NomadState>>,
    method: Method,
    Query(q): Query<HashMap<String, String>>,
) -> Response {
    answer_list(&s, &method, &q, |lq| {
        let mut stubs = s.node_stubs();
        if let Some(p) = &lq.prefix {
            stubs.retain(|n| n.id.starts_with(p.as_str()));
        }
        (stubs, s.index.load(Ordering::Relaxed))
    })
    .await
}

/// No allocations: the fleet runs no template managers. The filter is still parsed
/// (a bad one is Nomad's 400); with nothing to evaluate, unknown fields cannot fail.
async fn allocations(
    State(s): State<Arc<NomadState>>,
    method: Method,
    Query(q): Query<HashMap<String, String>>,
) -> Response {
    answer_list(&s, &method, &q, |_| {
        (Vec::<()>::new(), s.index.load(Ordering::Relaxed))
    })
    .await
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A hostile filter kept a node's CPU for seconds after its client had hung up.
    #[test]
    fn filtering_stops_once_the_client_has_hung_up() {
        let items: Vec<serde_json::Value> = (0..1_000)
            .map(|k| serde_json::json!({"Name": format!("node-{k}")}))
            .collect();
        let f = filter::Filter::new(r#"Name matches "node-.*""#).expect("parses");
        let by = filter::CpuBudget::starting_now(std::time::Duration::from_secs(60));
        let kept = select(items.clone(), &f, &AtomicBool::new(false), &by).expect("selects");
        assert_eq!(kept.len(), 1_000);
        let kept = select(items, &f, &AtomicBool::new(true), &by).expect("selects");
        assert!(
            kept.is_empty(),
            "no object is evaluated for a client that is gone"
        );
    }
}

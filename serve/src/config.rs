//! Settings of one placement service instance, independent of how it was started.

use std::net::SocketAddr;
use std::time::Duration;

use stampede_http_kit::{validate_not_blank, Secret};
use stampede_placement::{ApiStage, PlacementConfig};

use super::error::ServeError;

/// The API key accepted when none is configured (`--api-key` / `STAMPEDE_API_KEY`).
/// Local use only: it is published here.
pub const DEFAULT_API_KEY: &str = "e2b_stampede_local_key";

/// `envdVersion` a sandbox answer carries by default: E2B's envd version at the
/// snapshot this project follows (`packages/envd/pkg/version.go`).
pub const DEFAULT_ENVD_VERSION: &str = "0.6.13";

/// The template every instance knows (E2B's default template).
pub const BASE_TEMPLATE: &str = "base";

/// Default [`ServeConfig::header_read_timeout`]: 10 s.
pub const DEFAULT_HEADER_READ_TIMEOUT: Duration = Duration::from_secs(10);

/// Default [`ServeConfig::idle_timeout`]: 60 s.
pub const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(60);

/// Longest a worker of stampede's workload waits at the start gate for the others: past
/// it the gate opens anyway. It also bounds how long a burst holds each create's final
/// byte, which [`DEFAULT_BODY_READ_TIMEOUT`] must exceed. Defined here, with the bound
/// that depends on it, because the service does not depend on the harness.
pub const GATE_WAIT: Duration = Duration::from_secs(60);

/// Default [`ServeConfig::body_read_timeout`]: 70 s, the longest a burst holds each
/// create's final byte ([`GATE_WAIT`], 60 s: past it the start gate opens anyway) plus 10 s for the release itself on a loaded machine. E2B's
/// API allows 10 s for a whole request (`ReadTimeout` in `packages/api/main.go`); a
/// gated burst held longer than that would be cut there.
pub const DEFAULT_BODY_READ_TIMEOUT: Duration = Duration::from_secs(GATE_WAIT.as_secs() + 10);

/// Default [`ServeConfig::max_connections`]: 10,000, twice the largest gated burst the
/// service leaves room for (5,000 creates, each on a connection of its own, all held
/// open until the gate), the other half for every other client during it (deletes,
/// collectors, a flood of stalled connections). Lowered to the descriptor limit less
/// [`RESERVED_FDS`](stampede_http_kit::RESERVED_FDS) at start.
pub const DEFAULT_MAX_CONNECTIONS: usize = 10_000;

/// Default [`ServeConfig::retry_backoff`] (and of the profile's
/// `placement.embedded.retry_backoff`): none. E2B retries a ResourceExhausted create at
/// once, until the request deadline (`packages/api/internal/orchestrator/placement/placement.go`).
pub const DEFAULT_RETRY_BACKOFF: Option<Duration> = None;

/// A sandbox's time to live when a create names none: 15 s, the default of `timeout` in
/// E2B's `NewSandbox` (`spec/openapi.yml`).
pub const DEFAULT_SANDBOX_TIMEOUT: Duration = Duration::from_secs(15);

/// Everything an instance needs besides its nodes and listen address.
#[derive(Debug, Clone, PartialEq)]
pub struct ServeConfig {
    /// Best-of-K parameters and accounting mode.
    pub placement: PlacementConfig,
    /// Period of the node sync (ServiceInfo + List). E2B: 20 s.
    pub sync_interval: Duration,
    /// Whole-request deadline of a create (E2B: 70 s); past it the answer is 504. It is
    /// also the only bound on each Create RPC, as in E2B: a hung node holds the request.
    pub request_timeout: Duration,
    /// Pause before retrying a create a node refused with ResourceExhausted; none = at
    /// once, as E2B. Default [`DEFAULT_RETRY_BACKOFF`].
    pub retry_backoff: Option<Duration>,
    /// Time each create spends in the API before its placement decision, and how many
    /// the API works on at once (the placer's schedule, waited for on the service's
    /// clock). Default E2B's API as measured ([`ApiStage::default`]).
    pub api_stage: ApiStage,
    /// Deadline of the other RPCs (ServiceInfo, List, Delete).
    pub rpc_timeout: Duration,
    /// Value clients must send in `X-API-Key`.
    pub api_key: Secret,
    /// Value admin clients must send in `X-Admin-Token` (for `/nodes`, as E2B's
    /// `AdminApiKeyAuth`); none = the admin routes answer 401.
    pub admin_token: Option<Secret>,
    /// Seed of the placement sampling and of sandbox ids.
    pub seed: u64,
    /// vCPU of a sandbox whose create body has no `cpuCount` (E2B takes it from the
    /// template; stampede has no templates). Default 1.
    pub default_vcpu: u32,
    /// MiB of a sandbox whose create body has no `memoryMB`. Default 1024.
    pub default_memory_mb: u32,
    /// Templates a create may name besides [`BASE_TEMPLATE`] and the team's snapshots;
    /// any other is refused 404 `template '<id>' not found`, as E2B's create does.
    pub templates: Vec<String>,
    /// Kill sandboxes a node runs that this instance does not know, once
    /// [`orphan_grace`](Self::orphan_grace) old, as E2B's sync does. On by default; turn
    /// it off for independent replicas on one fleet: unlike E2B's API instances, which
    /// share one store, each would take the others' sandboxes for orphans.
    pub kill_orphans: bool,
    /// A listed sandbox younger than this is never an orphan. Default E2B's 1 minute
    /// ([`ORPHAN_GRACE`](stampede_placement::ORPHAN_GRACE)).
    pub orphan_grace: Duration,
    /// Longest sandbox `timeout` a create may ask for, in hours (E2B: the team's
    /// `MaxLengthHours`). Default 24.
    pub max_length_hours: u32,
    /// `envdVersion` returned in Sandbox answers. Default [`DEFAULT_ENVD_VERSION`], so
    /// that an SDK that gates features on it (or warns of an old template) treats the
    /// sandbox as current.
    pub envd_version: String,
    /// A connection must deliver a complete request head this soon after it opens (on
    /// HTTP/1 also after the previous answer, so it bounds idle keep-alive too); else it
    /// is closed. Default [`DEFAULT_HEADER_READ_TIMEOUT`].
    pub header_read_timeout: Duration,
    /// A connection with no request in progress on which no byte moved for this long is
    /// closed. Default [`DEFAULT_IDLE_TIMEOUT`].
    pub idle_timeout: Duration,
    /// A request body must be whole this soon after its head; else the request is
    /// answered 408 and its connection closed. Default [`DEFAULT_BODY_READ_TIMEOUT`].
    pub body_read_timeout: Duration,
    /// Connections open at once; when full, the connection waiting longest on its client
    /// is closed to admit a new one. Default
    /// [`DEFAULT_MAX_CONNECTIONS`], lowered to what the descriptor limit allows.
    pub max_connections: usize,
    /// Record every input and output of the placer to this file (JSON lines, for
    /// `stampede replay`); with several replicas, replica `i` writes `<file>.<i>`.
    pub placement_trace: Option<std::path::PathBuf>,
    /// Run the evictor, which kills each sandbox at its end time (E2B's API always runs
    /// one). Off, sandboxes stay on their nodes until deleted, so that a drill can show
    /// what a service without it leaves behind. Default on.
    pub evictor: bool,
    /// When a resume times out, make the first node that tried its Create the
    /// snapshot's origin for the next resume (E2B's feature flag
    /// `resume-origin-node-remap`, default off in `packages/shared/pkg/featureflags/flags.go`).
    pub resume_origin_remap: bool,
}

impl Default for ServeConfig {
    fn default() -> Self {
        Self {
            placement: PlacementConfig::default(),
            sync_interval: stampede_placement::SYNC_INTERVAL,
            request_timeout: stampede_placement::REQUEST_TIMEOUT,
            retry_backoff: DEFAULT_RETRY_BACKOFF,
            api_stage: ApiStage::default(),
            rpc_timeout: Duration::from_secs(5),
            api_key: Secret::new(DEFAULT_API_KEY),
            admin_token: None,
            seed: 0,
            default_vcpu: 1,
            templates: Vec::new(),
            default_memory_mb: 1024,
            kill_orphans: true,
            orphan_grace: stampede_placement::ORPHAN_GRACE,
            max_length_hours: 24,
            envd_version: DEFAULT_ENVD_VERSION.to_string(),
            header_read_timeout: DEFAULT_HEADER_READ_TIMEOUT,
            idle_timeout: DEFAULT_IDLE_TIMEOUT,
            body_read_timeout: DEFAULT_BODY_READ_TIMEOUT,
            max_connections: DEFAULT_MAX_CONNECTIONS,
            placement_trace: None,
            evictor: true,
            resume_origin_remap: false,
        }
    }
}

impl ServeConfig {
    /// Refuses credentials that would let anyone in: an empty or whitespace API key or
    /// admin token (an empty `X-API-Key:` header would match it), and the published
    /// [`DEFAULT_API_KEY`] on a `listen` address other hosts can reach.
    pub fn validate_credentials(&self, listen: SocketAddr) -> Result<(), ServeError> {
        validate_not_blank(
            "the API key (--api-key, STAMPEDE_API_KEY)",
            self.api_key.expose(),
        )?;
        if let Some(t) = &self.admin_token {
            validate_not_blank(
                "the admin token (--admin-token, STAMPEDE_ADMIN_TOKEN)",
                t.expose(),
            )?;
        }
        if !listen.ip().is_loopback() && self.api_key.matches(DEFAULT_API_KEY.as_bytes()) {
            return Err(ServeError::DefaultKeyExposed(listen));
        }
        Ok(())
    }
}

/// A node to place on: its gRPC address and, when known, its id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeTarget {
    /// Node id; `None` = take ServiceInfo's `node_id` at the first sync (or the address).
    pub id: Option<String>,
    /// `host:port` or `http://host:port` of the orchestrator's gRPC endpoint.
    pub addr: String,
}

impl NodeTarget {
    /// A node known by address only.
    pub fn addr(addr: impl Into<String>) -> Self {
        Self {
            id: None,
            addr: addr.into(),
        }
    }
}

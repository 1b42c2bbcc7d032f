//! `stampede serve`: the reference placement service, E2B's placement path behind E2B's
//! REST surface. A thin driver of the sans-IO [`stampede_placement`] core: axum for REST,
//! tonic clients to the orchestrator nodes, a periodic node sync.
//!
//! Embed it with [`start`] (or [`start_replicas`]); run it from the CLI with [`run`].
//!
//! REST notes (see E2B's `spec/openapi.yml`): `POST /sandboxes` accepts two stampede
//! extensions, `cpuCount` and `memoryMB` (E2B takes them from the template; defaults
//! [`ServeConfig::default_vcpu`] / [`ServeConfig::default_memory_mb`]). `GET /health`
//! answers 204 without authentication, `GET /metrics` (Prometheus) too; every other
//! route needs `X-API-Key` (default [`DEFAULT_API_KEY`]) but `/nodes`, which needs
//! `X-Admin-Token` only (E2B's `AdminApiKeyAuth`). Parameters and bodies are checked as
//! E2B's spec types them (module `params`); `openapi/stampede-e2b.yaml` describes it, E2B's operations that serve lacks as the 501 they get (module `unsupported`). A create asking for more vCPU or memory than the largest known node
//! reports, or with metadata beyond the caps of module `limits` (e.g. [`MAX_METADATA_KEYS`]), is a 400.
//!
//! Connections are bounded by [`ServeConfig::header_read_timeout`] and
//! [`ServeConfig::idle_timeout`] (module `listen`).
#![deny(missing_docs)]
#![warn(unreachable_pub)]

mod activity;
mod args;
mod arrivals;
mod auth;
mod channel_watch;
mod config;
mod counters;
mod error;
mod evictor;
mod kill;
mod lifecycle_api;
mod limits;
mod listen;
mod new_sandbox_schema;
mod node_channel;
mod node_client;
mod nodes_api;
mod params;
mod place;
mod rest;
mod routes;
mod rx_stamp;
mod service;
mod snapshot_api;
mod snapshots;
mod state;
mod storm;
mod sync;
mod telemetry;
mod telemetry_kind;
mod transition;
mod unsupported;
mod usage;

pub use args::{run, ServeArgs};
pub use arrivals::ArrivalWindow;
pub use config::{
    NodeTarget, ServeConfig, BASE_TEMPLATE, DEFAULT_API_KEY, DEFAULT_BODY_READ_TIMEOUT,
    DEFAULT_ENVD_VERSION, DEFAULT_HEADER_READ_TIMEOUT, DEFAULT_IDLE_TIMEOUT,
    DEFAULT_MAX_CONNECTIONS, DEFAULT_RETRY_BACKOFF, DEFAULT_SANDBOX_TIMEOUT, GATE_WAIT,
};
pub use counters::ServiceCounters;
pub use error::{ApiError, ServeError};
pub use limits::{MAX_METADATA_KEYS, MAX_METADATA_KEY_BYTES, MAX_METADATA_VALUE_BYTES};
pub use node_client::{CreateSpec, NodeClient};
pub use rest::{EvictedIds, NewSandbox};
pub use service::{start, start_replicas, ServiceHandle, SyncPhaser, TelemetryReader};
pub use sync::SYNC_MAX_RETRIES;

/// Response header of a 201 naming the node the sandbox landed on (stampede's own
/// service sends it; E2B's API does not, so external runs have no per-create node).
pub const NODE_HEADER: &str = "x-stampede-node";

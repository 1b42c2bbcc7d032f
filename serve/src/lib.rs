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
//! E2B's spec types them ([`params`]); `openapi/stampede-e2b.yaml` describes the subset. A create asking for more vCPU or memory than the largest known node
//! reports, or with metadata beyond the caps of [`limits`], is a 400.
//!
//! Connections are bounded by [`ServeConfig::header_read_timeout`] and
//! [`ServeConfig::idle_timeout`] (see [`listen`]).
#![deny(missing_docs)]

pub mod activity;
pub mod args;
pub mod arrivals;
mod auth;
pub mod channel_watch;
pub mod config;
pub mod counters;
pub mod error;
pub mod evictor;
pub mod kill;
pub mod lifecycle_api;
pub mod limits;
pub mod listen;
pub mod memory_trim;
pub mod new_sandbox_schema;
pub mod node_channel;
pub mod node_client;
pub mod nodes_api;
pub mod params;
pub mod place;
pub mod rest;
pub mod routes;
pub mod rx_stamp;
pub mod service;
pub mod snapshot_api;
pub mod snapshots;
pub mod state;
pub mod storm;
pub mod sync;
pub mod telemetry;
pub mod telemetry_kind;
pub mod transition;
pub mod usage;

pub use args::{run, ServeArgs};
pub use arrivals::ArrivalWindow;
pub use config::{
    NodeTarget, ServeConfig, DEFAULT_API_KEY, DEFAULT_HEADER_READ_TIMEOUT, DEFAULT_IDLE_TIMEOUT,
    DEFAULT_RETRY_BACKOFF,
};
pub use counters::ServiceCounters;
pub use error::{ApiError, ServeError};
pub use service::{start, start_replicas, ServiceHandle, SyncPhaser, TelemetryReader};

/// Response header of a 201 naming the node the sandbox landed on (stampede's own
/// service sends it; E2B's API does not, so external runs have no per-create node).
pub const NODE_HEADER: &str = "x-stampede-node";

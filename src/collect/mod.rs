//! The collector: per-node truth (what the nodes really run) and belief (what a
//! placement instance thinks they run), sampled during a run and once at its end.

mod baseline;
mod believed;
mod history;
mod sample_sink;
mod sampler;
mod truth;

pub use baseline::Before;
pub use believed::{fetch_api_nodes, fetch_believed, ApiNode};
pub(crate) use history::add_restart;
pub use history::{SampleHistory, SeenAt, Sightings, WindowSample};
pub use sample_sink::SampleSink;
pub use sampler::{NodeCalls, Sample, Sampler};
pub use truth::{fetch_truth, list_over_grpc, NodeSample, Truth, TruthSource};

/// Why a collection failed.
#[derive(Debug, thiserror::Error)]
pub enum CollectError {
    /// The HTTP call failed.
    #[error("GET {url}: {source}")]
    Http {
        /// The URL read.
        url: String,
        /// What went wrong (the transport error, or the status answered).
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// A mock-node fleet's `GET /nodes` failed.
    #[error("cannot read the fleet's node list")]
    MockAdmin(#[from] crate::mock_admin::MockAdminError),
    /// A gRPC `List` failed.
    #[error("List on {addr}: {source}")]
    Grpc {
        /// The orchestrator address.
        addr: String,
        /// What went wrong (the address, the connection or the call).
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
}

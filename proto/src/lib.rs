//! E2B-compatible orchestrator protos (no proto package, as upstream), compiled with
//! protox at build time. The messages need only prost; the gRPC client and server
//! modules are generated behind the `grpc` feature.
#![allow(missing_docs)]
#![allow(clippy::all, clippy::pedantic)]

include!(concat!(env!("OUT_DIR"), "/_.rs"));

/// Path of the directory holding the `.proto` sources, for tools that want them.
pub const PROTO_DIR: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/proto");

/// Re-exported so users of the generated types need no direct dependency.
pub use prost_types;

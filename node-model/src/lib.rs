//! `stampede-node-model`: the sans-IO model of an E2B orchestrator node.
//!
//! What a node does with a call (admit, refuse, queue for a starting slot, report its
//! metrics) as a pure state machine fed with virtual or real time, and the rule types a
//! profile writes about nodes (node spec, failure codes, RPC kinds, fault kinds, the node
//! seed). The wire fleet (`mock-node`) and the simulator are its two drivers; Cargo keeps
//! it free of I/O (no tokio, tonic, axum or hyper among its dependencies).
#![deny(missing_docs)]

pub mod config;
pub mod effect;
pub mod fault;
pub mod gate;
pub mod model;
pub mod rejection;
pub mod seed;
pub mod snapshot;
pub mod starting;

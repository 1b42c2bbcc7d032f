//! The reference placement service over HTTP and gRPC: its REST surface, node sync, eviction, replicas, metrics, hostile input.

#[path = "../support/mod.rs"]
mod support;

mod api;
mod evict;
mod faults;
mod hang_ups;
mod hostile;
mod kill;
mod lifecycle;
mod lifecycle_races;
mod many_nodes;
mod mock_admin_client;
mod node_channel;
mod nodes;
mod promtool;
mod replicas;
mod snapshots;
mod sync;

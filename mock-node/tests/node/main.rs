//! mock-node over the network: its gRPC and admin APIs, Nomad-style discovery, faults, the node model, the wire format, config and CLI, hostile input.

mod support;

mod admin;
mod admin_fuzz;
mod config_cli;
mod faults;
mod hostile_rpc;
mod many_nodes;
mod model;
mod nomad;
mod resume;
mod rpc;
mod wire;

//! mock-node over the network: its gRPC and admin APIs, Nomad-style discovery, faults, the node model, the wire format, config and CLI, hostile input.

mod support;

// The flood every listener of the project is held to, shared with the harness's tests.
#[path = "../../../tests/support/flood.rs"]
mod flood;

mod admin;
mod admin_fuzz;
mod config_cli;
mod faults;
mod hostile_rpc;
mod listeners;
mod many_nodes;
mod model;
mod nomad;
mod resume;
mod rpc;
mod wire;

//! A node's gRPC channel state and the status rule that combines it with the status the
//! node reports (E2B's `packages/api/internal/orchestrator/nodemanager/status.go`).
//!
//! The driver observes the channel (the service from its connector, the simulator from
//! its fault model) and writes the state into the node's [`ChannelCell`]; the core reads
//! it at every decision through [`node_status`]. A cell is one atomic byte, so the
//! driver writes it from the transport without taking the core's lock.

use std::sync::atomic::{AtomicU8, Ordering::Relaxed};

use super::node_view::NodeStatus;

/// gRPC connectivity state of the channel to one node (grpc-go's `connectivity.State`).
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "snake_case")]
pub enum ChannelState {
    /// No connection and none being made: before the first RPC, or after the connection
    /// was lost (grpc-go's pick_first goes IDLE then and reconnects on the next RPC).
    #[default]
    Idle,
    /// A connection attempt is in progress.
    Connecting,
    /// Connected.
    Ready,
    /// The last connection attempt failed.
    TransientFailure,
    /// The channel was closed for good.
    Shutdown,
}

impl ChannelState {
    /// Lower-case name, as grpc-go prints it.
    pub fn as_str(self) -> &'static str {
        match self {
            ChannelState::Idle => "idle",
            ChannelState::Connecting => "connecting",
            ChannelState::Ready => "ready",
            ChannelState::TransientFailure => "transient_failure",
            ChannelState::Shutdown => "shutdown",
        }
    }

    fn to_u8(self) -> u8 {
        match self {
            ChannelState::Idle => 0,
            ChannelState::Connecting => 1,
            ChannelState::Ready => 2,
            ChannelState::TransientFailure => 3,
            ChannelState::Shutdown => 4,
        }
    }

    fn from_u8(v: u8) -> Self {
        match v {
            1 => ChannelState::Connecting,
            2 => ChannelState::Ready,
            3 => ChannelState::TransientFailure,
            4 => ChannelState::Shutdown,
            _ => ChannelState::Idle,
        }
    }
}

/// The node's status as E2B's `Node.StatusInfo` derives it: a node that reports itself
/// ready is `connecting` while its channel is Connecting or TransientFailure, and
/// `unhealthy` once the channel is Shutdown; any other reported status stands as is.
pub fn node_status(reported: NodeStatus, channel: ChannelState) -> NodeStatus {
    if reported != NodeStatus::Ready {
        return reported;
    }
    match channel {
        ChannelState::Shutdown => NodeStatus::Unhealthy,
        ChannelState::Connecting | ChannelState::TransientFailure => NodeStatus::Connecting,
        ChannelState::Idle | ChannelState::Ready => NodeStatus::Ready,
    }
}

/// Whether a node with this (derived) status may be sent new creates: E2B's
/// `CanAcceptNewRequests`, where only a healthy orchestrator accepts and `connecting`
/// has no orchestrator counterpart.
pub fn routable(status: NodeStatus) -> bool {
    status == NodeStatus::Ready
}

/// The channel state of one node, shared between the core and the driver's transport.
#[derive(Debug, Default)]
pub struct ChannelCell(AtomicU8);

impl PartialEq for ChannelCell {
    fn eq(&self, other: &Self) -> bool {
        self.get() == other.get()
    }
}

impl ChannelCell {
    /// The state now.
    pub fn get(&self) -> ChannelState {
        ChannelState::from_u8(self.0.load(Relaxed))
    }

    /// Record a new state.
    pub fn set(&self, state: ChannelState) {
        self.0.store(state.to_u8(), Relaxed);
    }
}

//! Resume and fork placement: the node the snapshot was taken on first, then
//! Best-of-K.
//!
//! E2B's `packages/api/internal/orchestrator/create_instance.go` looks up the
//! snapshot's origin node for a resume (a fork resumes the snapshot of a running
//! sandbox, so its origin is that sandbox's node) and keeps it only when the node can
//! accept new requests (its status, nothing else: neither the starting filter nor the
//! score). `packages/api/internal/orchestrator/placement/placement.go` then sends the
//! first Create there, and after any failure of it (a ResourceExhausted refusal too)
//! forgets it: every later try is a Best-of-K draw. The accounting of each mode is the
//! create's (`StartPlacing`, then `Success` / `Skip` / `Fail`), whatever node was tried.
//!
//! When a resume times out, E2B can repoint the snapshot's origin to the first node
//! that got as far as trying the Create (not a fast refusal), behind the feature flag
//! `resume-origin-node-remap` (default off, `packages/shared/pkg/featureflags/flags.go`):
//! the placer reports that node as [`Answered::warmed`](crate::Answered::warmed) and
//! the driver, which keeps the origins, decides.

use super::channel::routable;
use super::core::PlacementCore;
use super::node_view::NodeId;

/// The node a placement tries before any Best-of-K draw, at most once.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PreferredNode {
    node: Option<NodeId>,
}

impl PreferredNode {
    /// The origin `origin` if the core knows it and it can accept new requests now;
    /// otherwise none, and the placement is a create's.
    pub fn new(core: &PlacementCore, origin: Option<NodeId>) -> Self {
        let node = origin.filter(|id| core.node(id).is_some_and(|n| routable(n.status())));
        Self { node }
    }

    /// The node for the next try, once: after it the preferred node is dropped, as
    /// E2B's loop does after its first failure.
    pub fn take(&mut self) -> Option<NodeId> {
        self.node.take()
    }

    /// The node still to be tried first, if any.
    pub fn node(&self) -> Option<&str> {
        self.node.as_deref()
    }
}

/// What kind of placement a request is: the report counts placements by kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum PlacementKind {
    /// A new sandbox: Best-of-K from the first try.
    Create,
    /// A paused sandbox resumed (`/resume`, `/connect`): its origin node first.
    Resume,
    /// A new sandbox from a running sandbox's snapshot (`/fork`): that node first.
    Fork,
}

impl PlacementKind {
    /// Lower-case name (`create`, `resume`, `fork`).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Create => "create",
            Self::Resume => "resume",
            Self::Fork => "fork",
        }
    }
}

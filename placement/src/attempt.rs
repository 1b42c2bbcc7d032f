//! [`PlacementAttempt`]: E2B's per-request retry loop as a state machine.
//!
//! The driver alternates [`PlacementAttempt::next`] (choose a node; the create is
//! recorded as in flight; or [`PlacementAttempt::choose`], then
//! [`PlacementAttempt::commit`] some time later) and [`PlacementAttempt::report`] (the RPC outcome), and stops
//! on [`Decision::Placed`] or an error of `next`. The request deadline (70 s in E2B)
//! is the driver's clock: before each `next` it checks it and, once passed, asks
//! [`PlacementAttempt::deadline_reached`] which failure that is. The failures are the
//! typed errors of E2B's `packages/api/internal/orchestrator/placement/placement.go`.

use std::collections::BTreeSet;

use rand::Rng;

use super::core::{NoCandidate, NodeAt, PlacementCore};
use super::node_view::NodeId;
use stampede_id::Id;

/// Outcome of one `SandboxService/Create` RPC, as the retry rules see it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CreateOutcome {
    /// The sandbox runs on the node.
    Created,
    /// gRPC ResourceExhausted: retry, without excluding the node or counting an attempt.
    ResourceExhausted,
    /// Any other error (including a timeout): exclude the node, count an attempt.
    Failed,
}

/// Why a request could not be placed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PlacementFailure {
    /// No node at all (empty fleet), or nothing but ResourceExhausted refusals until the
    /// deadline.
    #[error("no nodes available")]
    NoNodesAvailable,
    /// The candidate draw found no node that can accept, before any create failed.
    #[error(transparent)]
    NoCandidate(#[from] NoCandidate),
    /// The deadline passed otherwise.
    #[error("request timed out after {attempts} placement attempt(s)")]
    Timeout {
        /// Failed attempts counted.
        attempts: u32,
    },
    /// Creates failed (errors other than ResourceExhausted) and no candidate is left.
    #[error("sandbox create failed after {attempts} attempt(s)")]
    CreateFailed {
        /// Failed attempts counted.
        attempts: u32,
        /// The last error's message when its code is safe to show the client
        /// (FailedPrecondition, InvalidArgument).
        forwarded: Option<String>,
    },
}

/// The gRPC code of a failed create, as far as the answer depends on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CreateErrorCode {
    /// FailedPrecondition: its message is forwarded to the client.
    FailedPrecondition,
    /// InvalidArgument: its message is forwarded to the client.
    InvalidArgument,
    /// Anything else but ResourceExhausted: its message stays internal.
    Other,
}

/// What the driver does after a create outcome.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Done: the sandbox runs on this node.
    Placed(NodeId),
    /// Call [`PlacementAttempt::next`] again (if the deadline allows).
    Retry,
}

/// A node [`PlacementAttempt::choose`] returned, not yet committed to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Chosen {
    /// The node.
    pub node: NodeId,
    /// Where it was in the core's node table when chosen.
    at: usize,
}

/// The retry state of one create request.
#[derive(Debug, Clone)]
pub struct PlacementAttempt {
    sandbox_id: Id,
    vcpu: u32,
    excluded: BTreeSet<NodeId>,
    attempts: u32,
    refusals: u32,
    /// The node a create is in flight on, and its position in the core's node table.
    current: Option<(NodeId, Option<usize>)>,
    forwarded: Option<String>,
}

impl PlacementAttempt {
    /// A request to place `sandbox_id` needing `vcpu`.
    pub fn new(sandbox_id: impl Into<Id>, vcpu: u32) -> Self {
        Self {
            sandbox_id: sandbox_id.into(),
            vcpu,
            excluded: BTreeSet::new(),
            attempts: 0,
            refusals: 0,
            current: None,
            forwarded: None,
        }
    }

    /// Choose the node for the next create and record it in flight there
    /// ([`choose`](Self::choose) then [`commit`](Self::commit) at once).
    pub fn next<R: Rng + ?Sized>(
        &mut self,
        core: &mut PlacementCore,
        rng: &mut R,
    ) -> Result<NodeId, PlacementFailure> {
        let chosen = self.choose(core, rng)?;
        Ok(self.commit(core, chosen))
    }

    /// Choose the node for the next create from the view as it is now, recording
    /// nothing: until [`commit`](Self::commit), no other decision sees the choice.
    /// Fails when attempts are used up, every node is excluded, or no node can be
    /// chosen; once a create failed, every such failure is
    /// [`PlacementFailure::CreateFailed`].
    pub fn choose<R: Rng + ?Sized>(
        &mut self,
        core: &mut PlacementCore,
        rng: &mut R,
    ) -> Result<Chosen, PlacementFailure> {
        self.abandon(core);
        if self.attempts >= core.config().max_retries {
            return Err(self.create_failed());
        }
        if self.excluded.len() >= core.len() {
            return Err(if self.attempts > 0 {
                self.create_failed()
            } else {
                PlacementFailure::NoNodesAvailable
            });
        }
        match core.try_choose_at(self.vcpu, &self.excluded, rng) {
            Ok((at, node)) => Ok(Chosen { node, at }),
            Err(_) if self.attempts > 0 => Err(self.create_failed()),
            Err(why) => Err(why.into()),
        }
    }

    /// The choice counts on its node: the create is recorded in flight there, as it
    /// is whatever the view became since [`choose`](Self::choose) read it.
    pub fn commit(&mut self, core: &mut PlacementCore, chosen: Chosen) -> NodeId {
        let Chosen { node, at } = chosen;
        let at = Some(at);
        core.start_placing_at(NodeAt { id: &node, at }, &self.sandbox_id, self.vcpu);
        self.current = Some((node.clone(), at));
        node
    }

    /// Send the next create to `node` without a draw (a resume's origin node, see
    /// [`PreferredNode`](crate::preferred::PreferredNode)), recording it in flight there.
    /// Fails only when attempts are used up.
    pub fn place_on(
        &mut self,
        core: &mut PlacementCore,
        node: NodeId,
    ) -> Result<NodeId, PlacementFailure> {
        self.abandon(core);
        if self.attempts >= core.config().max_retries {
            return Err(self.create_failed());
        }
        let at = core.position(&node);
        core.start_placing_at(NodeAt { id: &node, at }, &self.sandbox_id, self.vcpu);
        self.current = Some((node.clone(), at));
        Ok(node)
    }

    /// The request deadline passed (checked by the driver before each `next`, and after
    /// a create that ran into it): only refusals so far is no capacity, anything else a
    /// timeout. A create still in flight is forgotten.
    pub fn deadline_reached(&mut self, core: &mut PlacementCore) -> PlacementFailure {
        self.abandon(core);
        if self.attempts == 0 && self.refusals > 0 {
            PlacementFailure::NoNodesAvailable
        } else {
            PlacementFailure::Timeout {
                attempts: self.attempts,
            }
        }
    }

    /// [`report`](Self::report) of a failed create whose gRPC code is known: the message
    /// of a FailedPrecondition or InvalidArgument becomes the one the client sees.
    pub fn report_error(
        &mut self,
        core: &mut PlacementCore,
        code: CreateErrorCode,
        message: &str,
    ) -> Decision {
        let forwarded = match code {
            CreateErrorCode::FailedPrecondition | CreateErrorCode::InvalidArgument => {
                Some(message.to_string())
            }
            CreateErrorCode::Other => None,
        };
        let decision = self.report(core, CreateOutcome::Failed);
        self.forwarded = forwarded;
        decision
    }

    /// Record the outcome of the create sent to the node [`next`](Self::next) returned.
    /// A failure never ends the request here: the driver checks its deadline, then
    /// `next` says whether candidates are left.
    pub fn report(&mut self, core: &mut PlacementCore, outcome: CreateOutcome) -> Decision {
        let Some((node, at)) = self.current.take() else {
            return Decision::Retry;
        };
        let on = NodeAt { id: &node, at };
        match outcome {
            CreateOutcome::Created => {
                core.create_succeeded_at(on, &self.sandbox_id, self.vcpu);
                Decision::Placed(node)
            }
            CreateOutcome::ResourceExhausted => {
                core.create_refused_at(on, &self.sandbox_id);
                self.refusals += 1;
                Decision::Retry
            }
            CreateOutcome::Failed => {
                core.create_failed_at(on, &self.sandbox_id);
                self.excluded.insert(node);
                self.attempts += 1;
                self.forwarded = None;
                Decision::Retry
            }
        }
    }

    /// Forget a create whose outcome will never be reported (request cancelled): it is
    /// no longer counted in flight. A no-op when nothing is in flight.
    pub fn abandon(&mut self, core: &mut PlacementCore) {
        if let Some((node, at)) = self.current.take() {
            core.create_failed_at(NodeAt { id: &node, at }, &self.sandbox_id);
        }
    }

    fn create_failed(&self) -> PlacementFailure {
        PlacementFailure::CreateFailed {
            attempts: self.attempts,
            forwarded: self.forwarded.clone(),
        }
    }

    /// The sandbox id being placed.
    pub fn sandbox_id(&self) -> &str {
        &self.sandbox_id
    }

    /// vCPU requested.
    pub fn vcpu(&self) -> u32 {
        self.vcpu
    }

    /// Nodes excluded so far (failed with a non-ResourceExhausted error).
    pub fn excluded(&self) -> &BTreeSet<NodeId> {
        &self.excluded
    }

    /// Failed attempts counted so far.
    pub fn attempts(&self) -> u32 {
        self.attempts
    }

    /// ResourceExhausted refusals so far (not counted as attempts; E2B retries them until
    /// the request deadline, so a driver without a clock should cap them itself).
    pub fn refusals(&self) -> u32 {
        self.refusals
    }

    /// The node a create is in flight on, if any.
    pub fn current(&self) -> Option<&str> {
        self.current_node().map(NodeId::as_str)
    }

    /// [`current`](Self::current), as the id it is held under.
    pub fn current_node(&self) -> Option<&NodeId> {
        self.current.as_ref().map(|(node, _)| node)
    }

    /// Where the node a create is in flight on was in the core's node table when it was
    /// chosen (`None` when nothing is in flight or the position is unknown): a driver
    /// that lists its nodes in the order it gave them to the core finds the node there
    /// without hashing its id (checking the id, as the table may have moved since).
    pub fn current_position(&self) -> Option<usize> {
        self.current.as_ref().and_then(|&(_, at)| at)
    }
}

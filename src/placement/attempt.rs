//! [`PlacementAttempt`]: E2B's per-request retry loop as a state machine.
//!
//! The driver alternates [`PlacementAttempt::next`] (choose a node; the create is
//! recorded as in flight) and [`PlacementAttempt::report`] (the RPC outcome), and stops
//! on [`Decision::Placed`] or [`Decision::Failed`]. The request deadline (70 s in E2B)
//! is the driver's: it checks it before each `next`.

use std::collections::BTreeSet;

use rand::Rng;

use super::core::{NoCandidate, PlacementCore};
use super::node_view::NodeId;

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
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum PlacementFailure {
    /// No node could be chosen.
    #[error(transparent)]
    NoCandidate(#[from] NoCandidate),
    /// `max_retries` creates failed with errors other than ResourceExhausted.
    #[error("sandbox create failed after {attempts} attempts")]
    AttemptsExhausted {
        /// Failed attempts counted.
        attempts: u32,
    },
}

/// What the driver does after a create outcome.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Done: the sandbox runs on this node.
    Placed(NodeId),
    /// Call [`PlacementAttempt::next`] again (if the deadline allows).
    Retry,
    /// Give up.
    Failed(PlacementFailure),
}

/// The retry state of one create request.
#[derive(Debug, Clone)]
pub struct PlacementAttempt {
    sandbox_id: String,
    vcpu: u32,
    excluded: BTreeSet<NodeId>,
    attempts: u32,
    refusals: u32,
    current: Option<NodeId>,
}

impl PlacementAttempt {
    /// A request to place `sandbox_id` needing `vcpu`.
    pub fn new(sandbox_id: impl Into<String>, vcpu: u32) -> Self {
        Self {
            sandbox_id: sandbox_id.into(),
            vcpu,
            excluded: BTreeSet::new(),
            attempts: 0,
            refusals: 0,
            current: None,
        }
    }

    /// Choose the node for the next create and record it in flight there. Fails when
    /// attempts are used up, every node is excluded, or no node can be chosen.
    pub fn next<R: Rng + ?Sized>(
        &mut self,
        core: &mut PlacementCore,
        rng: &mut R,
    ) -> Result<NodeId, PlacementFailure> {
        self.abandon(core);
        if self.attempts >= core.config().max_retries {
            return Err(PlacementFailure::AttemptsExhausted {
                attempts: self.attempts,
            });
        }
        if !core.is_empty() && self.excluded.len() >= core.len() {
            return Err(NoCandidate::CapacityUnavailable.into());
        }
        let node = core.try_choose(self.vcpu, &self.excluded, rng)?;
        core.start_placing(&node, &self.sandbox_id, self.vcpu);
        self.current = Some(node.clone());
        Ok(node)
    }

    /// Record the outcome of the create sent to the node [`next`](Self::next) returned.
    pub fn report(&mut self, core: &mut PlacementCore, outcome: CreateOutcome) -> Decision {
        let Some(node) = self.current.take() else {
            return Decision::Retry;
        };
        match outcome {
            CreateOutcome::Created => {
                core.create_succeeded(&node, &self.sandbox_id, self.vcpu);
                Decision::Placed(node)
            }
            CreateOutcome::ResourceExhausted => {
                core.create_refused(&node, &self.sandbox_id);
                self.refusals += 1;
                Decision::Retry
            }
            CreateOutcome::Failed => {
                core.create_failed(&node, &self.sandbox_id);
                self.excluded.insert(node);
                self.attempts += 1;
                if self.attempts >= core.config().max_retries {
                    Decision::Failed(PlacementFailure::AttemptsExhausted {
                        attempts: self.attempts,
                    })
                } else {
                    Decision::Retry
                }
            }
        }
    }

    /// Forget a create whose outcome will never be reported (request cancelled): it is
    /// no longer counted in flight. A no-op when nothing is in flight.
    pub fn abandon(&mut self, core: &mut PlacementCore) {
        if let Some(node) = self.current.take() {
            core.create_failed(&node, &self.sandbox_id);
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
        self.current.as_deref()
    }
}

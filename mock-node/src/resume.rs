//! The wait of a Create from a snapshot (a resume or a fork) and of a Checkpoint for a
//! starting slot, as E2B's orchestrator does it (`waitForAcquire` in
//! `packages/orchestrator/pkg/server/utils.go`): a fresh create that finds every slot
//! busy is refused at once, a snapshot create waits up to
//! [`NodeSpec::resume_acquire_timeout`](crate::config::NodeSpec::resume_acquire_timeout)
//! for one and only then answers ResourceExhausted.
//!
//! The node's model keeps the queue and decides who gets a freed slot
//! ([`starting`](stampede_node_model::starting)); a waiting call sleeps until the model wakes it (no
//! polling), and leaves the queue when its future is dropped (client gone, node killed),
//! so a slot held for it goes to the next waiter.

use tokio::time::Instant;
use tonic::Status;

use crate::model::{NodeModel, Ticket, WaitState};
use crate::node::NodeRuntime;

pub(crate) use stampede_node_model::starting::RESUME_WAIT_REASON;

/// A call that may go on to admission: it either never waited, or a slot is held for it
/// (or it was let go because the node is at `max_sandboxes`). Dropping it gives up the
/// held slot; [`claim`](Self::claim) hands the slot to the admission that follows.
#[derive(Debug)]
pub(crate) struct StartingTurn<'a> {
    node: &'a NodeRuntime,
    ticket: Option<Ticket>,
}

impl StartingTurn<'_> {
    /// Leaves the queue under the caller's lock of the model, right before admission
    /// takes the slot held for this call (nobody else can take it in between).
    pub(crate) fn claim(mut self, model: &mut NodeModel) {
        if let Some(t) = self.ticket.take() {
            model.leave_starting_wait(t);
        }
    }
}

impl Drop for StartingTurn<'_> {
    fn drop(&mut self) {
        if let Some(t) = self.ticket.take() {
            self.node.model().leave_starting_wait(t);
        }
    }
}

/// Waits until a starting slot of `node` is handed to this call (or the node is at
/// `max_sandboxes`, which the admission that follows refuses at once). Past the node's
/// `resume_acquire_timeout` it answers ResourceExhausted with E2B's message and counts
/// the refusal.
pub(crate) async fn wait_for_starting_slot(node: &NodeRuntime) -> Result<StartingTurn<'_>, Status> {
    let (ticket, limit) = {
        let mut m = node.model();
        (m.join_starting_wait(), m.spec().resume_acquire_timeout)
    };
    let mut turn = StartingTurn { node, ticket };
    let Some(t) = ticket else {
        return Ok(turn);
    };
    let until = Instant::now() + limit;
    loop {
        let woken = node.slot_woken().notified();
        let mut woken = std::pin::pin!(woken);
        woken.as_mut().enable();
        if !matches!(node.model().starting_wait(t), WaitState::Queued { .. }) {
            return Ok(turn);
        }
        tokio::select! {
            _ = woken => {}
            _ = tokio::time::sleep_until(until) => {
                let mut m = node.model();
                if !matches!(m.starting_wait(t), WaitState::Queued { .. }) {
                    // Handed a slot as the wait ran out: E2B's `Acquire` takes it too.
                    drop(m);
                    return Ok(turn);
                }
                m.leave_starting_wait(t);
                turn.ticket = None;
                m.count_refusals(RESUME_WAIT_REASON, 1);
                return Err(Status::resource_exhausted(
                    "too many sandboxes resuming on this node, please retry",
                ));
            }
        }
    }
}

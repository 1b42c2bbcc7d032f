//! The wait of a Create from a snapshot (a resume or a fork) and of a Checkpoint for a
//! starting slot, as E2B's orchestrator does it (`waitForAcquire` in
//! `packages/orchestrator/pkg/server/utils.go`): a fresh create that finds every slot
//! busy is refused at once, a snapshot create waits up to
//! [`NodeSpec::resume_acquire_timeout`](crate::config::NodeSpec::resume_acquire_timeout)
//! for one and only then answers ResourceExhausted.

use std::time::Duration;

use tokio::time::Instant;
use tonic::Status;

use crate::node::NodeRuntime;

/// How often a waiting call looks at the node's starting slots again.
const POLL: Duration = Duration::from_millis(2);

/// The reason a wait that ran out is counted under, among the node's refusals.
pub const RESUME_WAIT_REASON: &str = "max_starting_resume";

/// Waits until a starting slot of `node` is free (or the node is at `max_sandboxes`,
/// which the admission that follows refuses at once). Past the node's
/// `resume_acquire_timeout` it answers ResourceExhausted with E2B's message and counts
/// the refusal.
pub async fn wait_for_starting_slot(node: &NodeRuntime) -> Result<(), Status> {
    let limit = node.model().spec().resume_acquire_timeout;
    let until = Instant::now() + limit;
    loop {
        if !node.model().starting_slots_full() {
            return Ok(());
        }
        let now = Instant::now();
        if now >= until {
            node.model().count_refusals(RESUME_WAIT_REASON, 1);
            return Err(Status::resource_exhausted(
                "too many sandboxes resuming on this node, please retry",
            ));
        }
        tokio::time::sleep(POLL.min(until - now)).await;
    }
}

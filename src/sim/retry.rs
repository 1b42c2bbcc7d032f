//! E2B's ResourceExhausted retry loop at the cost of state changes, not of retries.
//!
//! E2B retries a refused create at once, without backoff, until the request deadline
//! (`placement.go`): one retry per [`SimSetup::retry_period`] (the round trip of a
//! refusal, plus `retry_backoff` if set). A retry is a *tick* on that grid. When every
//! node a decision could return would refuse for sure (limits reached, an `exhaust`
//! fault; no random failure, no slow or dead node), the tick is a
//! refusal whatever the draw, and so is every later tick until some state changes.
//!
//! - **Parked** (the default): the request waits without an event until an event
//!   that can let a node accept is handled (a create that ends, a delete, a sync, a
//!   fault edge; any event when the service's own starting filter
//!   is on, since in-progress marks then decide which nodes are candidates), then
//!   settles the ticks it skipped as refusals and resumes at its next tick. Its only
//!   pending event is the tick of its deadline.
//! - **Stepped** (`SimSetup::step_retries`): every tick is an event that checks again.
//!   Slow, and there to test the parked path: both must give the same placements and
//!   the same retry counts.
//!
//! Under `reported` accounting the nodes a decision could return are the candidates
//! scoring no worse than the K-th highest
//! ([`PlacementCore::winnable`](crate::placement::PlacementCore::winnable)): a node
//! below them has room no draw reaches until the next sync, so the storm parks as soon
//! as the nodes it can reach are full (seed 000's herd). In the other modes every
//! decision's in-progress mark moves the scores, so a park needs every candidate full.
//!
//! A tick the model proves refused draws no random number and holds no in-progress
//! mark on a node (E2B holds one for the round trip, on a node that changes each
//! retry); its refusal is counted on the node that last refused the request for real,
//! if it is still a candidate, else on the first candidate.

use super::engine::{Engine, Event};
use super::queue::Nanos;
use crate::placement::{AccountingMode, PlacementKind};
use mock_node::config::RpcKind;
use mock_node::model::CreateRejection;

/// A request waiting for a state change, its retries certain to be refused.
#[derive(Debug, Clone, Copy)]
pub(super) struct Park {
    /// The tick that parked it (already counted).
    pub since: Nanos,
    /// Node its skipped refusals are counted on.
    pub node: u32,
    /// Why that node refuses.
    pub reason: &'static str,
}

impl Engine<'_> {
    /// One retry tick of the request in `slot` at `now`: the deadline, then a sure
    /// refusal (counted, parked or stepped), else a real decision. True for a sure
    /// refusal, which changes nothing a decision reads.
    pub(super) fn retry_tick(&mut self, slot: u32) -> bool {
        let now = self.now;
        let Some(a) = self.slots.get(slot as usize).and_then(Option::as_ref) else {
            return false;
        };
        if now >= a.deadline {
            self.decide(slot);
            return false;
        }
        let Some((node, reason)) = self.sure_refusal(slot) else {
            self.decide(slot);
            return false;
        };
        self.count_virtual_refusals(slot, node, reason, now, 1);
        let period = self.setup.retry_period();
        let Some(a) = self.slots.get_mut(slot as usize).and_then(Option::as_mut) else {
            return true;
        };
        let (req, gen) = (a.req, a.gen);
        // The node the skipped refusals are counted on, kept as stepping keeps it.
        a.node = node;
        if self.setup.step_retries {
            let at = now.saturating_add(period);
            self.queue.push_late(at, req, Event::Retry { slot, gen });
            return true;
        }
        a.park = Some(Park {
            since: now,
            node,
            reason,
        });
        // The tick at which the deadline ends it, if nothing changes before.
        let end = a.deadline;
        let ticks = end.saturating_sub(now).div_ceil(period.max(1)).max(1);
        let at = now.saturating_add(ticks.saturating_mul(period));
        self.queue.push_late(at, req, Event::Retry { slot, gen });
        self.parked.push(slot);
        true
    }

    /// A `Retry` event for `slot`: ignored if stale (a newer tick replaced it);
    /// a parked request settles the ticks it skipped first.
    pub(super) fn retry_event(&mut self, slot: u32, gen: u32) {
        let now = self.now;
        let period = self.setup.retry_period().max(1);
        let Some(a) = self.slots.get_mut(slot as usize).and_then(Option::as_mut) else {
            self.quiet = true;
            return;
        };
        if a.gen != gen {
            self.quiet = true;
            return;
        }
        if let Some(p) = a.park.take() {
            // The deadline tick: every grid tick strictly between was a refusal.
            let skipped = (now.saturating_sub(p.since) / period).saturating_sub(1);
            self.parked.retain(|&s| s != slot);
            self.count_virtual_refusals(
                slot,
                p.node,
                p.reason,
                p.since.saturating_add(period),
                skipped,
            );
        }
        // A tick of its own (not one run inside a reply that moved marks) whose
        // refusal was certain changed nothing a decision reads.
        if self.retry_tick(slot) {
            self.quiet = true;
        }
    }

    /// Something may have changed: every parked request settles the ticks before now
    /// and gets a real tick event at its next grid time.
    pub(super) fn unpark_all(&mut self) {
        let now = self.now;
        let period = self.setup.retry_period().max(1);
        let parked = std::mem::take(&mut self.parked);
        for slot in parked {
            let Some(a) = self.slots.get_mut(slot as usize).and_then(Option::as_mut) else {
                continue;
            };
            let Some(p) = a.park.take() else {
                continue;
            };
            let elapsed = now.saturating_sub(p.since);
            let k = elapsed / period;
            let on_grid = elapsed % period == 0 && k >= 1;
            // Late events at one instant fire by key: a tick at `now` with a key below
            // the late event being handled has already fired when stepping.
            let fired_now = on_grid
                && self
                    .last_late
                    .is_some_and(|(t, key)| t == now && a.req < key);
            let (skipped, next) = if on_grid && !fired_now {
                (k - 1, now)
            } else {
                (k, p.since.saturating_add((k + 1).saturating_mul(period)))
            };
            a.gen = a.gen.wrapping_add(1);
            let (req, gen) = (a.req, a.gen);
            self.queue.push_late(next, req, Event::Retry { slot, gen });
            self.count_virtual_refusals(
                slot,
                p.node,
                p.reason,
                p.since.saturating_add(period),
                skipped,
            );
        }
    }

    /// The node and reason of a refusal certain for any decision `slot` could make now;
    /// `None` if some node a draw could return might accept, or if there is none. A node
    /// with room that no draw can return (ranked below the K best scores) does not
    /// count: under `reported` the scores stay fixed between syncs, so the storm parks
    /// while the top K are full.
    fn sure_refusal(&self, slot: u32) -> Option<(u32, &'static str)> {
        let a = self.slots.get(slot as usize)?.as_ref()?;
        let placer = &self.placers[a.replica as usize];
        let attempt = placer.attempt(a.req)?;
        let vcpu = attempt.vcpu();
        let snapshot = a.kind != PlacementKind::Create;
        let mut pick: Option<(u32, &'static str)> = None;
        // Under `reported` the scores move only at a sync (an event that unparks), so
        // the nodes a draw can return stay put while parked; in the other modes every
        // decision's in-progress mark moves them, and only a refusal by every candidate
        // is certain.
        let core = placer.core();
        let reach: Vec<&str> = if core.config().mode == AccountingMode::Reported {
            core.winnable(vcpu, attempt.excluded())
        } else {
            core.candidates(vcpu, attempt.excluded()).collect()
        };
        for id in reach {
            let &i = self.node_index.get(id)?;
            let reason = self.node_sure_refusal(i, vcpu, snapshot)?;
            if pick.is_none() || i == a.node {
                pick = Some((i, reason));
            }
        }
        pick
    }

    /// Why node `i` refuses a create of `vcpu` now for sure, if it does. A create from
    /// a `snapshot` (a resume) is not refused for busy starting slots: it waits.
    fn node_sure_refusal(&self, i: u32, vcpu: u32, snapshot: bool) -> Option<&'static str> {
        let n = &self.nodes[i as usize];
        let e = &n.effect;
        if e.killed || e.hung || e.errors.is_some() || e.slow.is_some_and(|d| !d.is_zero()) {
            return None;
        }
        let m = &n.model;
        let random_failure = m
            .spec()
            .failures
            .iter()
            .any(|r| matches!(r.rpc, RpcKind::Create | RpcKind::Any) && r.probability > 0.0);
        if random_failure {
            return None;
        }
        if e.exhaust {
            return Some(CreateRejection::Exhausted.reason());
        }
        m.capacity_refusal(vcpu)
            .err()
            .filter(CreateRejection::is_resource_exhausted)
            .filter(|r| !(snapshot && matches!(r, CreateRejection::MaxStarting(_))))
            .map(|r| r.reason())
    }

    /// Count `n` refusals of `slot`'s retries on `node` for `reason`, at the ticks
    /// `first`, `first + period`, ...
    fn count_virtual_refusals(
        &mut self,
        slot: u32,
        node: u32,
        reason: &'static str,
        first: Nanos,
        n: u64,
    ) {
        if n == 0 {
            return;
        }
        let _ = slot;
        self.tally.refusals += n;
        self.tally.retries += n;
        self.tally
            .retries_on(node, first, self.setup.retry_period(), n);
        self.nodes[node as usize].model.count_refusals(reason, n);
    }
}

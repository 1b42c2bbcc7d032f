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
//! **The in-progress mark of a settled retry.** E2B marks the node of every Create
//! round trip, a refused retry's included, and under every mode but `reported` (and
//! under the starting filter) those marks steer other decisions. A settled tick is a
//! Best-of-K draw through the placer ([`Input::SettledRetry`]) that marks the node it
//! returns until the next tick frees it, as E2B's round trip does; its RNG is seeded
//! by the placer's seed, the request and the tick, so the real decisions keep the
//! placer's own sequence whether ticks are parked or stepped. Other decisions read a
//! parked request's mark only when they run, and while it is parked the only decisions
//! are refusals certain in advance; what they can observe is where its mark stands
//! when a state change unparks it. So the mark moves at the parking tick and at each
//! unpark, to the draw of the latest tick fired by then, the parked requests drawn in
//! tick order, each seeing the marks of the others as they then stand; the ticks in
//! between keep it where it is. Stepping keeps the same rule (a stepped tick checks the
//! refusal is still certain and keeps the mark), so both give the same placements,
//! marks and retry counts. Where E2B would differ: it redraws at every tick, so the
//! marks of a long park have wandered through as many draws as ticks, each seeing the
//! others' latest; here the draw at an unpark sees the others' marks of the previous
//! state change. With a `retry_backoff` (not E2B's) the mark is also held over the
//! backoff, from one tick to the next.
//!
//! The refusals of settled ticks are counted on the node that last refused the request
//! for real if it is still a candidate, else on the first candidate (not on the node
//! its mark is drawn to).

use super::engine::{Engine, Event};
use super::queue::Nanos;
use super::setup::to_duration;
use crate::placement::{AccountingMode, CreateReply, Input, Output, PlacementKind};
use stampede_node_model::config::RpcKind;
use stampede_node_model::model::CreateRejection;

/// A request waiting for a state change, its retries certain to be refused.
#[derive(Debug, Clone, Copy)]
pub(super) struct Park {
    /// The last tick counted (the one that parked it, or a stepped one since).
    pub since: Nanos,
    /// The tick whose draw put its in-progress mark where it is.
    pub drawn: Nanos,
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
        let (replica, req, deadline) = (a.replica as usize, a.req, a.deadline);
        let placer = &mut self.placers[replica];
        // The round trip of the last settled retry ends now: its refusal frees the
        // mark, and the placer says what follows (a retry at once, or its deadline).
        if placer.attempt(req).is_some_and(|t| t.current().is_some()) {
            let reply = CreateReply::Refused;
            let out = placer.handle(to_duration(now), Input::CreateReplied { req, reply });
            if !matches!(out, Some(Output::RetryAt { .. })) {
                self.act(slot, out);
                return false;
            }
        }
        if now >= deadline {
            self.decide(slot);
            return false;
        }
        let Some((node, reason)) = self.sure_refusal(slot) else {
            self.decide(slot);
            return false;
        };
        // The settled retry's round trip: in progress on the node its draw returns.
        if !self.draw_settled(slot, now) {
            return false;
        }
        self.count_virtual_refusals(slot, node, reason, now, 1);
        let period = self.setup.retry_period();
        let Some(a) = self.slots.get_mut(slot as usize).and_then(Option::as_mut) else {
            return true;
        };
        let (req, gen) = (a.req, a.gen);
        // The node the skipped refusals are counted on, kept as stepping keeps it.
        a.node = node;
        let at = if self.setup.step_retries {
            now.saturating_add(period)
        } else {
            // The tick at which the deadline ends it, if nothing changes before.
            let ticks = a
                .deadline
                .saturating_sub(now)
                .div_ceil(period.max(1))
                .max(1);
            now.saturating_add(ticks.saturating_mul(period))
        };
        a.park = Some(Park {
            since: now,
            drawn: now,
            node,
            reason,
        });
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
        if let Some(p) = a.park {
            if self.setup.step_retries && now < a.deadline && self.sure_refusal(slot).is_some() {
                // A stepped tick of a parked request: still refused, so still parked, its
                // mark kept (the reference for the parked path, which never looks).
                self.count_virtual_refusals(slot, p.node, p.reason, now, 1);
                let Some(a) = self.slots.get_mut(slot as usize).and_then(Option::as_mut) else {
                    return;
                };
                if let Some(park) = &mut a.park {
                    park.since = now;
                }
                let at = now.saturating_add(period);
                self.queue.push_late(at, a.req, Event::Retry { slot, gen });
                self.quiet = true;
                return;
            }
        }
        let Some(a) = self.slots.get_mut(slot as usize).and_then(Option::as_mut) else {
            return;
        };
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

    /// Something may have changed: every parked request settles the ticks before now,
    /// its mark moves to where its latest tick's draw puts it, and it gets a real tick
    /// event at its next grid time. The draws run in tick order (then by request), each
    /// seeing the marks of those before it, as the ticks themselves would.
    pub(super) fn unpark_all(&mut self) {
        let period = self.setup.retry_period().max(1);
        let mut parked: Vec<(Nanos, u64, u32)> = std::mem::take(&mut self.parked)
            .into_iter()
            .filter_map(|slot| {
                let a = self.slots.get(slot as usize)?.as_ref()?;
                let p = a.park?;
                Some((self.latest_tick(&p, a.req), a.req, slot))
            })
            .collect();
        parked.sort_unstable();
        for (latest, _, slot) in parked {
            let Some(a) = self.slots.get_mut(slot as usize).and_then(Option::as_mut) else {
                continue;
            };
            let Some(p) = a.park.take() else {
                continue;
            };
            // Ticks fired since it was last counted: up to `latest`.
            let skipped = latest.saturating_sub(p.since) / period;
            let next = latest.saturating_add(period);
            a.gen = a.gen.wrapping_add(1);
            let (req, gen) = (a.req, a.gen);
            self.count_virtual_refusals(
                slot,
                p.node,
                p.reason,
                p.since.saturating_add(period),
                skipped,
            );
            if latest > p.drawn && !self.draw_settled(slot, latest) {
                continue;
            }
            self.queue.push_late(next, req, Event::Retry { slot, gen });
        }
    }

    /// The latest tick of parked request `req` fired by now. Late events at one
    /// instant fire by key: a tick at `now` with a key below the late event being
    /// handled has already fired when stepping; one at or above it has not.
    fn latest_tick(&self, p: &Park, req: u64) -> Nanos {
        let now = self.now;
        let period = self.setup.retry_period().max(1);
        let elapsed = now.saturating_sub(p.since);
        let k = elapsed / period;
        let on_grid = elapsed.is_multiple_of(period) && k >= 1;
        let fired_now = on_grid && self.last_late.is_some_and(|(t, key)| t == now && req < key);
        let k = if on_grid && !fired_now { k - 1 } else { k };
        p.since.saturating_add(k.saturating_mul(period))
    }

    /// The round trip of a retry of `slot` proved refused at tick `at`: its mark moves
    /// to the node a Best-of-K draw returns, seeded by the placer's seed, the request
    /// and the tick (the core's rules, not the placer's RNG sequence, which the decided
    /// retries keep). False if the placer answered the request instead (no node left
    /// to draw), which is then carried out.
    fn draw_settled(&mut self, slot: u32, at: Nanos) -> bool {
        let Some(a) = self.slots.get(slot as usize).and_then(Option::as_ref) else {
            return false;
        };
        let (replica, req) = (a.replica as usize, a.req);
        let placer = &mut self.placers[replica];
        let seed = settled_seed(placer.config().seed, req, at);
        let out = placer.handle(to_duration(at), Input::SettledRetry { req, seed });
        if matches!(out, Some(Output::SendCreate { .. })) {
            return true;
        }
        if let Some(a) = self.slots.get_mut(slot as usize).and_then(Option::as_mut) {
            a.park = None;
        }
        self.parked.retain(|&s| s != slot);
        self.act(slot, out);
        false
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

/// Seed of the draw of request `req`'s settled retry at tick `at` under a placer seeded
/// by `seed` (splitmix64 over the three).
fn settled_seed(seed: u64, req: u64, at: Nanos) -> u64 {
    let mut z =
        seed ^ req.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ at.wrapping_mul(0xD1B5_4A32_D192_ED03);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

//! The create path of one request: the placer's decisions carried out, the Create RPC
//! through the node's fault gate into the node model, and the replies told back.

use std::time::Duration;

use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use stampede_node_model::config::{FailureCode, LatencyDist, RpcKind};
use stampede_node_model::gate::{on_send, Arrival, CreateArrival, Sent};
use stampede_node_model::model::{CreateRequest, SandboxKey};

use super::engine::{sandbox_id, Engine, Event, SimNode};
use super::queue::Nanos;
use super::setup::{to_duration, to_nanos};
use crate::placement::{
    Answered, ChannelState, CreateOutcome, CreateReply, CreateStatus, DeleteOutcome, ErrorKind, Id,
    Input, Output, PlacementKind,
};
use crate::workload::Outcome;

/// Same per-slot lifetime seeding as the real workload, so both draw the same lifetimes.
const LIFETIME_MIX: u64 = 0x9E37_79B9_7F4A_7C15;

impl Engine<'_> {
    /// A retry tick of the request in `slot` that is not certain to be refused: the
    /// placer decides (its deadline, then Best-of-K).
    pub(super) fn decide(&mut self, slot: u32) {
        self.feed(slot, |req| Input::RetryDue { req });
    }

    /// The request in `slot` leaves the API stage: its first decision.
    pub(super) fn decide_first(&mut self, slot: u32) {
        self.feed(slot, |req| Input::DecideDue { req });
    }

    /// The lag of the request in `slot` between its choice and its commit is over.
    pub(super) fn commit(&mut self, slot: u32) {
        self.feed(slot, |req| Input::CommitDue { req });
    }

    /// The placer learns that the create of `slot` succeeded (its return time over).
    pub(super) fn returned(&mut self, slot: u32) {
        self.feed(slot, |req| Input::ReplyDue { req });
    }

    /// Feed the request in `slot` the input `input` makes of its id, and act on it.
    fn feed(&mut self, slot: u32, input: impl FnOnce(u64) -> Input) {
        let Some(a) = self.slots.get(slot as usize).and_then(Option::as_ref) else {
            return;
        };
        let (replica, req) = (a.replica as usize, a.req);
        let out = self.placers[replica].handle(to_duration(self.now), input(req));
        self.act(slot, out);
    }

    /// Carry out what the placer said for the request in `slot`.
    pub(super) fn act(&mut self, slot: u32, out: Option<Output>) {
        match out {
            Some(Output::SendCreate {
                node,
                deadline,
                retry,
                ..
            }) => {
                if retry {
                    self.tally.retries += 1;
                }
                self.send(slot, &node, to_nanos(deadline));
            }
            Some(Output::RetryAt { at, .. }) => self.retry_at(slot, to_nanos(at)),
            Some(Output::DecideAt { at, .. }) => {
                self.queue.push(to_nanos(at), Event::Decide { slot });
            }
            Some(Output::CommitAt { at, .. }) => {
                self.queue.push(to_nanos(at), Event::Commit { slot });
            }
            Some(Output::ReplyAt { at, .. }) => {
                self.queue.push(to_nanos(at), Event::Returned { slot });
            }
            Some(Output::Answer(a)) => self.answered(slot, &a),
            // The placer lost the request (cannot happen with one driver per placer);
            // a sync's transit is never a request's output.
            Some(Output::SyncAt { .. }) | None => {
                self.finish(slot, CreateStatus::InternalServerError)
            }
        }
    }

    /// Send the create of `slot` to `node`, through the node's fault effect.
    fn send(&mut self, slot: u32, node: &str, deadline: Nanos) {
        let now = self.now;
        // The engine lists its nodes in the order its placers were given them: the
        // position the draw found the node at names it without hashing its id.
        let at = self
            .slots
            .get(slot as usize)
            .and_then(Option::as_ref)
            .and_then(|a| self.placers[a.replica as usize].attempt(a.req))
            .and_then(|attempt| attempt.current_position())
            .filter(|&i| self.nodes.get(i).is_some_and(|n| n.id == *node))
            .map(|i| i as u32);
        let Some(k) = at.or_else(|| self.node_index.get(node).copied()) else {
            let reply = CreateReply::Failed {
                code: ErrorKind::Other,
                message: format!("node '{node}' not found"),
            };
            return self.tell(slot, reply);
        };
        let Some(a) = self.slots.get_mut(slot as usize).and_then(Option::as_mut) else {
            return;
        };
        let n = &self.nodes[k as usize];
        a.node = k;
        a.epoch = n.epoch;
        a.key = None;
        a.deadline = deadline;
        a.handler_at = now;
        match on_send(&n.effect) {
            Sent::Refused => {
                // The reconnect this create triggers is refused: the channel goes to
                // TransientFailure and the node is `connecting` for this replica from now
                // on (E2B's `nodemanager/status.go`).
                let input = Input::Channel {
                    node: n.id.clone(),
                    state: ChannelState::TransientFailure,
                };
                self.placers[a.replica as usize].handle(to_duration(now), input);
                self.reply_after(slot, CreateOutcome::Failed);
            }
            Sent::Held => {
                // No deadline on the RPC itself (E2B, `packages/api/main.go`): the hung
                // node holds the create until the hang heals or the request's deadline
                // passes.
                let heal = hang_heals_at(&self.setup.faults, &n.active);
                if heal < deadline {
                    // Held before the handler: the node's own deadline starts there.
                    a.handler_at = heal;
                    self.queue.push(heal, Event::Arrive { slot });
                } else {
                    self.queue.push(
                        deadline,
                        Event::Reply {
                            slot,
                            outcome: CreateOutcome::Failed,
                            abort: false,
                        },
                    );
                }
            }
            Sent::Delayed(d) => {
                // The delay is inside the handler: past the node's own deadline the
                // create fails there, before admission (`serve`'s `send_create`).
                let timeout = to_nanos(self.nodes[k as usize].model.spec().create_timeout);
                if to_nanos(d) >= timeout && now.saturating_add(timeout) < deadline {
                    self.nodes[k as usize].model.count_failed_create();
                    let event = Event::Reply {
                        slot,
                        outcome: CreateOutcome::Failed,
                        abort: false,
                    };
                    self.queue.push(now.saturating_add(timeout), event);
                } else {
                    self.queue
                        .push(now.saturating_add(to_nanos(d)), Event::Arrive { slot });
                }
            }
            Sent::Arrives => self.arrive(slot),
        }
    }

    /// The create of `slot` reaches its node: fault gate, then admission.
    pub(super) fn arrive(&mut self, slot: u32) {
        if self.waits_for_slot(slot) {
            return;
        }
        let now = self.now;
        let Some(a) = self.slots.get(slot as usize).and_then(Option::as_ref) else {
            return;
        };
        let n = &mut self.nodes[a.node as usize];
        let s = &self.setup.sandbox;
        let req = CreateRequest {
            sandbox_id: a.sandbox_id.clone(),
            vcpu: i64::from(s.vcpu),
            ram_mb: i64::from(s.ram_mb),
            end_time: Some(to_duration(now).saturating_add(s.timeout)),
            template_id: Id::new(&s.template),
            team_id: Id::EMPTY,
            execution_id: Id::EMPTY,
        };
        let (latency, key) = match n.model.gate_create(&n.effect, Ok(req), to_duration(now)) {
            CreateArrival::Failed(code) => {
                let outcome = if code == FailureCode::ResourceExhausted {
                    CreateOutcome::ResourceExhausted
                } else {
                    CreateOutcome::Failed
                };
                self.reply_after(slot, outcome);
                return;
            }
            CreateArrival::Refused(r) => {
                let outcome = if r.is_resource_exhausted() {
                    CreateOutcome::ResourceExhausted
                } else {
                    CreateOutcome::Failed
                };
                self.reply_after(slot, outcome);
                return;
            }
            CreateArrival::Admitted { latency, key } => (latency, key),
        };
        let done = now.saturating_add(to_nanos(latency));
        // The node's own Create deadline (E2B's orchestrator `requestTimeout`) fails
        // it with a node-side error; the API has none but the request's.
        let node_deadline = a
            .handler_at
            .saturating_add(to_nanos(n.model.spec().create_timeout));
        let deadline = a.deadline;
        if let Some(a) = self.slots[slot as usize].as_mut() {
            a.key = Some(key);
        }
        if done >= node_deadline && node_deadline < deadline {
            let event = Event::Reply {
                slot,
                outcome: CreateOutcome::Failed,
                abort: true,
            };
            self.queue.push(node_deadline, event);
        } else if done > deadline {
            let event = Event::Reply {
                slot,
                outcome: CreateOutcome::Failed,
                abort: true,
            };
            self.queue.push(deadline, event);
        } else {
            self.queue.push(done, Event::CreateDone { slot });
        }
    }

    /// The node finished the create of `slot` (unless it was killed or restarted since).
    pub(super) fn create_done(&mut self, slot: u32) {
        let now = to_duration(self.now);
        let Some(a) = self.slots.get(slot as usize).and_then(Option::as_ref) else {
            return;
        };
        let n = &mut self.nodes[a.node as usize];
        let outcome = if n.epoch != a.epoch {
            // A kill reset the connection: the client saw UNAVAILABLE, the node dropped it.
            match a.key {
                Some(key) => n.model.abort_create_by_key(key, now),
                None => n.model.abort_create(&a.sandbox_id, now),
            }
            CreateOutcome::Failed
        } else {
            let finished = match a.key {
                Some(key) => n.model.finish_create_by_key(key, now),
                None => n.model.finish_create(&a.sandbox_id, now).is_ok(),
            };
            if finished {
                CreateOutcome::Created
            } else {
                CreateOutcome::Failed
            }
        };
        self.report(slot, outcome);
    }

    /// The client of `slot` gets `outcome` (the node dropped the create if `abort`).
    pub(super) fn reply(&mut self, slot: u32, outcome: CreateOutcome, abort: bool) {
        if abort {
            let now = to_duration(self.now);
            if let Some(a) = self.slots.get(slot as usize).and_then(Option::as_ref) {
                let model = &mut self.nodes[a.node as usize].model;
                match a.key {
                    Some(key) => model.abort_create_by_key(key, now),
                    None => model.abort_create(&a.sandbox_id, now),
                }
            }
        }
        self.report(slot, outcome);
    }

    fn reply_after(&mut self, slot: u32, outcome: CreateOutcome) {
        let t = self.now.saturating_add(self.setup.rpc_round_trip);
        let abort = false;
        self.queue.push(
            t,
            Event::Reply {
                slot,
                outcome,
                abort,
            },
        );
    }

    /// The client of `slot` learns `outcome`: counted, then told to the placer.
    fn report(&mut self, slot: u32, outcome: CreateOutcome) {
        let now = self.now;
        let Some(a) = self.slots.get(slot as usize).and_then(Option::as_ref) else {
            return;
        };
        if outcome == CreateOutcome::ResourceExhausted {
            self.tally.refusals += 1;
            self.tally.retries_on(a.node, now, 1, 1);
        }
        if outcome == CreateOutcome::Created && a.kind == PlacementKind::Create {
            self.tally.created_on(a.node);
        }
        let reply = match outcome {
            CreateOutcome::Created => CreateReply::Created,
            CreateOutcome::ResourceExhausted => CreateReply::Refused,
            CreateOutcome::Failed => CreateReply::Failed {
                code: ErrorKind::Other,
                message: String::new(),
            },
        };
        self.tell(slot, reply);
    }

    /// Feed the reply to the create of `slot` to its placer and act on what it says.
    fn tell(&mut self, slot: u32, reply: CreateReply) {
        let Some(a) = self.slots.get(slot as usize).and_then(Option::as_ref) else {
            return;
        };
        let (replica, req) = (a.replica as usize, a.req);
        let input = Input::CreateReplied { req, reply };
        let out = self.placers[replica].handle(to_duration(self.now), input);
        self.act(slot, out);
    }

    /// A refused request's next try is due at `at`: E2B's loop retries at once, after
    /// the optional backoff (`retry.rs` settles the ticks it can prove refused).
    fn retry_at(&mut self, slot: u32, at: Nanos) {
        if at <= self.now {
            self.retry_tick(slot);
            return;
        }
        let Some(a) = self.slots.get(slot as usize).and_then(Option::as_ref) else {
            return;
        };
        let (req, gen) = (a.req, a.gen);
        self.queue.push_late(at, req, Event::Retry { slot, gen });
    }

    /// The placer answered the request of `slot`; a placed sandbox gets its delete (the
    /// workload's lifetime) or its eviction (its end time) scheduled.
    fn answered(&mut self, slot: u32, answer: &Answered) {
        let now = self.now;
        let Some(a) = self.slots.get(slot as usize).and_then(Option::as_ref) else {
            return;
        };
        if answer.node.is_none() {
            return self.finish(slot, answer.status());
        }
        let (req, node, replica, key) = (a.req, a.node, a.replica, a.key);
        if a.kind != PlacementKind::Create {
            return self.finish(slot, CreateStatus::Created);
        }
        // E2B's evictor kills it at its end time unless the workload did first; past the
        // workload's end nothing is simulated, so this costs nothing for sandboxes that
        // outlive the run.
        let end = now.saturating_add(to_nanos(self.setup.sandbox.timeout));
        let mut delete_at = None;
        if self.created_with_life(req, node, replica, end) {
            // Its lifecycle ends it, not a lifetime.
        } else if let Some(dist) = &self.setup.lifetime {
            let life = match dist {
                // Draws nothing: no RNG to seed (one per placement otherwise).
                LatencyDist::Constant { value } => *value,
                _ => dist.sample(&mut ChaCha8Rng::seed_from_u64(lifetime_seed(
                    self.setup.seed,
                    req,
                ))),
            };
            let at = now.saturating_add(to_nanos(life));
            let delete = Event::Delete {
                req,
                node,
                replica,
                key,
            };
            self.queue.push(at, delete);
            self.pending_deletes += 1;
            delete_at = Some(at);
        }
        if self.setup.evictor && delete_at.is_none_or(|at| at > end) {
            self.queue.push(end, Event::Evict { req, node, replica });
        }
        self.finish(slot, CreateStatus::Created);
    }

    /// The workload deletes request `req`'s sandbox (admitted under `key`) through the
    /// replica that placed it.
    pub(super) fn delete(&mut self, req: u64, node: u32, replica: u32, key: Option<SandboxKey>) {
        self.pending_deletes -= 1;
        let now = to_duration(self.now);
        let n = &mut self.nodes[node as usize];
        let outcome = if !self.evicted.is_empty() && self.evicted.remove(&req) {
            // The evictor removed it from the store first: E2B's 404.
            Outcome::Status(404)
        } else if n.effect.hung {
            Outcome::Timeout
        } else {
            let (ended, vcpu, id) = kill_on_node(n, req, key, now, self.setup.sandbox.vcpu);
            let input = delete_ended(&n.id, id, vcpu, ended);
            self.placers[replica as usize].handle(now, input);
            Outcome::Status(ended.status())
        };
        if !matches!(outcome, Outcome::Status(204)) {
            self.tally.delete_failures += 1;
        }
        if let Some(ledger) = &mut self.set_ledger {
            ledger.deleted(req, outcome);
        }
    }
}

impl Engine<'_> {
    /// E2B's evictor at the end time of request `req`'s sandbox on `node`, placed through
    /// `replica` (`packages/api/internal/orchestrator/evictor/evict.go`): a Delete to the
    /// node; the store entry goes whatever the answer, a success or NotFound releases the
    /// optimistic vCPU. A hung node's Delete runs into its deadline: a failure.
    pub(super) fn evict(&mut self, req: u64, node: u32, replica: u32) {
        if !self.lives.evict_due(req, self.now) {
            // A lifecycle's sandbox paused (or placed again) since.
            self.quiet = true;
            return;
        }
        let now = to_duration(self.now);
        let n = &mut self.nodes[node as usize];
        let (outcome, vcpu, id) = if n.effect.hung {
            (DeleteOutcome::Failed, 0, sandbox_id(req))
        } else {
            kill_on_node(n, req, None, now, self.setup.sandbox.vcpu)
        };
        let input = delete_ended(&n.id, id, vcpu, outcome);
        self.placers[replica as usize].handle(now, input);
        self.evicted.insert(req);
        if self.set_ledger.is_some() {
            self.evictions.push(req);
        }
    }
}

/// What the placer learns from a Delete of `sandbox_id` (`vcpu`) on `node` that ended
/// with `outcome`.
pub(super) fn delete_ended(node: &str, sandbox_id: Id, vcpu: u32, outcome: DeleteOutcome) -> Input {
    Input::DeleteEnded {
        node: node.into(),
        sandbox_id,
        vcpu,
        released: outcome.releases_vcpu(),
    }
}

/// Lifetime seed of slot `req`, derived as the real workload derives it.
fn lifetime_seed(seed: u64, req: u64) -> u64 {
    seed ^ req.wrapping_mul(LIFETIME_MIX)
}

/// When the `hang` faults in force (`active`, indices into `plan`) have all healed; a
/// hang with no end lasts forever.
pub(super) fn hang_heals_at(
    plan: &[super::faults::PlannedFault],
    active: &[usize],
) -> super::queue::Nanos {
    active
        .iter()
        .filter_map(|&i| plan.get(i))
        .filter(|f| f.kind == stampede_node_model::fault::FaultKind::Hang)
        .map(|f| f.until.unwrap_or(super::queue::Nanos::MAX))
        .max()
        .unwrap_or(0)
}

/// A (not hung) node's answer to the Delete of request `req`'s sandbox, as E2B's kill
/// reads it: a killed node or a failing Delete is a failure (nothing released), a
/// NotFound is a success that releases the `requested` vCPU, a deletion releases the
/// sandbox's own. The node finds the sandbox by `key` when the create's admission gave
/// one, else by its id; the id is returned for the placer.
pub(super) fn kill_on_node(
    n: &mut SimNode,
    req: u64,
    key: Option<SandboxKey>,
    now: Duration,
    requested: u32,
) -> (DeleteOutcome, u32, Id) {
    // A Delete's `slow` delay is not modelled (nor its latency): it arrives at once.
    let failed = on_send(&n.effect) == Sent::Refused
        || n.model.gate(&n.effect, RpcKind::Delete) != Arrival::Passed;
    if failed {
        return (DeleteOutcome::Failed, 0, sandbox_id(req));
    }
    let deleted = match key {
        Some(key) => n.model.delete_by_key(key, now),
        None => n.model.delete(&sandbox_id(req), now).ok(),
    };
    match deleted {
        Some(sb) => (DeleteOutcome::Deleted, sb.vcpu, sb.sandbox_id),
        None => (DeleteOutcome::NotOnNode, requested, sandbox_id(req)),
    }
}

//! The create path of one request: decision by the placement core, the Create RPC
//! through the node's fault gate into the node model, and the retry rules.

use mock_node::config::{FailureCode, LatencyDist, RpcKind};
use mock_node::model::{CreateRejection, CreateRequest};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

use super::engine::{sandbox_id, Engine, Event};
use super::setup::{to_duration, to_nanos};
use crate::placement::{CreateOutcome, CreateStatus, Decision, DeleteOutcome};
use crate::workload::Outcome;

/// Same per-slot lifetime seeding as the real workload, so both draw the same lifetimes.
const LIFETIME_MIX: u64 = 0x9E37_79B9_7F4A_7C15;

impl Engine<'_> {
    /// Choose a node for the request in `slot` and send it the create.
    pub(super) fn decide(&mut self, slot: u32) {
        let now = self.now;
        let deadline = self.setup.request_timeout;
        let Some(a) = self.slots.get_mut(slot as usize).and_then(Option::as_mut) else {
            return;
        };
        let answers = self.setup.placement.failure_answers;
        if now.saturating_sub(a.intended) >= deadline {
            let f = a
                .attempt
                .deadline_reached(&mut self.cores[a.replica as usize]);
            self.finish(slot, answers.answer(&f).status);
            return;
        }
        let core = &mut self.cores[a.replica as usize];
        let chosen = match a.attempt.next(core, &mut self.rng) {
            Ok(id) => id,
            Err(f) => {
                self.finish(slot, answers.answer(&f).status);
                return;
            }
        };
        let Some(&node) = self.node_index.get(&chosen) else {
            a.attempt.abandon(core);
            self.finish(slot, CreateStatus::InternalServerError);
            return;
        };
        let n = &self.nodes[node as usize];
        a.node = node;
        a.sent = now;
        a.epoch = n.epoch;
        a.faults.clone_from(&n.active);
        let eff = &n.effect;
        if eff.killed {
            self.reply_after(slot, CreateOutcome::Failed);
        } else if eff.hung {
            let t = now.saturating_add(self.setup.create_rpc_timeout);
            self.queue.push(
                t,
                Event::Reply {
                    slot,
                    outcome: CreateOutcome::Failed,
                    abort: false,
                },
            );
        } else {
            match eff.slow.map(to_nanos).filter(|d| *d > 0) {
                Some(d) => self
                    .queue
                    .push(now.saturating_add(d), Event::Arrive { slot }),
                None => self.arrive(slot),
            }
        }
    }

    /// The create of `slot` reaches its node: fault gate, then admission.
    pub(super) fn arrive(&mut self, slot: u32) {
        let now = self.now;
        let Some(a) = self.slots.get(slot as usize).and_then(Option::as_ref) else {
            return;
        };
        let n = &mut self.nodes[a.node as usize];
        let m = &mut n.model;
        let injected = n
            .effect
            .errors
            .and_then(|(p, code)| m.chance(p).then_some(code))
            .or_else(|| m.sample_failure(RpcKind::Create));
        if let Some(code) = injected {
            m.count_failed_create();
            let outcome = if code == FailureCode::ResourceExhausted {
                CreateOutcome::ResourceExhausted
            } else {
                CreateOutcome::Failed
            };
            self.reply_after(slot, outcome);
            return;
        }
        if n.effect.exhaust {
            m.reject(CreateRejection::Exhausted);
            self.reply_after(slot, CreateOutcome::ResourceExhausted);
            return;
        }
        let s = &self.setup.sandbox;
        let req = CreateRequest {
            sandbox_id: a.attempt.sandbox_id().to_string(),
            vcpu: i64::from(s.vcpu),
            ram_mb: i64::from(s.ram_mb),
            end_time: Some(to_duration(now).saturating_add(s.timeout)),
            template_id: s.template.clone(),
            team_id: String::new(),
            execution_id: String::new(),
        };
        match m.begin_create(req, to_duration(now)) {
            Err(r) => {
                let outcome = if r.is_resource_exhausted() {
                    CreateOutcome::ResourceExhausted
                } else {
                    CreateOutcome::Failed
                };
                self.reply_after(slot, outcome);
            }
            Ok(()) => {
                let done = now.saturating_add(to_nanos(m.sample_create_latency()));
                let deadline = a.sent.saturating_add(self.setup.create_rpc_timeout);
                if done > deadline {
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
        }
    }

    /// The node finished the create of `slot` (unless it was killed or restarted since).
    pub(super) fn create_done(&mut self, slot: u32) {
        let now = to_duration(self.now);
        let Some(a) = self.slots.get(slot as usize).and_then(Option::as_ref) else {
            return;
        };
        let n = &mut self.nodes[a.node as usize];
        let id = a.attempt.sandbox_id();
        let outcome = if n.epoch != a.epoch {
            // A kill reset the connection: the client saw UNAVAILABLE, the node dropped it.
            n.model.abort_create(id, now);
            CreateOutcome::Failed
        } else {
            match n.model.finish_create(id, now) {
                Ok(_) => CreateOutcome::Created,
                Err(_) => CreateOutcome::Failed,
            }
        };
        self.report(slot, outcome);
    }

    /// The client of `slot` gets `outcome` (the node dropped the create if `abort`).
    pub(super) fn reply(&mut self, slot: u32, outcome: CreateOutcome, abort: bool) {
        if abort {
            let now = to_duration(self.now);
            if let Some(a) = self.slots.get(slot as usize).and_then(Option::as_ref) {
                let id = a.attempt.sandbox_id();
                self.nodes[a.node as usize].model.abort_create(id, now);
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

    /// E2B's retry rules applied to one create outcome.
    fn report(&mut self, slot: u32, outcome: CreateOutcome) {
        let now = self.now;
        let Some(a) = self.slots.get_mut(slot as usize).and_then(Option::as_mut) else {
            return;
        };
        if outcome == CreateOutcome::ResourceExhausted {
            self.tally.refusals += 1;
            self.tally.retries_on(a.node, now, 1, 1);
        }
        self.tally.create_outcome(&a.faults, a.sent, outcome);
        if outcome == CreateOutcome::Created {
            self.tally.created_on(&self.setup.faults, a.node, now);
        }
        let core = &mut self.cores[a.replica as usize];
        match a.attempt.report(core, outcome) {
            Decision::Placed(_) => {
                if let Some(dist) = &self.setup.lifetime {
                    let life = match dist {
                        // Draws nothing: no RNG to seed (one per placement otherwise).
                        LatencyDist::Constant { value } => *value,
                        _ => dist.sample(&mut ChaCha8Rng::seed_from_u64(lifetime_seed(
                            self.setup.seed,
                            a.req,
                        ))),
                    };
                    let at = now.saturating_add(to_nanos(life));
                    let (req, node, replica) = (a.req, a.node, a.replica);
                    self.queue.push(at, Event::Delete { req, node, replica });
                    self.pending_deletes += 1;
                }
                self.finish(slot, CreateStatus::Created);
            }
            Decision::Retry if outcome == CreateOutcome::ResourceExhausted => {
                // E2B's loop retries at once, after the optional backoff.
                self.tally.retries += 1;
                match self.setup.retry_backoff {
                    0 => self.retry_tick(slot),
                    b => {
                        let (req, gen) = (a.req, a.gen);
                        self.queue.push_late(
                            now.saturating_add(b),
                            req,
                            Event::Retry { slot, gen },
                        );
                    }
                }
            }
            Decision::Retry => {
                self.tally.retries += 1;
                self.queue.push(now, Event::Decide { slot });
            }
        }
    }

    /// The workload deletes request `req`'s sandbox through the replica that placed it.
    pub(super) fn delete(&mut self, req: u64, node: u32, replica: u32) {
        self.pending_deletes -= 1;
        let now = to_duration(self.now);
        let n = &mut self.nodes[node as usize];
        let m = &mut n.model;
        let id = sandbox_id(req);
        let outcome = if n.effect.hung {
            Outcome::Timeout
        } else {
            // E2B's kill: a NotFound from the node is a success, and releases the vCPU.
            let ended = if n.effect.killed
                || n.effect
                    .errors
                    .and_then(|(p, code)| m.chance(p).then_some(code))
                    .or_else(|| m.sample_failure(RpcKind::Delete))
                    .is_some()
            {
                (DeleteOutcome::Failed, 0)
            } else {
                match m.delete(&id, now) {
                    Ok(sb) => (DeleteOutcome::Deleted, sb.vcpu),
                    Err(_) => (DeleteOutcome::NotOnNode, self.setup.sandbox.vcpu),
                }
            };
            let core = &mut self.cores[replica as usize];
            Outcome::Status(core.delete_ended(&n.id, &id, ended.1, ended.0))
        };
        if !matches!(outcome, Outcome::Status(204)) {
            self.tally.delete_failures += 1;
        }
        if let Some(ledger) = &mut self.set_ledger {
            ledger.deleted(req, outcome);
        }
    }
}

/// Lifetime seed of slot `req`, derived as the real workload derives it.
fn lifetime_seed(seed: u64, req: u64) -> u64 {
    seed ^ req.wrapping_mul(LIFETIME_MIX)
}

//! `workload.lifecycle` in the simulator: a created sandbox's holds, pause, resume (or
//! connect) and kill, driven through the same placer and node model as a real run.
//!
//! - Each sandbox draws its steps with [`Lifecycle::plan`] from the profile's seed and
//!   its request index, as the real workload draws them, so a run and a sim of one
//!   profile follow the same steps.
//! - A pause is the service's `Pause` RPC: the node lets the sandbox go (its vCPU is
//!   freed there, as by a Delete) and the placer is told as for a kill; the sandbox's
//!   node becomes its origin.
//! - A resume is an [`Input::Resume`] with that origin: the placer tries the origin
//!   first, then Best-of-K (E2B's `create_instance.go` and `placement.go`). On the node a
//!   Create from a snapshot waits for a starting slot, up to the node's
//!   `resume_acquire_timeout` (E2B's `acquireTimeout`, 15 s, in the orchestrator's
//!   `sandboxes.go`), then is refused with ResourceExhausted; a node at
//!   `max_sandboxes` refuses at once. Waiters take free slots in arrival order, as a
//!   mock node hands them out (E2B wakes every waiter and leaves the order to Go's
//!   scheduler; see docs/fidelity.md).
//! - A resume runs beside the workload (no worker, as the real workload's lifecycle
//!   tasks), and a sandbox stops at its first failed step, as the real workload does.
//!
//! Simplifications, as for deletes: a pause and a kill take no time and ignore `slow`;
//! a wait does not notice a kill or a restart of its node until a slot frees or it
//! runs out.

use std::collections::{BTreeMap, VecDeque};

use stampede_node_model::starting::RESUME_WAIT_REASON;

use super::create::{delete_ended, kill_on_node};
use super::engine::{sandbox_id, Active, Engine, Event};
use super::queue::Nanos;
use super::setup::{to_duration, to_nanos};
use crate::placement::{CreateOutcome, CreateStatus, Input, PlacementKind};
use crate::profile::PlannedStep;
use crate::report::{ResumeCall, ResumeFigures};
use crate::workload::Outcome;

/// One sandbox following its lifecycle.
struct Life {
    /// Its steps, drawn once.
    steps: Vec<PlannedStep>,
    /// Index of the next step.
    next: usize,
    /// The node it runs on (or was paused on: its origin).
    node: u32,
    /// The replica (the real run's target) its calls go to.
    replica: u32,
    /// End time of its current placement, while it runs: an evictor event for another
    /// time is stale.
    end: Option<Nanos>,
    /// Whether it is still taking steps.
    open: bool,
}

/// Every lifecycle of a run, the starting-slot waits on each node, and what the
/// report counts.
pub(super) struct Lives {
    lives: BTreeMap<u64, Life>,
    /// Lifecycles still taking steps.
    open: usize,
    /// Per node: resumes waiting for a starting slot, `(slot, serial)` in arrival order.
    waiters: Vec<VecDeque<(u32, u32)>>,
    waiting: usize,
    next_serial: u32,
    /// Placements per node by kind (`create`, `resume`).
    by_kind: BTreeMap<&'static str, Vec<u64>>,
    calls: Vec<ResumeCall>,
}

impl Lives {
    /// No lifecycles yet, on `nodes` nodes.
    pub fn new(nodes: usize) -> Self {
        Lives {
            lives: BTreeMap::new(),
            open: 0,
            waiters: vec![VecDeque::new(); nodes],
            waiting: 0,
            next_serial: 0,
            by_kind: BTreeMap::new(),
            calls: Vec::new(),
        }
    }

    /// Whether every lifecycle has ended.
    pub fn is_empty(&self) -> bool {
        self.open == 0
    }

    /// Whether some resume waits for a starting slot.
    pub fn waiting(&self) -> bool {
        self.waiting > 0
    }

    /// Whether an evictor event for request `req` at `now` still applies: always for a
    /// sandbox without a lifecycle; for one with, only to its current placement.
    pub fn evict_due(&self, req: u64, now: Nanos) -> bool {
        self.lives.get(&req).is_none_or(|l| l.end == Some(now))
    }

    fn placed(&mut self, kind: &'static str, node: u32, nodes: usize) {
        let counts = self.by_kind.entry(kind).or_insert_with(|| vec![0; nodes]);
        counts[node as usize] += 1;
    }

    /// Placements per node by kind, each node by its id (nodes with none left out), as
    /// a real run's report counts them.
    pub fn placements_by_kind(&self, ids: &[String]) -> BTreeMap<String, BTreeMap<String, u64>> {
        self.by_kind
            .iter()
            .map(|(kind, counts)| {
                let per_node = ids
                    .iter()
                    .zip(counts)
                    .filter(|(_, &c)| c > 0)
                    .map(|(id, &c)| (id.clone(), c))
                    .collect();
                (kind.to_string(), per_node)
            })
            .collect()
    }

    /// What the resumes did.
    pub fn resume_figures(&self) -> Option<ResumeFigures> {
        ResumeFigures::from_calls(self.calls.iter().copied())
    }
}

impl Engine<'_> {
    /// A create of request `req` landed on `node` through `replica`, to end at `end`:
    /// counts it, and starts its lifecycle if it draws one. True if it did (no workload
    /// lifetime then, as in a real run).
    pub(super) fn created_with_life(
        &mut self,
        req: u64,
        node: u32,
        replica: u32,
        end: Nanos,
    ) -> bool {
        let Some(lifecycle) = &self.setup.lifecycle else {
            return false;
        };
        self.lives.placed("create", node, self.nodes.len());
        let Some(steps) = lifecycle.plan(self.setup.seed, req) else {
            return false;
        };
        self.lives.lives.insert(
            req,
            Life {
                steps,
                next: 0,
                node,
                replica,
                end: Some(end),
                open: true,
            },
        );
        self.lives.open += 1;
        self.queue.push(self.now, Event::Step { req });
        true
    }

    /// Sandbox `req` takes its next step.
    pub(super) fn step(&mut self, req: u64) {
        let Some(life) = self.lives.lives.get_mut(&req).filter(|l| l.open) else {
            return;
        };
        let Some(&step) = life.steps.get(life.next) else {
            return self.end_life(req);
        };
        life.next += 1;
        match step {
            PlannedStep::Hold(d) => {
                let at = self.now.saturating_add(to_nanos(d));
                self.queue.push(at, Event::Step { req });
            }
            PlannedStep::Pause => self.pause(req),
            PlannedStep::Resume | PlannedStep::Connect => self.resume(req),
            PlannedStep::Kill => {
                self.kill(req);
                self.end_life(req);
            }
        }
    }

    fn end_life(&mut self, req: u64) {
        if let Some(life) = self.lives.lives.get_mut(&req).filter(|l| l.open) {
            life.open = false;
            self.lives.open -= 1;
        }
    }

    /// Takes the sandbox off its node if it is still there: the node's answer, the
    /// placer told as for a kill. `None`: the evictor had killed it (a 404).
    fn take_off_node(&mut self, req: u64) -> Option<crate::placement::DeleteOutcome> {
        if self.evicted.remove(&req) {
            return None;
        }
        let life = self.lives.lives.get_mut(&req)?;
        life.end = None;
        let (node, replica) = (life.node, life.replica);
        let now = to_duration(self.now);
        let n = &mut self.nodes[node as usize];
        let (outcome, vcpu, id) = if n.effect.hung {
            (crate::placement::DeleteOutcome::Failed, 0, sandbox_id(req))
        } else {
            kill_on_node(n, req, None, now, self.setup.sandbox.vcpu)
        };
        let input = delete_ended(&n.id, id, vcpu, outcome);
        self.placers[replica as usize].handle(now, input);
        Some(outcome)
    }

    /// `POST /sandboxes/{id}/pause`: the `Pause` RPC frees the sandbox on its node; a
    /// failure (or a sandbox the evictor removed) ends the lifecycle.
    fn pause(&mut self, req: u64) {
        match self.take_off_node(req) {
            Some(crate::placement::DeleteOutcome::Deleted) => {
                self.queue.push(self.now, Event::Step { req });
            }
            _ => self.end_life(req),
        }
    }

    /// `DELETE /sandboxes/{id}` at the end of a lifecycle.
    fn kill(&mut self, req: u64) {
        let running = self.lives.lives.get(&req).is_some_and(|l| l.end.is_some());
        let outcome = if running {
            self.take_off_node(req)
        } else {
            None
        };
        // What the client sees, as for a workload delete; 404 for a sandbox the
        // evictor removed.
        let status = outcome.map_or(404, |o| o.status());
        if status != 204 {
            self.tally.delete_failures += 1;
        }
        if let Some(ledger) = &mut self.set_ledger {
            ledger.deleted(req, Outcome::Status(status));
        }
    }

    /// `POST /sandboxes/{id}/resume` (or `/connect`): place the paused sandbox again,
    /// its origin first.
    fn resume(&mut self, req: u64) {
        let Some(life) = self.lives.lives.get(&req) else {
            return;
        };
        let (replica, origin) = (life.replica, life.node);
        let active = Active::sent(
            req,
            PlacementKind::Resume,
            (self.now, self.now),
            None,
            replica,
            origin,
        );
        let slot = self.occupy_slot(active);
        let input = Input::Resume {
            req,
            sandbox_id: sandbox_id(req),
            vcpu: self.setup.sandbox.vcpu,
            origin: Some(self.nodes[origin as usize].id.clone()),
        };
        let out = self.placers[replica as usize].handle(to_duration(self.now), input);
        self.act(slot, out);
    }

    /// The resume `a` is answered `status` (its slot already freed): counted, and the
    /// lifecycle goes on where it landed, or ends.
    pub(super) fn resume_finished(&mut self, a: &Active, status: CreateStatus) {
        let req = a.req;
        let Some(life) = self.lives.lives.get_mut(&req) else {
            return;
        };
        let placed = status == CreateStatus::Created;
        self.lives.calls.push(ResumeCall {
            latency_us: self.now.saturating_sub(a.started) / 1000,
            placed,
            moved: placed && a.node != life.node,
        });
        if !placed {
            return self.end_life(req);
        }
        life.node = a.node;
        let end = self
            .now
            .saturating_add(to_nanos(self.setup.sandbox.timeout));
        life.end = Some(end);
        self.lives.placed("resume", a.node, self.nodes.len());
        if self.setup.evictor {
            let (node, replica) = (a.node, a.replica);
            self.queue.push(end, Event::Evict { req, node, replica });
        }
        self.queue.push(self.now, Event::Step { req });
    }

    /// Whether the create of `slot` is a resume that must wait for a starting slot on
    /// its node; if so the wait begins (until the acquire timeout or the deadline).
    pub(super) fn waits_for_slot(&mut self, slot: u32) -> bool {
        let now = self.now;
        let serial = self.lives.next_serial;
        let Some(a) = self.slots.get_mut(slot as usize).and_then(Option::as_mut) else {
            return false;
        };
        let m = &self.nodes[a.node as usize].model;
        if a.kind == PlacementKind::Create || a.wait.is_some() || !m.starting_slots_full() {
            return false;
        }
        self.lives.next_serial = serial.wrapping_add(1);
        a.wait = Some(serial);
        let until = now.saturating_add(to_nanos(m.spec().resume_acquire_timeout));
        self.lives.waiters[a.node as usize].push_back((slot, serial));
        self.lives.waiting += 1;
        self.queue
            .push(until.min(a.deadline), Event::WaitEnd { slot, serial });
        true
    }

    /// Resumes waiting on a node with a free starting slot (or at `max_sandboxes`,
    /// which refuses at once) go on to admission, in arrival order.
    pub(super) fn wake_waiters(&mut self) {
        for k in 0..self.nodes.len() {
            while !self.lives.waiters[k].is_empty() && !self.nodes[k].model.starting_slots_full() {
                let Some((slot, _)) = self.lives.waiters[k].pop_front() else {
                    break;
                };
                self.lives.waiting -= 1;
                if let Some(a) = self.slots.get_mut(slot as usize).and_then(Option::as_mut) {
                    a.wait = None;
                }
                self.arrive(slot);
            }
        }
    }

    /// The wait `serial` of the resume in `slot` ran out (unless a slot freed first):
    /// past its deadline the client gave up; otherwise the node refuses it.
    pub(super) fn wait_end(&mut self, slot: u32, serial: u32) {
        let Some(a) = self.slots.get_mut(slot as usize).and_then(Option::as_mut) else {
            self.quiet = true;
            return;
        };
        if a.wait != Some(serial) {
            self.quiet = true;
            return;
        }
        a.wait = None;
        let (k, deadline) = (a.node as usize, a.deadline);
        self.lives.waiters[k].retain(|&(s, _)| s != slot);
        self.lives.waiting -= 1;
        if self.now >= deadline {
            self.queue.push(
                self.now,
                Event::Reply {
                    slot,
                    outcome: CreateOutcome::Failed,
                    abort: false,
                },
            );
            return;
        }
        self.nodes[k].model.count_refusals(RESUME_WAIT_REASON, 1);
        let at = self.now.saturating_add(self.setup.rpc_round_trip);
        self.queue.push(
            at,
            Event::Reply {
                slot,
                outcome: CreateOutcome::ResourceExhausted,
                abort: false,
            },
        );
    }
}

//! The discrete-event engine: one thread, virtual time, one seeded RNG, no I/O.
//!
//! It drives the same [`Placer`] (one per replica) and the same
//! [`NodeModel`] (one per node) as a real run; this file holds the state and the loop,
//! `create.rs` the create RPC path, `nodes.rs` syncs, deletes and faults,
//! `lifecycle.rs` pauses and resumes, and `measure.rs` what is recorded.

use stampede_node_model::model::{NodeModel, SandboxKey};
use std::collections::{HashMap, VecDeque};
use std::time::Duration;

use stampede_node_model::effect::FaultEffect;

use super::error::SimError;
use super::lifecycle::Lives;
use super::measure::{Edge, Tally};
use super::queue::{EventQueue, Nanos};
use super::retry::Park;
use super::set_audit::SetLedger;
use super::setup::{to_duration, to_nanos, Arrivals, SimSetup};
use crate::aggregate::EntryAnswer;
use crate::placement::{
    CreateOutcome, CreateStatus, Id, Input, PlacementKind, Placer, PlacerConfig, SyncTimer,
};
use crate::workload::Outcome;

/// What can happen at an instant.
#[derive(Debug, Clone, Copy)]
pub(super) enum Event {
    /// The next request of the workload is due.
    Arrival,
    /// The create of `slot` reaches its node (after a `slow` fault's delay).
    Arrive { slot: u32 },
    /// The node finished the create of `slot`; the client learns the result.
    CreateDone { slot: u32 },
    /// The client of `slot` gets `outcome` without the node finishing a create; with
    /// `abort`, the node drops the admitted create (client deadline).
    Reply {
        slot: u32,
        outcome: CreateOutcome,
        abort: bool,
    },
    /// The workload deletes the sandbox of request `req` on `node` through `replica`;
    /// `key` is where the node admitted it.
    Delete {
        req: u64,
        node: u32,
        replica: u32,
        key: Option<SandboxKey>,
    },
    /// E2B's evictor kills request `req`'s sandbox on `node` at its end time.
    Evict { req: u64, node: u32, replica: u32 },
    /// `replica` syncs every node.
    Sync { replica: u32 },
    /// The sync cycle `replica` began on hung node `node` runs out of time.
    SyncCycleEnd { replica: u32, node: u32 },
    /// Chaos step `fault` starts.
    FaultStart { fault: u32 },
    /// Chaos step `fault` heals.
    FaultEnd { fault: u32 },
    /// Plan user `user` sends its next request (if still active).
    UserSend { user: u32 },
    /// Timeline sample.
    Sample,
    /// The request in `slot` leaves the API stage for its first decision.
    Decide { slot: u32 },
    /// The request in `slot` commits to the node it chose (its commit lag is over).
    Commit { slot: u32 },
    /// The placer learns that the create of `slot` succeeded (its return time is over).
    Returned { slot: u32 },
    /// `replica`'s oldest sync reply in transit from node `node` is applied.
    SyncArrive { replica: u32, node: u32 },
    /// Retry tick `gen` of the refused request in `slot` (see `retry.rs`); a late event.
    Retry { slot: u32, gen: u32 },
    /// Sandbox `req` takes the next step of its lifecycle (see `lifecycle.rs`).
    Step { req: u64 },
    /// The starting-slot wait `serial` of the resume in `slot` runs out (its acquire
    /// timeout or its request's deadline).
    WaitEnd { slot: u32, serial: u32 },
}

/// One node: the shared model plus the faults in force on it.
pub(super) struct SimNode {
    pub id: Id,
    pub model: NodeModel,
    pub effect: FaultEffect,
    /// Indices of the chaos steps in force, in application order.
    pub active: Vec<usize>,
    /// Bumped by every kill: creates begun before it fail when they complete.
    pub epoch: u64,
}

/// A request being placed.
pub(super) struct Active {
    pub req: u64,
    pub intended: Nanos,
    /// When a worker sent it.
    pub started: Nanos,
    /// The plan user that sent it (closed model), if any.
    pub user: Option<u32>,
    pub replica: u32,
    /// The sandbox id its creates carry.
    pub sandbox_id: Id,
    /// Its deadline, as the placer set it (known from its first Create on).
    pub deadline: Nanos,
    /// Node of the create in flight.
    pub node: u32,
    /// Node epoch when it was sent.
    pub epoch: u64,
    /// Where the node holds the sandbox of the create in flight, once admitted.
    pub key: Option<SandboxKey>,
    /// When the node's Create handler took the create in flight: the node's own
    /// deadline (`create_timeout`) runs from there.
    pub handler_at: Nanos,
    /// Set while its retries wait for a state change.
    pub park: Option<Park>,
    /// Generation of its retry tick: a `Retry` event with another one is stale.
    pub gen: u32,
    /// Whether it places a paused sandbox again (a resume or connect, not a create).
    pub kind: PlacementKind,
    /// Serial of the starting-slot wait it is in on its node, if any.
    pub wait: Option<u32>,
}

impl Active {
    /// Request `req` of `kind`, sent at `started` (intended at `intended`) by `user`
    /// through `replica`, with its first create headed to `node`: no deadline until the
    /// placer sets one, not parked, waiting for nothing.
    pub fn sent(
        req: u64,
        kind: PlacementKind,
        (intended, started): (Nanos, Nanos),
        user: Option<u32>,
        replica: u32,
        node: u32,
    ) -> Self {
        Self {
            req,
            intended,
            started,
            user,
            replica,
            sandbox_id: sandbox_id(req),
            deadline: Nanos::MAX,
            node,
            epoch: 0,
            key: None,
            handler_at: 0,
            park: None,
            gen: 0,
            kind,
            wait: None,
        }
    }
}

/// The whole simulated world.
pub(super) struct Engine<'a> {
    pub setup: &'a SimSetup,
    pub now: Nanos,
    pub queue: EventQueue<Event>,
    pub nodes: Vec<SimNode>,
    pub node_index: HashMap<Id, u32, foldhash::fast::RandomState>,
    pub placers: Vec<Placer>,
    pub slots: Vec<Option<Active>>,
    pub free_slots: Vec<u32>,
    /// Requests due while every worker was busy, in order.
    pub backlog: VecDeque<(u64, Nanos)>,
    /// Backlog requests to start once the outermost [`finish`](Self::finish) returns.
    pub deferred_starts: usize,
    /// Whether a [`finish`](Self::finish) is starting backlog requests.
    pub draining: bool,
    pub open: usize,
    pub next_arrival: u64,
    pub pending_deletes: u64,
    /// Requests whose sandbox the evictor killed (a later workload delete is a 404).
    pub evicted: std::collections::HashSet<u64>,
    /// Every request whose sandbox the evictor deleted, in order (kept for the set
    /// set audit only).
    pub evictions: Vec<u64>,
    /// `UserSend` events scheduled and not yet handled.
    pub user_sends: u64,
    pub tally: Tally,
    /// The client ledger, when the set audit runs.
    pub set_ledger: Option<SetLedger>,
    /// Events processed, a sync or a sample counting one more per node it reads.
    pub events: u64,
    /// Slots of the parked requests.
    pub parked: Vec<u32>,
    /// Time and key of the last late event popped (the tie rule of parked ticks).
    pub last_late: Option<(Nanos, u64)>,
    /// Whether the event being handled changed nothing (a refusal certain in advance).
    pub quiet: bool,
    /// Sandboxes following a lifecycle, by request (see `lifecycle.rs`).
    pub lives: Lives,
}

impl<'a> Engine<'a> {
    pub fn new(setup: &'a SimSetup) -> Self {
        let nodes: Vec<SimNode> = setup
            .node_models()
            .into_iter()
            .map(|model| SimNode {
                id: Id::from(model.id()),
                model,
                effect: FaultEffect::default(),
                active: Vec::new(),
                epoch: 0,
            })
            .collect();
        let node_index = nodes
            .iter()
            .enumerate()
            .map(|(k, node)| (node.id.clone(), k as u32))
            .collect();
        // Seeds as `stampede serve` gives its replicas: `seed + i`.
        let placers = (0..setup.replicas)
            .map(|r| {
                let cfg = PlacerConfig {
                    placement: setup.placement.clone(),
                    seed: setup.seed.wrapping_add(r as u64),
                    request_timeout: to_duration(setup.request_timeout),
                    retry_backoff: Some(to_duration(setup.retry_backoff)),
                    defer_retries: true,
                    api_stage: setup.api_stage.clone(),
                };
                let mut placer = Placer::new(cfg, nodes.iter().map(|n| n.id.clone()));
                // A simulated report shows the configured mode's figures only.
                placer.core_mut().keep_only_configured_mode();
                placer
            })
            .collect();
        Engine {
            setup,
            now: 0,
            queue: EventQueue::default(),
            nodes,
            node_index,
            placers,
            slots: Vec::new(),
            free_slots: Vec::new(),
            backlog: VecDeque::new(),
            deferred_starts: 0,
            draining: false,
            open: 0,
            next_arrival: 0,
            pending_deletes: 0,
            evicted: std::collections::HashSet::new(),
            evictions: Vec::new(),
            user_sends: 0,
            tally: Tally::new(setup),
            set_ledger: setup.audit_sets.then(SetLedger::default),
            events: 0,
            parked: Vec::new(),
            last_late: None,
            quiet: false,
            lives: Lives::new(setup.cluster.nodes),
        }
    }

    /// Runs until the workload is over (every request answered, every delete done);
    /// returns the end time. Stops with [`SimError::EventBudget`] once more than
    /// `max_events` events are processed (a sync or a sample counts one per node read).
    pub fn run(&mut self, max_events: u64) -> Result<Nanos, SimError> {
        // Every replica connects before the gate: the initial sync happens at t = 0,
        // before the first sample and the first request.
        for r in 0..self.setup.replicas {
            self.events += 1;
            self.sync_all(r as u32);
            let timer = SyncTimer::new(
                to_duration(self.setup.sync_interval),
                self.first_periodic_sync(r),
            );
            self.placers[r].start_syncs(timer);
            self.queue_next_sync(r as u32);
        }
        self.queue.push(0, Event::Sample);
        for (i, f) in self.setup.faults.iter().enumerate() {
            self.queue.push(f.at, Event::FaultStart { fault: i as u32 });
        }
        if self.setup.arrivals.total() > 0 {
            self.queue.push(self.setup.arrivals.at(0), Event::Arrival);
        }
        if let Arrivals::Plan { users } = &self.setup.arrivals {
            for (k, &(start, _)) in users.iter().enumerate() {
                self.user_sends += 1;
                self.queue.push(start, Event::UserSend { user: k as u32 });
            }
        }
        while !self.workload_done() {
            if self.events > max_events {
                return Err(SimError::EventBudget {
                    max_events,
                    virtual_ns: self.now,
                    open: (self.open + self.backlog.len()) as u64,
                    retries: self.tally.retries,
                });
            }
            let Some((at, event)) = self.queue.pop() else {
                break;
            };
            self.now = at;
            self.events += 1;
            if let Event::Retry { slot, .. } = event {
                let key = self.slots[slot as usize]
                    .as_ref()
                    .map_or(u64::MAX, |a| a.req);
                self.last_late = Some((at, key));
            }
            self.quiet = false;
            let loosens = loosens_admission(&event);
            self.handle(event);
            if self.lives.waiting() {
                self.wake_waiters();
            }
            // Only an event that can let a refusing node accept (or change which nodes
            // a decision may return) can end a park. Without the service's own starting
            // filter, a create admitted only tightens, and in-progress marks only move
            // scores (which `retry.rs` does not rely on outside `reported`).
            let marks_matter = self.setup.placement.max_starting_per_node.is_some();
            if (loosens || (marks_matter && !self.quiet)) && !self.parked.is_empty() {
                self.unpark_all();
            }
        }
        Ok(self.now)
    }

    fn workload_done(&self) -> bool {
        self.next_arrival >= self.setup.arrivals.total()
            && self.open == 0
            && self.backlog.is_empty()
            && self.pending_deletes == 0
            && self.user_sends == 0
            && self.lives.is_empty()
    }

    /// The event of replica `replica`'s next periodic sync, when its placer asks for it.
    fn queue_next_sync(&mut self, replica: u32) {
        if let Some(at) = self.placers[replica as usize].poll_timeout() {
            self.queue.push(to_nanos(at), Event::Sync { replica });
        }
    }

    /// Replica `r` syncs `r / replicas` of an interval after replica 0.
    fn first_periodic_sync(&self, r: usize) -> Duration {
        crate::placement::first_periodic_sync(
            to_duration(self.setup.sync_interval),
            to_duration(self.setup.sync_phase),
            r,
            self.setup.replicas,
        )
    }

    fn handle(&mut self, event: Event) {
        match event {
            Event::Arrival => self.arrival(),
            Event::Arrive { slot } => self.arrive(slot),
            Event::CreateDone { slot } => self.create_done(slot),
            Event::Reply {
                slot,
                outcome,
                abort,
            } => self.reply(slot, outcome, abort),
            Event::Delete {
                req,
                node,
                replica,
                key,
            } => self.delete(req, node, replica, key),
            Event::Evict { req, node, replica } => self.evict(req, node, replica),
            Event::Sync { replica } => {
                if self.placers[replica as usize].handle_timeout(to_duration(self.now)) {
                    self.tally.synced(self.now);
                    self.sync_all(replica);
                }
                self.queue_next_sync(replica);
            }
            Event::SyncCycleEnd { replica, node } => self.sync_cycle_end(replica, node),
            Event::FaultStart { fault } => {
                self.fault_start(fault as usize);
                self.fault_edge(fault as usize, Edge::InForce);
            }
            Event::FaultEnd { fault } => {
                self.fault_edge(fault as usize, Edge::BeforeHeal);
                self.fault_end(fault as usize);
            }
            Event::UserSend { user } => {
                self.user_sends -= 1;
                if self.user_active(user) {
                    let req = self.next_arrival;
                    self.next_arrival += 1;
                    self.start(req, self.now, Some(user));
                }
            }
            Event::Sample => {
                self.sample();
                let next = self.now.saturating_add(self.setup.collect_interval);
                self.queue.push(next, Event::Sample);
            }
            Event::Retry { slot, gen } => self.retry_event(slot, gen),
            Event::Decide { slot } => self.decide_first(slot),
            Event::Commit { slot } => self.commit(slot),
            Event::Returned { slot } => self.returned(slot),
            Event::SyncArrive { replica, node } => self.sync_arrive(replica, node),
            Event::Step { req } => self.step(req),
            Event::WaitEnd { slot, serial } => self.wait_end(slot, serial),
        }
    }

    fn arrival(&mut self) {
        let i = self.next_arrival;
        self.next_arrival += 1;
        let intended = self.setup.arrivals.at(i);
        if self.open < self.setup.workers {
            self.start(i, intended, None);
        } else {
            self.backlog.push_back((i, intended));
        }
        if self.next_arrival < self.setup.arrivals.total() {
            let at = self.setup.arrivals.at(self.next_arrival).max(self.now);
            self.queue.push(at, Event::Arrival);
        }
    }

    /// Puts `active` in a free slot (or a new one) and returns the slot.
    pub(super) fn occupy_slot(&mut self, active: Active) -> u32 {
        match self.free_slots.pop() {
            Some(s) => {
                self.slots[s as usize] = Some(active);
                s
            }
            None => {
                self.slots.push(Some(active));
                (self.slots.len() - 1) as u32
            }
        }
    }

    /// Sends request `req` now (a worker is free) and makes its first decision.
    fn start(&mut self, req: u64, intended: Nanos, user: Option<u32>) {
        self.open += 1;
        self.tally.sent(self.now, self.now.saturating_sub(intended));
        let replica = (req % self.setup.replicas as u64) as u32;
        let active = Active::sent(
            req,
            PlacementKind::Create,
            (intended, self.now),
            user,
            replica,
            0,
        );
        let slot = self.occupy_slot(active);
        let input = Input::Create {
            req,
            sandbox_id: self.slots[slot as usize]
                .as_ref()
                .map_or_else(|| sandbox_id(req), |a| a.sandbox_id.clone()),
            vcpu: self.setup.sandbox.vcpu,
        };
        let out = self.placers[replica as usize].handle(to_duration(self.now), input);
        self.act(slot, out);
    }

    /// The request in `slot` is answered: free its worker and start a waiting request
    /// (a resume has no worker: its sandbox's lifecycle goes on).
    pub(super) fn finish(&mut self, slot: u32, status: CreateStatus) {
        let Some(a) = self.slots.get(slot as usize).and_then(Option::as_ref) else {
            return;
        };
        if a.kind != PlacementKind::Create {
            let Some(a) = self.slots[slot as usize].take() else {
                return;
            };
            self.free_slots.push(slot);
            return self.resume_finished(&a, status);
        }
        // Read in place (the fields below are disjoint from `slots`) and cleared after:
        // a create's slot is not moved out.
        let user = a.user;
        self.open -= 1;
        let latency = self.now.saturating_sub(a.intended);
        let landed = (status == CreateStatus::Created).then_some(a.node);
        self.tally
            .answered(status, latency, a.started, self.now, landed);
        if let Some(ledger) = &mut self.set_ledger {
            let outcome = Outcome::from(status);
            let ms = |t: Nanos| t as f64 / 1e6;
            ledger.answered(EntryAnswer {
                req: a.req,
                replica: a.replica,
                intended_ms: ms(a.intended),
                sent_ms: ms(a.started),
                latency_us: latency / 1000,
                outcome: &outcome,
                sandbox_id: &a.sandbox_id,
                node: &self.nodes[a.node as usize].id,
            });
        }
        self.slots[slot as usize] = None;
        self.free_slots.push(slot);
        if !self.backlog.is_empty() {
            self.deferred_starts += 1;
        }
        if let Some(user) = user.filter(|&u| self.user_active(u)) {
            // The closed loop: the next request one client round trip later.
            self.user_sends += 1;
            let at = self.now.saturating_add(super::setup::CLIENT_ROUND_TRIP);
            self.queue.push(at, Event::UserSend { user });
        }
        // A waiting request starts now. It may be answered at once (its deadline passed
        // while it waited) and start the next one: a loop here, not a recursion as deep
        // as the backlog. Only the open model has a backlog and only plan users have a
        // closed loop, so the order of events is the one a recursion would give.
        if self.draining {
            return;
        }
        self.draining = true;
        while self.deferred_starts > 0 {
            self.deferred_starts -= 1;
            if let Some((req, intended)) = self.backlog.pop_front() {
                self.start(req, intended, None);
            }
        }
        self.draining = false;
    }

    /// Whether plan user `user` is still sending.
    fn user_active(&self, user: u32) -> bool {
        match &self.setup.arrivals {
            Arrivals::Plan { users } => users
                .get(user as usize)
                .is_some_and(|&(start, stop)| self.now >= start && self.now < stop),
            _ => false,
        }
    }
}

/// Whether `event` can free capacity on a node or change a replica's view of the fleet:
/// a create that ends, a delete, a sync, a fault edge, a lifecycle step (a pause). (A node never frees capacity by
/// itself: sandboxes leave only through Delete, Pause or a restart.)
fn loosens_admission(event: &Event) -> bool {
    matches!(
        event,
        Event::CreateDone { .. }
            | Event::Reply { abort: true, .. }
            | Event::Delete { .. }
            | Event::Evict { .. }
            | Event::Sync { .. }
            | Event::FaultStart { .. }
            | Event::FaultEnd { .. }
            | Event::Step { .. }
    )
}

/// The sandbox id of request `req` (zero-padded so ids sort like requests):
/// `format!("sb-{req:08}")`, written digit by digit (the formatter's machinery was 2%
/// of a churn run, which names every sandbox twice).
pub(super) fn sandbox_id(req: u64) -> Id {
    const PREFIX: &[u8] = b"sb-";
    let digits = req.checked_ilog10().unwrap_or(0) as usize + 1;
    let width = digits.max(8);
    let mut buf = [b'0'; 3 + 20];
    buf[..PREFIX.len()].copy_from_slice(PREFIX);
    let end = PREFIX.len() + width;
    let mut v = req;
    for b in buf[end - digits..end].iter_mut().rev() {
        *b = b'0' + (v % 10) as u8;
        v /= 10;
    }
    // ASCII only: the prefix and digits.
    Id::new(std::str::from_utf8(&buf[..end]).unwrap_or_default())
}

#[cfg(test)]
mod tests {
    use super::sandbox_id;

    #[test]
    fn sandbox_ids_are_the_formatted_request_numbers() {
        let mut reqs = vec![0, 1, 9, 10, 99_999_999, 100_000_000, u64::MAX];
        reqs.extend((0..64).map(|b| 1u64 << b));
        reqs.extend((0..20).map(|p| 10u64.pow(p) - 1));
        for req in reqs {
            assert_eq!(sandbox_id(req).as_str(), format!("sb-{req:08}"), "{req}");
        }
    }
}

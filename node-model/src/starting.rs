//! The calls waiting for a starting slot of one node, and who gets a slot that frees.
//!
//! E2B's orchestrator keeps its starting slots in one semaphore
//! (`utils.AdjustableSemaphore` in `packages/shared/pkg/utils/resizable_semaphore.go`,
//! created in `packages/orchestrator/pkg/server/main.go`): a Create from a snapshot and a
//! Checkpoint wait in `Acquire` (through `waitForAcquire`), a fresh Create calls
//! `TryAcquire`. That semaphore is a counter under a mutex with a condition variable, not
//! `golang.org/x/sync/semaphore`: `TryAcquire` looks only at the count, and `Release`
//! wakes every waiter to look again. A waiter only waits while every slot is taken, so a
//! fresh create can take a freed slot before the woken waiter only in the microseconds
//! between a release and that waiter's re-lock. The model closes that window: a slot that
//! frees is handed at once to the oldest waiter (which is also the order Go's condition
//! variable wakes its waiters in; which of them then locks first is the Go scheduler's),
//! so a fresh create that arrives after the release finds every slot taken, as it would
//! in E2B barring that window. The simulator hands slots the same way.
//!
//! Pure: tickets in, tickets out. The node's driver wakes the waiting calls
//! (mock-node's `resume` module).

use std::collections::{BTreeMap, VecDeque};

/// The reason a wait that ran out is counted under, among the node's refusals.
pub const RESUME_WAIT_REASON: &str = "max_starting_resume";

/// A call waiting for a starting slot, named by the model.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Ticket(u64);

/// What became of a waiting call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WaitState {
    /// Still waiting, behind `ahead` others.
    Queued {
        /// Waiters ahead of it.
        ahead: usize,
    },
    /// A slot is held for it until it goes on to admission or leaves.
    Granted,
    /// Let go without a slot: the node reached `max_sandboxes`, which admission refuses
    /// at once (the wait ends as the old per-call check ended it).
    Released,
    /// Unknown ticket (it left already).
    Gone,
}

/// The waiters of one node, oldest first, and the slots handed to waiters that have not
/// taken them yet.
#[derive(Debug, Clone, Default)]
pub struct StartingQueue {
    queue: VecDeque<Ticket>,
    /// Waiters let go, by ticket: `true` when a slot is held for it.
    woken: BTreeMap<Ticket, bool>,
    /// Slots held for woken waiters (the `true`s of `woken`).
    held: usize,
    next: u64,
}

impl StartingQueue {
    /// A new waiter, behind every other.
    pub fn join(&mut self) -> Ticket {
        let t = Ticket(self.next);
        self.next += 1;
        self.queue.push_back(t);
        t
    }

    /// Slots held for woken waiters that have not gone on to admission yet.
    pub fn held(&self) -> usize {
        self.held
    }

    /// Calls waiting (not yet woken).
    pub fn waiting(&self) -> usize {
        self.queue.len()
    }

    /// Where `t` stands.
    pub fn state(&self, t: Ticket) -> WaitState {
        match self.woken.get(&t) {
            Some(true) => WaitState::Granted,
            Some(false) => WaitState::Released,
            None => match self.queue.iter().position(|&q| q == t) {
                Some(ahead) => WaitState::Queued { ahead },
                None => WaitState::Gone,
            },
        }
    }

    /// `t` leaves, wherever it stands; a slot held for it is free again.
    pub fn leave(&mut self, t: Ticket) {
        match self.woken.remove(&t) {
            Some(true) => self.held -= 1,
            Some(false) => {}
            None => self.queue.retain(|&q| q != t),
        }
    }

    /// Hands `free` slots to the oldest waiters, or lets every waiter go when `release_all`
    /// (the node is at `max_sandboxes`). Whether anyone was woken.
    pub fn wake(&mut self, free: usize, release_all: bool) -> bool {
        let mut woke = false;
        if release_all {
            for t in self.queue.drain(..) {
                self.woken.insert(t, false);
                woke = true;
            }
            return woke;
        }
        for _ in 0..free {
            let Some(t) = self.queue.pop_front() else {
                break;
            };
            self.woken.insert(t, true);
            self.held += 1;
            woke = true;
        }
        woke
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn freed_slots_go_to_the_oldest_waiters_and_a_leaver_frees_its_slot() {
        let mut q = StartingQueue::default();
        let (a, b, c) = (q.join(), q.join(), q.join());
        assert_eq!(q.state(c), WaitState::Queued { ahead: 2 });
        assert!(q.wake(1, false));
        assert_eq!(q.state(a), WaitState::Granted);
        assert_eq!(q.state(b), WaitState::Queued { ahead: 0 });
        assert_eq!(q.held(), 1);
        q.leave(a);
        assert_eq!((q.held(), q.state(a)), (0, WaitState::Gone));
        q.leave(b);
        assert_eq!(q.state(c), WaitState::Queued { ahead: 0 });
        assert!(q.wake(5, false));
        assert_eq!((q.held(), q.waiting()), (1, 0));
        assert!(!q.wake(5, false), "nobody left to wake");
    }

    #[test]
    fn release_all_lets_every_waiter_go_without_a_slot() {
        let mut q = StartingQueue::default();
        let (a, b) = (q.join(), q.join());
        assert!(q.wake(0, true));
        assert_eq!(
            (q.state(a), q.state(b)),
            (WaitState::Released, WaitState::Released)
        );
        assert_eq!(q.held(), 0);
        q.leave(a);
        assert_eq!(q.state(a), WaitState::Gone);
    }
}

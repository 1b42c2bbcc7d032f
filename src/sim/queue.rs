//! The event queue: a min-heap on `(virtual time, sequence number)`.
//!
//! The sequence number makes the order of simultaneous events the order in which they
//! were scheduled, so a run never depends on how the heap breaks ties. Events pushed
//! with [`EventQueue::push_late`] (the retry ticks of refused creates) fire after every
//! other event at their instant, in the order of their key: an order that does not
//! depend on when they were scheduled, so the parked-retry model can skip ticks and
//! still put the next one where stepping every tick would have put it.

use std::cmp::Ordering;
use std::collections::BinaryHeap;

/// Virtual time in nanoseconds since the workload's start gate.
pub type Nanos = u64;

/// Top bit of [`Entry::rank`]: a late event.
const LATE: u64 = 1 << 63;

struct Entry<E> {
    at: Nanos,
    /// `seq` for an ordinary event, `LATE | key` for a late one: one word, so that an
    /// entry stays small (a large run holds ~10^5 pending events).
    rank: u64,
    event: E,
}

impl<E> PartialEq for Entry<E> {
    fn eq(&self, other: &Self) -> bool {
        (self.at, self.rank) == (other.at, other.rank)
    }
}

impl<E> Eq for Entry<E> {}

impl<E> PartialOrd for Entry<E> {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl<E> Ord for Entry<E> {
    // Reversed: `BinaryHeap` is a max-heap and we pop the earliest event first.
    fn cmp(&self, other: &Self) -> Ordering {
        (other.at, other.rank).cmp(&(self.at, self.rank))
    }
}

/// Pending events in firing order.
pub struct EventQueue<E> {
    heap: BinaryHeap<Entry<E>>,
    next_seq: u64,
}

impl<E> Default for EventQueue<E> {
    fn default() -> Self {
        Self {
            heap: BinaryHeap::new(),
            next_seq: 0,
        }
    }
}

impl<E> EventQueue<E> {
    /// Schedule `event` at `at`; it fires after every event already scheduled at `at`.
    pub fn push(&mut self, at: Nanos, event: E) {
        let seq = self.next_seq;
        self.next_seq += 1;
        debug_assert!(seq < LATE, "sequence numbers stay below the late bit");
        self.heap.push(Entry {
            at,
            rank: seq,
            event,
        });
    }

    /// Schedule `event` at `at` after every ordinary event at `at`; late events at one
    /// instant fire in increasing `key` (keys must be unique among them and below 2^63).
    pub fn push_late(&mut self, at: Nanos, key: u64, event: E) {
        debug_assert!(key < LATE, "late keys stay below the late bit");
        self.heap.push(Entry {
            at,
            rank: LATE | key,
            event,
        });
    }

    /// The earliest event and its time.
    pub fn pop(&mut self) -> Option<(Nanos, E)> {
        self.heap.pop().map(|e| (e.at, e.event))
    }

    /// Events pending.
    pub fn len(&self) -> usize {
        self.heap.len()
    }

    /// Whether nothing is pending.
    pub fn is_empty(&self) -> bool {
        self.heap.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::EventQueue;

    #[test]
    fn earliest_first_then_scheduling_order() {
        let mut q = EventQueue::default();
        q.push(5, "c");
        q.push(1, "a");
        q.push(5, "d");
        q.push(1, "b");
        let order: Vec<_> = std::iter::from_fn(|| q.pop()).collect();
        assert_eq!(order, vec![(1, "a"), (1, "b"), (5, "c"), (5, "d")]);
    }

    #[test]
    fn late_events_after_ordinary_ones_by_key() {
        let mut q = EventQueue::default();
        q.push_late(5, 9, "late-9");
        q.push_late(5, 2, "late-2");
        q.push(5, "c");
        q.push_late(1, 7, "late-7");
        q.push(5, "d");
        let order: Vec<_> = std::iter::from_fn(|| q.pop()).map(|(_, e)| e).collect();
        assert_eq!(order, vec!["late-7", "c", "d", "late-2", "late-9"]);
    }
}

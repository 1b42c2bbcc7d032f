//! The event queue: a min-heap on `(virtual time, sequence number)`.
//!
//! The sequence number makes the order of simultaneous events the order in which they
//! were scheduled, so a run never depends on how the heap breaks ties. Events pushed
//! with [`EventQueue::push_late`] (the retry ticks of refused creates) fire after every
//! other event at their instant, in the order of their key: an order that does not
//! depend on when they were scheduled, so the parked-retry model can skip ticks and
//! still put the next one where stepping every tick would have put it.

use std::cmp::Ordering;
use std::collections::{BinaryHeap, VecDeque};

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
///
/// An event that sorts after every event in `tail` is appended there instead of going
/// into the heap: deletes after a lifetime, periodic syncs and samples mostly arrive in
/// order, and a large run holds ~10^5 of them, which the heap would sift at every pop.
/// `pop` takes the earlier of the two fronts, so the order is the heap's alone.
pub struct EventQueue<E> {
    heap: BinaryHeap<Entry<E>>,
    /// Sorted by `(at, rank)`, earliest first.
    tail: VecDeque<Entry<E>>,
    next_seq: u64,
}

impl<E> Default for EventQueue<E> {
    fn default() -> Self {
        Self {
            heap: BinaryHeap::new(),
            tail: VecDeque::new(),
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
        self.insert(Entry {
            at,
            rank: seq,
            event,
        });
    }

    /// Schedule `event` at `at` after every ordinary event at `at`; late events at one
    /// instant fire in increasing `key` (keys must be unique among them and below 2^63).
    pub fn push_late(&mut self, at: Nanos, key: u64, event: E) {
        debug_assert!(key < LATE, "late keys stay below the late bit");
        self.insert(Entry {
            at,
            rank: LATE | key,
            event,
        });
    }

    fn insert(&mut self, e: Entry<E>) {
        match self.tail.back() {
            Some(last) if (e.at, e.rank) < (last.at, last.rank) => self.heap.push(e),
            _ => self.tail.push_back(e),
        }
    }

    /// The earliest event and its time.
    pub fn pop(&mut self) -> Option<(Nanos, E)> {
        let from_tail = match (self.heap.peek(), self.tail.front()) {
            (Some(h), Some(t)) => (t.at, t.rank) < (h.at, h.rank),
            (None, Some(_)) => true,
            (_, None) => false,
        };
        let e = if from_tail {
            self.tail.pop_front()
        } else {
            self.heap.pop()
        };
        e.map(|e| (e.at, e.event))
    }

    /// Events pending.
    pub fn len(&self) -> usize {
        self.heap.len() + self.tail.len()
    }

    /// Whether nothing is pending.
    pub fn is_empty(&self) -> bool {
        self.heap.is_empty() && self.tail.is_empty()
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
    fn in_order_and_out_of_order_pushes_pop_as_one_heap() {
        // Times from a fixed LCG, some in order (the tail), most not (the heap).
        let mut q = EventQueue::default();
        let mut want = Vec::new();
        let mut x: u64 = 7;
        for i in 0..2_000u64 {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let at = if i % 3 == 0 {
                i * 10
            } else {
                (x >> 33) % 20_000
            };
            if i % 7 == 0 {
                q.push_late(at, i, i);
                want.push((at, 1, i, i));
            } else {
                q.push(at, i);
                want.push((at, 0, i, i));
            }
        }
        want.sort();
        let got: Vec<_> = std::iter::from_fn(|| q.pop()).collect();
        let want: Vec<_> = want.into_iter().map(|(at, _, _, e)| (at, e)).collect();
        assert_eq!(got, want);
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

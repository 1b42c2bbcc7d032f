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

/// In-order lanes beside the heap. Each kind of event a run schedules at a fixed
/// distance (arrivals, creates done after a constant latency, deletes after a constant
/// lifetime, samples, syncs) keeps one lane in order; a few more absorb the stragglers.
const LANES: usize = 8;

struct Entry<E> {
    at: Nanos,
    /// `seq` for an ordinary event, `LATE | key` for a late one: one word, so that an
    /// entry stays small (a large run holds ~10^5 pending events).
    rank: u64,
    event: E,
}

impl<E> Entry<E> {
    fn key(&self) -> (Nanos, u64) {
        (self.at, self.rank)
    }
}

impl<E> PartialEq for Entry<E> {
    fn eq(&self, other: &Self) -> bool {
        self.key() == other.key()
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
        other.key().cmp(&self.key())
    }
}

/// Pending events in firing order.
///
/// Most events arrive in order within their kind: a run schedules each delete a
/// lifetime after its create, each sample an interval after the last. An event goes to
/// the back of the lane whose last event is the latest one still before it (patience
/// sorting), or to an empty lane, and only when neither exists into the heap. A large
/// run holds ~10^5 pending deletes: in one heap, with one far-off sync ahead of them in
/// a single in-order tail, every pop sifted through them (a cache miss per level).
/// `pop` takes the earliest of the heap's top and the lanes' fronts, so the order is
/// the heap's alone.
pub struct EventQueue<E> {
    heap: BinaryHeap<Entry<E>>,
    /// Each sorted by `(at, rank)`, earliest first.
    lanes: [VecDeque<Entry<E>>; LANES],
    next_seq: u64,
}

impl<E> Default for EventQueue<E> {
    fn default() -> Self {
        Self {
            heap: BinaryHeap::new(),
            lanes: std::array::from_fn(|_| VecDeque::new()),
            next_seq: 0,
        }
    }
}

/// Where the earliest pending event is.
#[derive(Clone, Copy)]
enum Front {
    Heap,
    Lane(usize),
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
        let key = e.key();
        let mut best: Option<(usize, (Nanos, u64))> = None;
        let mut empty = None;
        for (i, lane) in self.lanes.iter().enumerate() {
            match lane.back() {
                Some(last) => {
                    let k = last.key();
                    if k < key && best.is_none_or(|(_, b)| k > b) {
                        best = Some((i, k));
                    }
                }
                None => {
                    if empty.is_none() {
                        empty = Some(i);
                    }
                }
            }
        }
        match best.map(|(i, _)| i).or(empty) {
            Some(i) => self.lanes[i].push_back(e),
            None => self.heap.push(e),
        }
    }

    /// The earliest event and its time.
    pub fn pop(&mut self) -> Option<(Nanos, E)> {
        let mut front = None;
        let mut min = self.heap.peek().map(Entry::key);
        if min.is_some() {
            front = Some(Front::Heap);
        }
        for (i, lane) in self.lanes.iter().enumerate() {
            if let Some(first) = lane.front() {
                let k = first.key();
                if min.is_none_or(|m| k < m) {
                    min = Some(k);
                    front = Some(Front::Lane(i));
                }
            }
        }
        let e = match front? {
            Front::Heap => self.heap.pop(),
            Front::Lane(i) => self.lanes[i].pop_front(),
        };
        e.map(|e| (e.at, e.event))
    }

    /// Events pending.
    pub fn len(&self) -> usize {
        self.heap.len() + self.lanes.iter().map(VecDeque::len).sum::<usize>()
    }

    /// Whether nothing is pending.
    pub fn is_empty(&self) -> bool {
        self.heap.is_empty() && self.lanes.iter().all(VecDeque::is_empty)
    }

    /// Events waiting in the heap rather than in a lane (for tests and benches).
    pub fn in_heap(&self) -> usize {
        self.heap.len()
    }
}

#[cfg(test)]
mod tests {
    use std::cmp::Reverse;
    use std::collections::BinaryHeap;

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

    /// A reference queue: every event in one binary heap, earliest `(at, rank)` first.
    #[derive(Default)]
    struct Reference(BinaryHeap<Reverse<(u64, u64, u64)>>);

    impl Reference {
        fn pop(&mut self) -> Option<(u64, u64)> {
            self.0.pop().map(|Reverse((at, _, e))| (at, e))
        }
    }

    #[test]
    fn interleaved_pushes_and_pops_keep_the_heap_order() {
        // An engine's pattern: each popped event schedules a few at fixed distances
        // (lanes) and some at random ones (the heap), late ones included, with ties.
        // More kinds than lanes, so that the heap takes the overflow.
        let mut q = EventQueue::default();
        let mut reference = Reference::default();
        let (mut seq, mut x, mut id) = (0u64, 11u64, 0u64);
        let mut push = |q: &mut EventQueue<u64>, r: &mut Reference, at: u64, late: Option<u64>| {
            id += 1;
            match late {
                Some(key) => {
                    q.push_late(at, key, id);
                    r.0.push(Reverse((at, super::LATE | key, id)));
                }
                None => {
                    q.push(at, id);
                    r.0.push(Reverse((at, seq, id)));
                    seq += 1;
                }
            }
        };
        push(&mut q, &mut reference, 0, None);
        let mut popped = 0;
        while let Some((now, e)) = q.pop() {
            assert_eq!(Some((now, e)), reference.pop(), "event {popped}");
            popped += 1;
            if popped > 3_000 {
                continue;
            }
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let r = x >> 33;
            for (k, d) in [5u64, 40, 40, 300, 1_000, 7, 13, 2_000, 17, 90, 0]
                .into_iter()
                .enumerate()
            {
                if (r >> k) % 3 == 0 {
                    push(&mut q, &mut reference, now + d, None);
                }
            }
            if r % 5 == 0 {
                push(&mut q, &mut reference, now + (r >> 20) % 500, None);
            }
            if r % 7 == 0 {
                push(&mut q, &mut reference, now + (r >> 24) % 50, Some(e));
            }
        }
        assert!(reference.0.is_empty());
        assert!(popped > 3_000);
    }

    #[test]
    fn a_far_event_ahead_does_not_push_in_order_ones_into_the_heap() {
        // A sync 20 s ahead, then a delete 5 s after each of 1,000 creates: the deletes
        // keep a lane of their own (in one in-order tail, each went into the heap).
        let mut q = EventQueue::default();
        q.push(20_000, "sync");
        for t in 0..1_000u64 {
            q.push(t + 5_000, "delete");
            q.push(t + 1, "create done");
        }
        assert_eq!(q.in_heap(), 0);
        assert_eq!(q.len(), 2_001);
        let order: Vec<_> = std::iter::from_fn(|| q.pop()).collect();
        assert_eq!(order.len(), 2_001);
        assert!(order.windows(2).all(|w| w[0].0 <= w[1].0));
        assert_eq!(order.last(), Some(&(20_000, "sync")));
    }
}

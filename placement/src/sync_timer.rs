//! When a placement instance syncs its nodes: the periodic cadence as a timer the
//! instance asks for (as quinn-proto's `poll_timeout`), so that a driver only keeps
//! time. The service sleeps until [`SyncTimer::poll_timeout`]; the simulator queues an
//! event there; both call [`SyncTimer::handle_timeout`] when it comes and sync every
//! node when it says so.
//!
//! Time is the driver's clock (a duration since its own origin): no wall clock here.

use std::time::Duration;

/// The shortest interval a timer keeps (a profile refuses shorter ones): at zero a
/// driver would sync without end.
pub const MIN_SYNC_INTERVAL: Duration = Duration::from_millis(1);

/// The periodic sync of one placement instance: due at [`poll_timeout`](Self::poll_timeout),
/// then every interval after it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SyncTimer {
    interval: Duration,
    next: Duration,
}

impl SyncTimer {
    /// A sync at `first`, then every `interval` (at least [`MIN_SYNC_INTERVAL`]).
    pub fn new(interval: Duration, first: Duration) -> Self {
        SyncTimer {
            interval: interval.max(MIN_SYNC_INTERVAL),
            next: first,
        }
    }

    /// The interval between two syncs.
    pub fn interval(&self) -> Duration {
        self.interval
    }

    /// When the next sync is due.
    pub fn poll_timeout(&self) -> Duration {
        self.next
    }

    /// The next sync comes at `first` instead, then every interval after it (a harness
    /// aligns the syncs with its workload's gate).
    pub fn reset(&mut self, first: Duration) {
        self.next = first;
    }

    /// The driver's clock reads `now`: whether a sync is due. A due sync moves the timer
    /// one interval on; a driver that fell a whole interval behind resumes one interval
    /// after `now` rather than syncing back to back.
    pub fn handle_timeout(&mut self, now: Duration) -> bool {
        if now < self.next {
            return false;
        }
        let after = self.next.saturating_add(self.interval);
        self.next = if now >= after {
            now.saturating_add(self.interval)
        } else {
            after
        };
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn a_timer_fires_once_per_interval_from_its_first_sync() {
        let mut t = SyncTimer::new(100 * MS, 30 * MS);
        assert!(!t.handle_timeout(29 * MS));
        assert!(t.handle_timeout(30 * MS));
        assert_eq!(t.poll_timeout(), 130 * MS);
        assert!(!t.handle_timeout(129 * MS));
        // A little late: the cadence holds.
        assert!(t.handle_timeout(135 * MS));
        assert_eq!(t.poll_timeout(), 230 * MS);
    }

    #[test]
    fn a_driver_an_interval_behind_does_not_sync_back_to_back() {
        let mut t = SyncTimer::new(100 * MS, 100 * MS);
        assert!(t.handle_timeout(450 * MS));
        assert_eq!(t.poll_timeout(), 550 * MS);
        assert!(!t.handle_timeout(450 * MS));
    }

    #[test]
    fn a_zero_interval_still_moves_on() {
        let mut t = SyncTimer::new(Duration::ZERO, Duration::ZERO);
        assert!(t.handle_timeout(Duration::ZERO));
        assert_eq!(t.poll_timeout(), MIN_SYNC_INTERVAL);
    }

    #[test]
    fn reset_moves_the_next_sync() {
        let mut t = SyncTimer::new(100 * MS, 100 * MS);
        t.reset(40 * MS);
        assert!(t.handle_timeout(40 * MS));
        assert_eq!(t.poll_timeout(), 140 * MS);
    }
}

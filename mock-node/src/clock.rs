//! The fleet's clock: monotonic offsets for the model, wall time for the wire.

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use stampede_proto::prost_types;

/// Fleet start, both monotonic and wall-clock, so that model offsets and protobuf
/// timestamps convert into each other.
#[derive(Debug, Clone, Copy)]
pub struct FleetClock {
    start: Instant,
    epoch: SystemTime,
}

impl FleetClock {
    /// A clock whose zero is now.
    pub fn start_now() -> Self {
        Self {
            start: Instant::now(),
            epoch: SystemTime::now(),
        }
    }

    /// Time since fleet start.
    pub fn now(&self) -> Duration {
        self.start.elapsed()
    }

    /// Wall time of a model offset; `None` past what `SystemTime` can hold.
    pub fn wall(&self, offset: Duration) -> Option<SystemTime> {
        self.epoch.checked_add(offset)
    }

    /// Model offset of a wall time (times before fleet start map to zero).
    pub fn offset_of(&self, t: SystemTime) -> Duration {
        t.duration_since(self.epoch).unwrap_or(Duration::ZERO)
    }

    /// Protobuf timestamp of a model offset (saturating at the largest timestamp).
    pub fn timestamp(&self, offset: Duration) -> prost_types::Timestamp {
        let d = self
            .epoch
            .duration_since(UNIX_EPOCH)
            .unwrap_or(Duration::ZERO)
            .saturating_add(offset);
        prost_types::Timestamp {
            seconds: i64::try_from(d.as_secs()).unwrap_or(i64::MAX),
            nanos: i32::try_from(d.subsec_nanos()).unwrap_or(0),
        }
    }

    /// Model offset of a protobuf timestamp; `None` for an absent or zero timestamp
    /// (E2B leaves `end_time` unset for sandboxes that never expire). A time past what
    /// `SystemTime` can hold maps to `Duration::MAX`.
    pub fn offset_of_timestamp(&self, ts: Option<&prost_types::Timestamp>) -> Option<Duration> {
        let ts = ts?;
        if ts.seconds <= 0 && ts.nanos <= 0 {
            return None;
        }
        let secs = u64::try_from(ts.seconds).unwrap_or(0);
        let nanos = u32::try_from(ts.nanos).unwrap_or(0).min(999_999_999);
        let t = UNIX_EPOCH.checked_add(Duration::new(secs, nanos));
        Some(t.map_or(Duration::MAX, |t| self.offset_of(t)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamp_of_a_huge_offset_saturates_instead_of_panicking() {
        let c = FleetClock::start_now();
        assert_eq!(c.timestamp(Duration::MAX).seconds, i64::MAX);
        assert_eq!(c.wall(Duration::MAX), None);
        let far = prost_types::Timestamp {
            seconds: i64::MAX,
            nanos: i32::MAX,
        };
        let off = c.offset_of_timestamp(Some(&far)).expect("given");
        assert_eq!(c.timestamp(off).seconds, i64::MAX, "round trip");
    }
}

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

    /// Wall time of a model offset.
    pub fn wall(&self, offset: Duration) -> SystemTime {
        self.epoch + offset
    }

    /// Model offset of a wall time (times before fleet start map to zero).
    pub fn offset_of(&self, t: SystemTime) -> Duration {
        t.duration_since(self.epoch).unwrap_or(Duration::ZERO)
    }

    /// Protobuf timestamp of a model offset.
    pub fn timestamp(&self, offset: Duration) -> prost_types::Timestamp {
        let d = self
            .wall(offset)
            .duration_since(UNIX_EPOCH)
            .unwrap_or(Duration::ZERO);
        prost_types::Timestamp {
            seconds: i64::try_from(d.as_secs()).unwrap_or(i64::MAX),
            nanos: i32::try_from(d.subsec_nanos()).unwrap_or(0),
        }
    }

    /// Model offset of a protobuf timestamp; `None` for an absent or zero timestamp
    /// (E2B leaves `end_time` unset for sandboxes that never expire).
    pub fn offset_of_timestamp(&self, ts: Option<&prost_types::Timestamp>) -> Option<Duration> {
        let ts = ts?;
        if ts.seconds <= 0 && ts.nanos <= 0 {
            return None;
        }
        let secs = u64::try_from(ts.seconds).unwrap_or(0);
        let nanos = u32::try_from(ts.nanos).unwrap_or(0).min(999_999_999);
        Some(self.offset_of(UNIX_EPOCH + Duration::new(secs, nanos)))
    }
}

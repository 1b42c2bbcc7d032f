//! Per-sandbox usage for the metrics routes: a stated model, since a mock node runs
//! nothing.
//!
//! E2B's API reads these series from its metrics store (ClickHouse), where envd's
//! samples of the sandbox's guest (CPU%, memory, page cache, disk) land. stampede has
//! no guest: a running sandbox gets one sample every [`SAMPLE_PERIOD`] from its start,
//! its `cpuCount` and `memTotal` its vCPU and memory, its CPU% and memory in use drawn
//! from a generator seeded by the service seed, the sandbox id and the sample's index
//! (so a sample reads the same every time it is asked for), and disk 0 as the
//! sandboxes' `diskSizeMB` is 0. A paused sandbox has no series here.

use std::time::{Duration, SystemTime};

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};

use super::state::SandboxRecord;

/// Period of the modelled samples: 5 s (an assumption of stampede's, not E2B's figure).
pub(crate) const SAMPLE_PERIOD: Duration = Duration::from_secs(5);

/// Most samples one answer carries (the latest ones).
pub(crate) const MAX_SAMPLES: usize = 1000;

/// E2B's `SandboxMetric`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct SandboxMetric {
    /// RFC 3339 time of the sample (deprecated upstream, still sent).
    pub timestamp: String,
    /// Unix seconds of the sample.
    pub timestamp_unix: i64,
    /// vCPU of the sandbox.
    pub cpu_count: u32,
    /// CPU in use, percent of the sandbox's vCPU.
    pub cpu_used_pct: f32,
    /// Memory in use, bytes.
    pub mem_used: u64,
    /// Memory of the sandbox, bytes.
    pub mem_total: u64,
    /// Page cache, bytes.
    pub mem_cache: u64,
    /// Disk in use, bytes (0: no disk modelled).
    pub disk_used: u64,
    /// Disk size, bytes (0: no disk modelled).
    pub disk_total: u64,
}

/// The samples of `id` whose time lies in `[from, to]` (Unix seconds; absent = the
/// sandbox's start / now), at most [`MAX_SAMPLES`], oldest first.
pub(crate) fn samples(
    seed: u64,
    id: &str,
    r: &SandboxRecord,
    now: SystemTime,
    from: Option<u64>,
    to: Option<u64>,
) -> Vec<SandboxMetric> {
    let start = unix_secs(r.started_at);
    let last = unix_secs(now.min(r.end_at));
    let lo = from.map_or(start, |f| f.max(start));
    let hi = to.map_or(last, |t| t.min(last));
    if hi < lo {
        return Vec::new();
    }
    let period = SAMPLE_PERIOD.as_secs();
    let first_k = (lo - start).div_ceil(period);
    let last_k = (hi - start) / period;
    let from_k = last_k.saturating_sub(MAX_SAMPLES as u64 - 1).max(first_k);
    (from_k..=last_k)
        .map(|k| sample(seed, id, r, start + k * period, k))
        .collect()
}

/// The latest sample of `id` at `now`, if it has one.
pub(crate) fn latest(
    seed: u64,
    id: &str,
    r: &SandboxRecord,
    now: SystemTime,
) -> Option<SandboxMetric> {
    let t = unix_secs(now);
    samples(
        seed,
        id,
        r,
        now,
        Some(t.saturating_sub(SAMPLE_PERIOD.as_secs())),
        None,
    )
    .pop()
}

fn sample(seed: u64, id: &str, r: &SandboxRecord, at: u64, k: u64) -> SandboxMetric {
    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ fnv1a(id).rotate_left(17) ^ k);
    let mem_total = u64::from(r.ram_mb) << 20;
    let mem_used = (mem_total as f64 * rng.random_range(0.2..0.6)) as u64;
    let at_time = SystemTime::UNIX_EPOCH + Duration::from_secs(at);
    SandboxMetric {
        timestamp: humantime::format_rfc3339_seconds(at_time).to_string(),
        timestamp_unix: i64::try_from(at).unwrap_or(i64::MAX),
        cpu_count: r.vcpu,
        cpu_used_pct: rng.random_range(0.0..100.0),
        mem_used,
        mem_total,
        mem_cache: mem_used / 4,
        disk_used: 0,
        disk_total: 0,
    }
}

fn unix_secs(t: SystemTime) -> u64 {
    t.duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

fn fnv1a(s: &str) -> u64 {
    s.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

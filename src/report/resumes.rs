//! [`ResumeFigures`]: what the resumes of a run with a lifecycle did, computed the same
//! way from a real run's ledger and from a simulated run's calls.

use serde::{Deserialize, Serialize};

use super::stats::LatencySummary;

/// The resumes (and connects of a paused sandbox) of a run with a lifecycle.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ResumeFigures {
    /// Resumes sent.
    pub requests: u64,
    /// Resumes answered 201.
    pub placed: u64,
    /// Resumes placed on another node than the one the sandbox was paused on: its
    /// origin refused (a starting-slot wait that ran out, a full node) or could not
    /// accept.
    pub moved: u64,
    /// Resumes not answered 201.
    pub failed: u64,
    /// Resume latency, send to answer: a wait for a starting slot shows here.
    pub latency: LatencySummary,
}

/// One resume as the figures read it.
#[derive(Debug, Clone, Copy)]
pub struct ResumeCall {
    /// Send to answer, microseconds.
    pub latency_us: u64,
    /// Whether it was answered 201.
    pub placed: bool,
    /// Whether it landed on another node than its origin (placed ones only).
    pub moved: bool,
}

impl ResumeFigures {
    /// The figures of `calls`; `None` when there are none.
    pub fn from_calls(calls: impl IntoIterator<Item = ResumeCall>) -> Option<Self> {
        let mut h = hdrhistogram::Histogram::<u64>::new_with_bounds(1, 3_600_000_000, 3)
            .expect("static histogram bounds are valid");
        let mut f = ResumeFigures::default();
        for c in calls {
            f.requests += 1;
            if c.placed {
                f.placed += 1;
                f.moved += u64::from(c.moved);
            } else {
                f.failed += 1;
            }
            h.saturating_record(c.latency_us.max(1));
        }
        (f.requests > 0).then(|| ResumeFigures {
            latency: LatencySummary::from_histogram(&h),
            ..f
        })
    }
}

/// The figures as `(name, value)` in report order, for the Markdown and terminal
/// summaries (one list, so the two cannot drift).
pub fn resume_cells(f: &ResumeFigures) -> [(&'static str, String); 8] {
    use super::format::ms;
    let l = &f.latency;
    [
        ("sent", f.requests.to_string()),
        ("placed", f.placed.to_string()),
        ("moved off origin", f.moved.to_string()),
        ("failed", f.failed.to_string()),
        ("p50", ms(l.p50_ms)),
        ("p90", ms(l.p90_ms)),
        ("p99", ms(l.p99_ms)),
        ("max", ms(l.max_ms)),
    ]
}

//! Placement counters by kind (`create`, `resume`, `fork`): placed, failed, refused,
//! the starting-slot waits that ran out, and how long a placement took, as Prometheus
//! text. A resume's wait for a starting slot on its origin (E2B's `acquireTimeout`)
//! shows in its placement time and, when it runs out, in `wait_refusals`.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::Duration;

use stampede_http_kit::{write_header, write_sample};
use stampede_placement::PlacementKind;

/// Every kind, in the order the counters keep them.
const KINDS: [PlacementKind; 3] = [
    PlacementKind::Create,
    PlacementKind::Resume,
    PlacementKind::Fork,
];

/// Upper bounds (seconds) of the placement-time buckets: from a quick create up to a
/// resume that waited out the 15 s acquire timeout and was placed elsewhere, and past.
const SECONDS_BUCKETS: [f64; 10] = [0.01, 0.05, 0.1, 0.5, 1.0, 2.0, 5.0, 15.0, 30.0, 70.0];

fn index(kind: PlacementKind) -> usize {
    match kind {
        PlacementKind::Create => 0,
        PlacementKind::Resume => 1,
        PlacementKind::Fork => 2,
    }
}

/// One kind's counters; all monotonic.
#[derive(Debug, Default)]
struct OfKind {
    placed: AtomicU64,
    failed: AtomicU64,
    refusals: AtomicU64,
    wait_refusals: AtomicU64,
    seconds_sum_nanos: AtomicU64,
    buckets: [AtomicU64; SECONDS_BUCKETS.len()],
}

/// Placement counters by kind.
#[derive(Debug, Default)]
pub(crate) struct KindTelemetry {
    kinds: [OfKind; 3],
}

impl KindTelemetry {
    /// A placement of `kind` ended after `took`, placed or not.
    pub(crate) fn ended(&self, kind: PlacementKind, placed: bool, took: Duration) {
        let k = &self.kinds[index(kind)];
        if placed { &k.placed } else { &k.failed }.fetch_add(1, Relaxed);
        let nanos = u64::try_from(took.as_nanos()).unwrap_or(u64::MAX);
        k.seconds_sum_nanos.fetch_add(nanos, Relaxed);
        let secs = took.as_secs_f64();
        for (b, &le) in k.buckets.iter().zip(&SECONDS_BUCKETS) {
            if secs <= le {
                b.fetch_add(1, Relaxed);
            }
        }
    }

    /// A Create of `kind` was refused with ResourceExhausted; `waited`: after its wait
    /// for a starting slot ran out (a Create from a snapshot).
    pub(crate) fn refused(&self, kind: PlacementKind, waited: bool) {
        let k = &self.kinds[index(kind)];
        k.refusals.fetch_add(1, Relaxed);
        if waited {
            k.wait_refusals.fetch_add(1, Relaxed);
        }
    }

    /// Appends every series, labelled with `accounting` and the kind.
    pub(crate) fn render(&self, out: &mut String, accounting: &str) {
        type Pick = fn(&OfKind) -> &AtomicU64;
        let counters: [(&str, &str, Pick); 4] = [
            (
                "stampede_serve_placements_placed_total",
                "Placements answered 201, by kind.",
                |k| &k.placed,
            ),
            (
                "stampede_serve_placements_failed_total",
                "Placements answered an error, by kind.",
                |k| &k.failed,
            ),
            (
                "stampede_serve_placement_refusals_total",
                "Create RPCs refused with ResourceExhausted, by kind.",
                |k| &k.refusals,
            ),
            (
                "stampede_serve_placement_wait_refusals_total",
                "Creates from a snapshot refused once their wait for a starting slot ran out, by kind.",
                |k| &k.wait_refusals,
            ),
        ];
        for (name, help, pick) in counters {
            write_header(out, name, "counter", help);
            for (kind, k) in KINDS.iter().zip(&self.kinds) {
                let labels = [("accounting", accounting), ("kind", kind.as_str())];
                write_sample(out, name, &labels, pick(k).load(Relaxed));
            }
        }
        let name = "stampede_serve_placement_seconds";
        write_header(
            out,
            name,
            "histogram",
            "Time from a placement's request to its answer, by kind (a resume's starting-slot wait included).",
        );
        let bucket = format!("{name}_bucket");
        for (kind, k) in KINDS.iter().zip(&self.kinds) {
            let kind = kind.as_str();
            for (b, le) in k.buckets.iter().zip(SECONDS_BUCKETS) {
                let le = le.to_string();
                let labels = [
                    ("accounting", accounting),
                    ("kind", kind),
                    ("le", le.as_str()),
                ];
                write_sample(out, &bucket, &labels, b.load(Relaxed));
            }
            let n = k.placed.load(Relaxed) + k.failed.load(Relaxed);
            let by = [("accounting", accounting), ("kind", kind)];
            let inf = [("accounting", accounting), ("kind", kind), ("le", "+Inf")];
            write_sample(out, &bucket, &inf, n);
            let sum = k.seconds_sum_nanos.load(Relaxed) as f64 / 1e9;
            write_sample(out, &format!("{name}_sum"), &by, sum);
            write_sample(out, &format!("{name}_count"), &by, n);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_resume_is_counted_under_its_kind() {
        let t = KindTelemetry::default();
        t.ended(PlacementKind::Resume, true, Duration::from_secs(16));
        t.refused(PlacementKind::Resume, true);
        t.ended(PlacementKind::Create, false, Duration::from_millis(3));
        let mut out = String::new();
        t.render(&mut out, "optimistic");
        for line in [
            "stampede_serve_placements_placed_total{accounting=\"optimistic\",kind=\"resume\"} 1",
            "stampede_serve_placements_failed_total{accounting=\"optimistic\",kind=\"create\"} 1",
            "stampede_serve_placement_wait_refusals_total{accounting=\"optimistic\",kind=\"resume\"} 1",
            "stampede_serve_placement_seconds_bucket{accounting=\"optimistic\",kind=\"resume\",le=\"15\"} 0",
            "stampede_serve_placement_seconds_bucket{accounting=\"optimistic\",kind=\"resume\",le=\"30\"} 1",
        ] {
            assert!(out.contains(line), "{line} missing from\n{out}");
        }
    }
}

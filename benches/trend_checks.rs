//! `stampede trend`'s cost in checks: ten reports of 50,000 checks each (a run label and
//! a check name per check, as a profile with many runs and checks writes them), read,
//! folded into series and written as Markdown and HTML, against a baseline measured in
//! the same run: reading and parsing the same ten files and nothing else (what any
//! trend costs before it looks at a check). The figure is the ratio of the two medians.
//!
//! `cargo bench --bench trend_checks` (`TREND_BENCH_CHECKS=N` for another count).

use std::hint::black_box;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use stampede::profile::{parse, Source};
use stampede::report::{
    read_reports, trend, write_json, write_trend_html, write_trend_markdown, CheckOutcome,
};
use stampede::sim::simulate_profile;

/// Reports in the trend (its default window is larger; ten is a nightly's fortnight).
const REPORTS: usize = 10;

/// Timed rounds of each side; the medians are compared.
const ROUNDS: usize = 5;

const PROFILE: &str = "name: trend-bench
seed: 1
cluster:
  nodes: 4
  node: {cpu_count: 64, max_starting: 0}
placement:
  embedded:
    accounting: optimistic
workload:
  shape:
    burst: {count: 50}
";

fn checks() -> usize {
    std::env::var("TREND_BENCH_CHECKS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(50_000)
}

/// Ten report files of `n` checks each in a fresh folder (removed by the caller).
fn write_reports(n: usize) -> (PathBuf, Vec<PathBuf>) {
    let profile = parse(&Source::inline("trend-bench.yaml", PROFILE.to_string()))
        .expect("bench profile parses");
    let base = simulate_profile(&profile).expect("simulates");
    let dir = std::env::temp_dir().join(format!("stampede-trend-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("bench folder");
    let mut paths = Vec::with_capacity(REPORTS);
    for r in 0..REPORTS {
        let mut report = base.clone();
        report.checks = (0..n)
            .map(|k| CheckOutcome {
                run: format!("run-{}", k % 50),
                check: format!("check-{k}"),
                bound: "<= 1".into(),
                actual: Some(((k + r) % 7) as f64 / 7.0),
                passed: true,
                message: String::new(),
            })
            .collect();
        let path = dir.join(format!("report-{r}.json"));
        let file = std::fs::File::create(&path).expect("report file");
        write_json(&report, std::io::BufWriter::new(file)).expect("report written");
        paths.push(path);
    }
    (dir, paths)
}

fn median(mut xs: Vec<Duration>) -> Duration {
    xs.sort();
    xs[xs.len() / 2]
}

fn main() {
    let n = checks();
    let (dir, paths) = write_reports(n);
    let mut bare = Vec::with_capacity(ROUNDS);
    let mut whole = Vec::with_capacity(ROUNDS);
    for _ in 0..ROUNDS {
        let t0 = Instant::now();
        black_box(read_reports(&paths).expect("reports read"));
        bare.push(t0.elapsed());
        let t0 = Instant::now();
        let reports = read_reports(&paths).expect("reports read");
        let series = trend(&reports, REPORTS);
        let (mut md, mut html) = (Vec::new(), Vec::new());
        write_trend_markdown(&series, reports.len(), &mut md).expect("markdown");
        write_trend_html(&series, reports.len(), &mut html).expect("html");
        black_box((md.len(), html.len()));
        whole.push(t0.elapsed());
    }
    std::fs::remove_dir_all(&dir).ok();
    let (bare, whole) = (median(bare), median(whole));
    println!(
        "trend of {REPORTS} reports x {n} checks: read+parse {:.1} ms, whole trend {:.1} ms, \
         ratio {:.2}",
        bare.as_secs_f64() * 1e3,
        whole.as_secs_f64() * 1e3,
        whole.as_secs_f64() / bare.as_secs_f64()
    );
}

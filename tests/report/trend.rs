//! `stampede trend`: each check's figure over the last runs, charted with its bound.

use crate::support::report as report_support;

use stampede::profile::Checks;
use stampede::report::*;

/// A nightly-like report started at second `i`, its running CV `cv` and p99 `p99_ms`.
fn nightly(i: u32, cv: f64, p99_ms: f64) -> Report {
    let mut r = Report::new("nightly", "", 7, &format!("2026-12-0{}T02:00:00Z", i + 1));
    let mut run = report_support::run("optimistic", "optimistic", &[0, 0, 0]);
    run.latency.p99_ms = p99_ms;
    run.skew_over_time = Some(SkewOverTime {
        placements: SkewStats::from_counts(&[100, 98, 102]),
        running_cv_mean: cv,
        running_cv_peak: cv * 2.0,
        steady_from_ms: 1000.0,
        steady_to_ms: 9000.0,
        steady_samples: 9,
    });
    r.runs.push(run);
    let checks: Checks = serde_yaml_ng::from_str(
        "running_cv_mean: {max: 0.2}\np99_latency: {max: 5s}\naccounting_error: {max: 3.0}\n",
    )
    .unwrap();
    r.checks = evaluate(&checks, &r);
    r
}

#[test]
fn trend_over_five_reports_charts_every_check_with_its_bound() {
    let dir = crate::support::staging::tempdir("trend");
    // Written newest first: the trend orders them by their start.
    for (i, cv) in [0.05, 0.06, 0.05, 0.34, 0.07].iter().enumerate().rev() {
        let d = dir.join(format!("nightly-{i}"));
        std::fs::create_dir_all(&d).unwrap();
        let mut f = std::fs::File::create(d.join("report.json")).unwrap();
        write_json(&nightly(i as u32, *cv, 1500.0 + i as f64), &mut f).unwrap();
    }
    let reports = read_reports(std::slice::from_ref(&dir)).expect("reports");
    assert_eq!(reports.len(), 5);
    let series = trend(&reports, 30);
    let checks: Vec<&str> = series.iter().map(|s| s.check.as_str()).collect();
    assert_eq!(
        checks,
        ["p99_latency", "running_cv_mean", "accounting_error"]
    );
    let cv = &series[1];
    let values: Vec<Option<f64>> = cv.points.iter().map(|p| p.value).collect();
    assert_eq!(
        values,
        [Some(0.05), Some(0.06), Some(0.05), Some(0.34), Some(0.07)]
    );
    assert_eq!(cv.bound_values, [0.2]);
    assert_eq!(cv.points.iter().filter(|p| !p.passed).count(), 1);
    assert_eq!(series[0].bound_values, [5000.0], "a latency bound in ms");

    let out = dir.join("out");
    let status = std::process::Command::new(env!("CARGO_BIN_EXE_stampede"))
        .arg("trend")
        .arg(&dir)
        .arg("--out")
        .arg(&out)
        .env_remove("GITHUB_STEP_SUMMARY")
        .status()
        .expect("stampede trend runs");
    assert_eq!(status.code(), Some(0));
    let html = std::fs::read_to_string(out.join("trend.html")).unwrap();
    assert_eq!(html.matches("<svg").count(), 3, "a chart per check");
    assert_eq!(
        html.matches(r#"class="bound""#).count(),
        3,
        "a bound per chart"
    );
    assert!(!html.contains("<script"), "script-free");
    let md = std::fs::read_to_string(out.join("trend.md")).unwrap();
    assert!(
        md.contains("| optimistic | running_cv_mean | ratio | <= 0.2 |"),
        "{md}"
    );
    assert!(md.contains("1 of 5"), "{md}");
    // Runs are labelled by their report's date and name, not numbered.
    assert_eq!(
        html.matches(r#"class="x-tick""#).count(),
        3 * 2 * 5,
        "two label lines per report per chart"
    );
    for day in 1..=5 {
        assert!(html.contains(&format!(">2026-12-0{day}</text>")), "{html}");
        assert!(
            md.contains(&format!("`2026-12-0{day} 02:00 nightly`")),
            "{md}"
        );
    }
    assert!(html.contains(">02:00 nightly</text>"));
    assert!(html.contains("report (date UTC and name, oldest first)"));
    assert!(!html.contains("run (oldest first)"));
    // Deterministic: the same inputs give the same page.
    let again = std::process::Command::new(env!("CARGO_BIN_EXE_stampede"))
        .args(["trend", "--last", "5"])
        .arg(&dir)
        .arg("--out")
        .arg(dir.join("again"))
        .env_remove("GITHUB_STEP_SUMMARY")
        .status()
        .expect("stampede trend runs");
    assert_eq!(again.code(), Some(0));
    assert_eq!(
        std::fs::read_to_string(dir.join("again/trend.html")).unwrap(),
        html
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_truncated_report_is_skipped_not_the_whole_trend() {
    let dir = crate::support::staging::tempdir("trend-truncated");
    for i in 0..3u32 {
        let d = dir.join(format!("nightly-{i}"));
        std::fs::create_dir_all(&d).unwrap();
        let mut bytes = Vec::new();
        write_json(&nightly(i, 0.05, 1500.0), &mut bytes).unwrap();
        if i == 1 {
            bytes.truncate(bytes.len() / 2);
        }
        std::fs::write(d.join("report.json"), bytes).unwrap();
    }
    let (reports, skipped) = read_reports_skipping(std::slice::from_ref(&dir)).expect("reports");
    assert_eq!(reports.len(), 2);
    assert_eq!(skipped.len(), 1);
    let why = skipped[0].to_string();
    assert!(why.contains("nightly-1"), "{why}");
    assert!(read_reports(std::slice::from_ref(&dir)).is_err());
}

#[test]
fn a_report_without_the_figure_counts_as_missing_not_failed() {
    let mut reports: Vec<Report> = (0..3).map(|i| nightly(i, 0.05, 1500.0)).collect();
    reports[1].checks.clear();
    let series = trend(&reports, 30);
    let mut md = Vec::new();
    write_trend_markdown(&series, 3, &mut md).unwrap();
    let md = String::from_utf8(md).unwrap();
    let cv = md
        .lines()
        .find(|l| l.contains("running_cv_mean"))
        .expect("a running_cv_mean row");
    assert!(cv.ends_with("| 0 of 2 (1 missing) |"), "{cv}");
}

#[test]
fn a_missing_figure_is_a_gap_in_the_trend_line_not_bridged() {
    let mut reports: Vec<Report> = (0..5).map(|i| nightly(i, 0.05, 1500.0)).collect();
    reports[2].checks.clear();
    let series = trend(&reports, 30);
    let mut html = Vec::new();
    write_trend_html(&series, 5, &mut html).unwrap();
    let html = String::from_utf8(html).unwrap();
    // Every series lacks run 2: two stretches each, none bridging it.
    assert_eq!(
        html.matches("<polyline").count(),
        2 * series.len(),
        "{html}"
    );
}

/// `stampede trend DIR` as a user runs it: its exit code and stderr.
fn trend_cli(dir: &std::path::Path) -> (Option<i32>, String) {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_stampede"))
        .arg("trend")
        .arg(dir)
        .arg("--out")
        .arg(dir.join("out"))
        .env_remove("GITHUB_STEP_SUMMARY")
        .output()
        .expect("stampede trend runs");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn trend_of_an_empty_folder_or_mixed_profiles_exits_non_zero_and_says_why() {
    let empty = crate::support::staging::tempdir("trend-empty");
    let (code, err) = trend_cli(&empty);
    assert_ne!(code, Some(0), "{err}");
    assert!(err.contains("trend: no readable report.json"), "{err}");

    let mixed = crate::support::staging::tempdir("trend-mixed");
    for (i, profile) in ["nightly", "burst-500"].iter().enumerate() {
        let d = mixed.join(format!("r{i}"));
        std::fs::create_dir_all(&d).unwrap();
        let mut r = nightly(i as u32, 0.05, 1500.0);
        r.profile = (*profile).to_string();
        let mut f = std::fs::File::create(d.join("report.json")).unwrap();
        write_json(&r, &mut f).unwrap();
    }
    let (code, err) = trend_cli(&mixed);
    assert_ne!(code, Some(0), "{err}");
    assert!(
        err.contains("different profiles (burst-500, nightly)"),
        "{err}"
    );

    // A truncated report beside a good one: named, skipped, the trend still written.
    std::fs::remove_dir_all(mixed.join("r1")).unwrap();
    std::fs::create_dir_all(mixed.join("r1")).unwrap();
    std::fs::write(
        mixed.join("r1/report.json"),
        "{\"schema_version\": 1, \"pro",
    )
    .unwrap();
    let (code, err) = trend_cli(&mixed);
    assert_eq!(code, Some(0), "{err}");
    assert!(
        err.contains("trend: skipped") && err.contains("r1"),
        "{err}"
    );
    assert!(mixed.join("out/trend.html").is_file());
    let _ = std::fs::remove_dir_all(&empty);
    let _ = std::fs::remove_dir_all(&mixed);
}

//! What CI reads of a report: `report.schema.json` (current, and real reports fit it),
//! `junit.xml` parsed by a real consumer (PyPI `junitparser`, through
//! `scripts/check-ci-outputs.py`) with a failing check as a failure, and the Markdown
//! summary appended to `GITHUB_STEP_SUMMARY`.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::support::unique;

/// Python with `junitparser` and `jsonschema` (CI installs them into a venv and names
/// it here); without it the consumer half of a test is skipped, except under CI.
const PYTHON_ENV: &str = "STAMPEDE_CI_PYTHON";

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn python() -> Option<PathBuf> {
    match std::env::var_os(PYTHON_ENV) {
        Some(p) => Some(PathBuf::from(p)),
        None => {
            assert!(
                std::env::var_os("CI").is_none(),
                "{PYTHON_ENV} must name a python with junitparser and jsonschema under CI"
            );
            eprintln!("{PYTHON_ENV} not set: the junitparser/jsonschema half is skipped");
            None
        }
    }
}

/// A small simulated run whose `jain` check fails (Jain 1 needs an exactly even spread), the others pass.
const PROFILE: &str =
    "name: ci-outputs\nseed: 3\ncluster:\n  nodes: 4\n  node:\n    cpu_count: 16\n\
placement:\n  embedded:\n    accounting: [reported, optimistic]\n    sync_interval: 1s\n\
workload:\n  shape:\n    rate: {per_second: 20, duration: 2s}\n\
checks:\n  error_rate: {max: 1.0}\n  jain: {min: 1}\n";

/// Simulates `yaml` into a fresh report directory with `GITHUB_STEP_SUMMARY` set;
/// returns (exit code, report dir, summary file).
fn simulate(yaml: &str) -> (Option<i32>, PathBuf, PathBuf) {
    let dir = std::env::temp_dir().join(format!("stampede-ci-outputs-{}", unique()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("temp dir");
    let profile = dir.join("p.yaml");
    std::fs::write(&profile, yaml).expect("profile");
    let summary = dir.join("step-summary.md");
    std::fs::write(&summary, "earlier step\n").expect("summary");
    let out = Command::new(env!("CARGO_BIN_EXE_stampede"))
        .args(["sim", "--report-dir"])
        .arg(dir.join("reports"))
        .arg(&profile)
        .env("GITHUB_STEP_SUMMARY", &summary)
        .output()
        .expect("stampede sim runs");
    let reports: Vec<PathBuf> = std::fs::read_dir(dir.join("reports"))
        .expect("reports")
        .flatten()
        .map(|e| e.path())
        .collect();
    assert_eq!(reports.len(), 1, "{out:?}");
    (out.status.code(), reports[0].clone(), summary)
}

/// The committed `report.schema.json` is what `report::json_schema()` generates; run
/// with `STAMPEDE_UPDATE_SCHEMA=1` to rewrite it after changing the report types.
#[test]
fn committed_report_schema_is_current() {
    let schema = stampede::report::json_schema();
    assert!(schema["properties"]["runs"].is_object());
    let text = format!("{}\n", serde_json::to_string_pretty(&schema).expect("json"));
    let path = root().join("report.schema.json");
    if std::env::var_os("STAMPEDE_UPDATE_SCHEMA").is_some() {
        std::fs::write(&path, &text).expect("write schema");
    }
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        committed == text,
        "report.schema.json is stale: rerun with STAMPEDE_UPDATE_SCHEMA=1"
    );
}

/// A failing check is a JUnit failure carrying the figure and the bound, a passing one
/// a passed case, one case per check per run; the reports (this one and the committed
/// baseline) fit the schema; the summary is appended after what was there.
#[test]
fn junit_and_schema_read_by_real_consumers() {
    let (code, dir, summary) = simulate(PROFILE);
    assert_eq!(code, Some(1), "the jain check fails");
    let md = std::fs::read_to_string(&summary).expect("summary");
    assert!(md.starts_with("earlier step\n"), "{md}");
    assert!(md.contains("**FAILED**") && md.contains("jain"), "{md}");
    let xml = std::fs::read_to_string(dir.join("junit.xml")).expect("junit.xml");
    assert!(xml.contains(r#"failures="2""#), "{xml}");
    let Some(py) = python() else { return };
    let out = Command::new(py)
        .arg(root().join("scripts/check-ci-outputs.py"))
        .arg(root().join("report.schema.json"))
        .arg(&dir)
        .arg(root().join("reports/baselines/nightly.json"))
        .output()
        .expect("python runs");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let cases: Vec<&str> = text.lines().filter(|l| l.starts_with("case ")).collect();
    assert_eq!(cases.len(), 4, "two checks x two runs: {text}");
    for mode in ["reported", "optimistic"] {
        assert!(
            cases.contains(&format!("case {mode} error_rate passed ").as_str()),
            "{text}"
        );
        let jain = cases
            .iter()
            .find(|c| c.starts_with(&format!("case {mode} jain failure ")))
            .unwrap_or_else(|| panic!("no failed jain case of {mode}: {text}"));
        assert!(
            jain.contains("< min 1 ") && jain.contains("(bound >= 1)"),
            "{jain}"
        );
    }
    assert_eq!(text.matches("schema ok").count(), 2, "{text}");
}

/// A profile without checks says so: no PASSED anywhere, exit 0, and JUnit holds no
/// case rather than a green one.
#[test]
fn a_profile_without_checks_says_that_nothing_was_checked() {
    let yaml = PROFILE.split("checks:").next().expect("profile head");
    let (code, dir, summary) = simulate(yaml);
    assert_eq!(code, Some(0));
    let md = std::fs::read_to_string(summary).expect("summary");
    assert!(
        md.contains("NOTHING CHECKED") && !md.contains("PASSED"),
        "{md}"
    );
    let xml = std::fs::read_to_string(dir.join("junit.xml")).expect("junit.xml");
    assert!(
        xml.contains(r#"tests="0""#) && xml.contains("NOTHING CHECKED"),
        "{xml}"
    );
}

/// A run label carrying escapes and table syntax, as a hostile report.json could.
const HOSTILE: &str = "evil|\u{1b}]52;c;eA==\u{7}`x\u{1b}[31m";

/// Cells of one Markdown table row, splitting on `|` not escaped with a backslash.
fn cells(row: &str) -> usize {
    let mut n = 0usize;
    let mut prev = ' ';
    for c in row.chars() {
        if c == '|' && prev != '\\' {
            n += 1;
        }
        prev = c;
    }
    n.saturating_sub(1)
}

#[test]
fn a_hostile_label_reaches_no_terminal_raw_and_keeps_the_summary_table_whole() {
    let (_, report, _) = simulate(PROFILE);
    let json = std::fs::read_to_string(report.join("report.json")).expect("report.json");
    let mut v: serde_json::Value = serde_json::from_str(&json).expect("json");
    for run in v["runs"].as_array_mut().expect("runs") {
        let label = run["label"].as_str().unwrap_or_default().to_string();
        run["label"] = serde_json::Value::String(format!("{label}{HOSTILE}"));
    }
    let dir = report.parent().expect("reports dir").to_path_buf();
    let (a, b) = (dir.join("a.json"), dir.join("b.json"));
    let text = serde_json::to_string(&v).expect("json");
    std::fs::write(&a, &text).expect("a");
    std::fs::write(&b, &text).expect("b");
    let summary = dir.join("compare-summary.md");
    let out = Command::new(env!("CARGO_BIN_EXE_stampede"))
        .arg("compare")
        .arg(&a)
        .arg(&b)
        .env("GITHUB_STEP_SUMMARY", &summary)
        .output()
        .expect("stampede compare runs");
    let printed = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(printed.contains("evil"), "the label is printed: {printed}");
    assert!(
        !printed.contains('\u{1b}') && !printed.contains('\u{7}'),
        "a control character reached the terminal: {printed:?}"
    );
    let md = std::fs::read_to_string(&summary).expect("summary written");
    let rows: Vec<&str> = md.lines().filter(|l| l.starts_with("| ")).collect();
    assert!(rows.iter().any(|r| r.contains("evil")), "{md}");
    for r in &rows {
        assert_eq!(cells(r), 7, "row split or merged: {r}");
        assert!(!r.contains('\u{1b}'), "{r:?}");
    }
}

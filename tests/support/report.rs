//! Reports built by hand for the reporter, checks and compare tests: every figure
//! below is written out, none is computed by the code under test except SkewStats.

#![allow(dead_code)]

use std::collections::BTreeMap;

use stampede::profile::RunSettings;
use stampede::report::*;

/// A run named `label` whose final per-node counts are `counts` (1 vCPU each).
pub fn run(label: &str, mode: &str, counts: &[u64]) -> RunResult {
    let nodes: Vec<NodeFigures> = counts
        .iter()
        .enumerate()
        .map(|(i, &c)| NodeFigures {
            id: format!("node-{i:02}"),
            sandboxes: c,
            allocated_vcpu: c as f64,
            believed_vcpu: Some(c as f64 - 1.0),
        })
        .collect();
    let total: u64 = counts.iter().sum();
    let mut statuses = BTreeMap::new();
    statuses.insert("201".to_string(), total);
    statuses.insert("503".to_string(), 5);
    let settings = RunSettings::from_map(BTreeMap::from([
        ("accounting".to_string(), mode.to_string()),
        ("k".to_string(), "3".to_string()),
    ]));
    RunResult {
        label: label.to_string(),
        settings,
        nodes,
        skew: SkewStats::from_counts(counts),
        skew_over_time: None,
        retry_storm: None,
        accounting_error: Some(AccountingError {
            mean_abs_vcpu: 1.0,
            max_abs_vcpu: 4.5,
            samples: 50,
        }),
        placements_by_kind: BTreeMap::new(),
        resumes: None,
        latency: LatencySummary {
            count: total + 5,
            p50_ms: 1.5,
            p90_ms: 3.0,
            p99_ms: 12.25,
            p999_ms: 40.0,
            max_ms: 41.0,
            mean_ms: 2.0,
        },
        latency_over_time: None,
        statuses,
        requests: total + 5,
        ok: total,
        failed: 5,
        error_rate: 5.0 / (total + 5) as f64,
        retries: 7,
        refusals: 3,
        send: SendTiming {
            burst_spread_ms: None,
            lateness_p50_ms: Some(0.2),
            lateness_p99_ms: Some(1.1),
            lateness_max_ms: Some(2.5),
            ..SendTiming::default()
        },
        timeline: vec![
            TimelinePoint {
                t_ms: 0.0,
                sandboxes: vec![0; counts.len()],
                accounting_error_vcpu: Some(0.0),
                placed: vec![0; counts.len()],
            },
            TimelinePoint {
                t_ms: 1000.0,
                sandboxes: counts.iter().map(|c| c / 2).collect(),
                accounting_error_vcpu: Some(2.0),
                placed: counts.iter().map(|c| c / 2).collect(),
            },
            TimelinePoint {
                t_ms: 2000.0,
                sandboxes: counts.to_vec(),
                accounting_error_vcpu: Some(1.0),
                placed: counts.to_vec(),
            },
        ],
        sync_at_ms: Some(vec![1500.0]),
        faults: Vec::new(),
        set_audit: None,
        wall_ms: 2500.0,
        staging: None,
        not_measured: Vec::new(),
    }
}

/// Two runs on 5 nodes: `reported` herded (300/150/50/0/0), `optimistic` even.
pub fn two_mode_report() -> Report {
    let mut r = Report::new("unit", "Hand-built report.", 42, "2026-11-30T02:00:00Z");
    r.runs
        .push(run("reported", "reported", &[300, 150, 50, 0, 0]));
    r.runs
        .push(run("optimistic", "optimistic", &[100, 101, 99, 100, 100]));
    r
}

/// One run with a chaos fault window and set audit findings.
pub fn chaos_report() -> Report {
    let mut r = Report::new("drill", "", 1, "2026-11-30T02:00:00Z");
    let mut run = run("optimistic", "optimistic", &[10, 0, 12]);
    run.faults.push(FaultWindow {
        id: "f1".into(),
        kind: "kill".into(),
        nodes: vec!["node-01".into()],
        applied_at_ms: 1000.0,
        healed_at_ms: Some(3000.0),
        attempted: 40,
        ok: 36,
        failed: 4,
        placements_to_faulty: 2,
        failed_on_faulty: Some(1),
        in_flight_at_fault: Some(0),
        time_to_avoid_ms: Some(150.0),
        time_to_reuse_ms: None,
        ..FaultWindow::default()
    });
    run.set_audit = Some(SetAudit {
        lost: Finding::from_ids(vec!["sb-9".to_string(), "sb-3".to_string()]),
        orphaned: Finding::from_ids(vec!["sb-x".to_string()]),
        ..Default::default()
    });
    run.send = SendTiming {
        burst_spread_ms: Some(4.2),
        ..Default::default()
    };
    r.runs.push(run);
    r
}

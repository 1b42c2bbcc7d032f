//! Sweeps: the cartesian product runs, the table and CSV have one row per combination,
//! and multi-replica APIs keep a residual herd that one replica does not have.

use std::path::Path;

use stampede::profile::load_and_validate;
use stampede::sim::{
    run_sim_cli, run_sweep, write_sweep_csv, write_sweep_table, SimArgs, SweepAxis,
};

#[test]
fn accounting_by_replicas_shows_the_residual_herd_of_multi_replica_apis() {
    // The replicas' own mechanism (each blind to the others' creates in progress),
    // without the API's times inside a decision, which herd a single replica too.
    let profile = crate::support::api_times::off(
        load_and_validate(Path::new("profiles/e2b-pr2201.yaml")).unwrap(),
    );
    let axes: Vec<SweepAxis> = ["replicas=1,3".parse().unwrap()].to_vec();
    let sweep = run_sweep(&profile, &axes, 3).unwrap();
    // The profile compares K3 and K5, so the sweep runs both, as `run` would.
    assert_eq!(sweep.keys, ["accounting", "k", "replicas"]);
    assert_eq!(sweep.points.len(), 16);
    let mut table = Vec::new();
    write_sweep_table(&sweep, &mut table).unwrap();
    let table = String::from_utf8(table).unwrap();
    println!("{table}");
    assert_eq!(table.lines().count(), 2 + 16);
    let cv = |mode: &str, replicas: &str| {
        sweep
            .points
            .iter()
            .find(|p| p.values == [mode, "3", replicas])
            .map(|p| p.cv.mean)
            .unwrap()
    };
    for mode in ["optimistic", "reconciled"] {
        assert!(
            cv(mode, "3") > 2.0 * cv(mode, "1"),
            "{mode}: 3 replicas CV {} vs 1 replica {}",
            cv(mode, "3"),
            cv(mode, "1")
        );
        assert!(cv(mode, "3") < cv("reported", "3"), "{mode}");
    }
}

#[test]
fn bad_sweep_arguments_are_named() {
    for bad in [
        "k",
        "zz=1",
        "k=0",
        "accounting=fast",
        "sync_interval=soon",
        "k=",
    ] {
        let err = bad.parse::<SweepAxis>().unwrap_err().to_string();
        assert!(err.contains(bad.split('=').next().unwrap()), "{bad}: {err}");
    }
}

#[test]
fn cli_writes_a_simulated_report_and_the_sweep_csv() {
    let out = std::env::temp_dir().join(format!("stampede-sim-test-{}", std::process::id()));
    let csv = out.join("sweep.csv");
    std::fs::create_dir_all(&out).unwrap();
    let args = SimArgs {
        profile: "profiles/nightly.yaml".into(),
        sweep: vec!["k=2,3".into()],
        repeat: 2,
        csv: Some(csv.clone()),
        report_dir: out.clone(),
        ..SimArgs::default()
    };
    let passed = run_sim_cli(args).unwrap();
    assert!(passed, "nightly checks pass in simulation");
    let text = std::fs::read_to_string(&csv).unwrap();
    // header + accounting (1 mode) x k (2 values)
    assert_eq!(text.lines().count(), 1 + 2, "{text}");
    let dir = std::fs::read_dir(&out)
        .unwrap()
        .filter_map(Result::ok)
        .find(|e| e.path().is_dir())
        .unwrap()
        .path();
    let json = std::fs::read_to_string(dir.join("report.json")).unwrap();
    assert!(json.contains("\"simulated\": true"));
    assert!(json.contains("1970-01-01T00:00:00Z"));
    let _ = std::fs::remove_dir_all(&out);
    let mut w = Vec::new();
    let p = load_and_validate(Path::new("profiles/nightly.yaml")).unwrap();
    write_sweep_csv(&run_sweep(&p, &[], 1).unwrap(), &mut w).unwrap();
    assert!(String::from_utf8(w)
        .unwrap()
        .starts_with("accounting,CV_mean"));
}

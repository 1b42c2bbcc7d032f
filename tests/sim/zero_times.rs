//! The API's times inside and after a decision (`commit_lag`, `create_return`,
//! `sync_transit`) are the only way they change a simulated report: set to zero, every
//! shipped profile gives the report.json it gave before they existed, byte for byte
//! (FNV-1a of the bytes, pinned from the simulator as it was without them).

use std::path::Path;
use std::time::Duration;

use stampede::profile::{load_and_validate, PlacementSection};
use stampede::report::write_json;
use stampede::sim::simulate_profile;
use stampede_node_model::config::LatencyDist;

/// report.json of each shipped profile before the three times existed.
const BEFORE: &[(&str, u64)] = &[
    ("burst-500", 0x807119727303ee95),
    ("chaos-flaky", 0x1ae60e13d2807bac),
    ("chaos-hang", 0x796393f203544110),
    ("chaos-node-kill", 0x92dc7d75adb4c0b2),
    ("chaos-restart", 0x1061b8cf12596491),
    ("chaos-slow-create", 0x0c6da0d8b5ade93b),
    ("chaos-stale-heartbeat", 0x88d0c4890bd3c3c9),
    ("e2b-api-alone", 0xb43f84fb960023ba),
    ("e2b-pr2201", 0x2cee9a18785005c8),
    ("e2b-pr2201-frozen", 0xa2696105312b6837),
    ("nightly", 0xb79edb711af1ee3f),
    ("resume-storm", 0x5b87a97ad3faa205),
    ("seed-000-five-node", 0xe01b75ca1013647f),
    ("sim-churn-1000", 0xe60af474cbd4349e),
];

fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

fn zero() -> LatencyDist {
    LatencyDist::Constant {
        value: Duration::ZERO,
    }
}

#[test]
fn shipped_profiles_with_the_times_at_zero_give_the_reports_of_before() {
    let mut changed = Vec::new();
    for &(name, before) in BEFORE {
        let path = format!("profiles/{name}.yaml");
        let mut profile = load_and_validate(Path::new(&path)).expect("shipped profile is valid");
        let PlacementSection::Embedded(e) = &mut profile.placement else {
            panic!("{name}: not embedded");
        };
        e.api_stage.commit_lag = zero();
        e.api_stage.create_return = zero();
        e.api_stage.sync_transit = zero();
        let mut report = simulate_profile(&profile).expect("profile simulates");
        // The pin predates `sync_at_ms`, a record of when the syncs ran (which the
        // simulation does not read back): left out of the bytes compared.
        for run in &mut report.runs {
            assert!(run.sync_at_ms.is_some(), "{name}: syncs recorded");
            run.sync_at_ms = None;
        }
        let mut out = Vec::new();
        write_json(&report, &mut out).expect("json");
        let now = fnv1a(&out);
        if now != before {
            changed.push(format!("{name}: {now:#018x}"));
        }
    }
    assert!(changed.is_empty(), "reports changed: {changed:?}");
}

#[test]
fn shipped_profiles_with_the_measured_times_change_through_them() {
    // The defaults are on: the same profile simulates differently.
    let profile = load_and_validate(Path::new("profiles/seed-000-five-node.yaml")).unwrap();
    let report = simulate_profile(&profile).expect("profile simulates");
    let mut out = Vec::new();
    write_json(&report, &mut out).expect("json");
    let before = BEFORE
        .iter()
        .find(|(n, _)| *n == "seed-000-five-node")
        .unwrap()
        .1;
    assert_ne!(fnv1a(&out), before);
}

//! The simulator is bit-for-bit reproducible: same profile and seed, same report.json.

use std::path::Path;

use stampede::profile::load_and_validate;
use stampede::report::write_json;
use stampede::sim::simulate_profile;

fn report_json(path: &str) -> Vec<u8> {
    let profile = load_and_validate(Path::new(path)).expect("shipped profile is valid");
    let report = simulate_profile(&profile).expect("profile simulates");
    assert!(report.simulated);
    let mut out = Vec::new();
    write_json(&report, &mut out).expect("json");
    out
}

#[test]
fn same_profile_and_seed_give_byte_identical_report_json() {
    for p in ["profiles/e2b-pr2201.yaml", "profiles/burst-500.yaml"] {
        let a = report_json(p);
        let b = report_json(p);
        assert!(a.len() > 1000, "{p}: report too small");
        assert!(a == b, "{p}: two simulations differ");
    }
}

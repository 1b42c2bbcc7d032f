//! burst-500 checks the herd itself: its skew bounds (from the faithful simulator over
//! 200 seeds, profiles/burst-500.yaml) pass under `optimistic` and `reconciled` and fail
//! under `reported` and, with the decisions spread by the measured API stage, under
//! `in-flight`.

use std::path::Path;

use stampede::profile::load_and_validate;
use stampede::sim::simulate_profile;

#[test]
fn burst_500_fails_the_herd_on_skew_and_passes_the_even_modes() {
    let profile = load_and_validate(Path::new("profiles/burst-500.yaml")).expect("valid");
    let report = simulate_profile(&profile).expect("simulates");
    let outcome = |run: &str, check: &str| {
        report
            .checks
            .iter()
            .find(|c| c.run == run && c.check == check)
            .map(|c| c.passed)
    };
    for check in ["cv", "max_over_mean"] {
        assert_eq!(outcome("reported", check), Some(false), "{check}");
        assert_eq!(outcome("optimistic", check), Some(true), "{check}");
        assert_eq!(outcome("reconciled", check), Some(true), "{check}");
        assert_eq!(outcome("in-flight", check), Some(false), "{check}");
    }
    assert!(!report.passed);
}

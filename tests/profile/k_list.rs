//! `best_of_k.k` as a list (E2B's BenchmarkPlacementDistribution runs K3 and K5): one
//! run per `k` and accounting mode, labelled by both, with `per_k` checks validated.

use stampede::profile::{parse, validate, PlacementSection, Profile, ProfileIssue, Source};

fn profile(placement: &str, checks: &str) -> (Profile, Source) {
    let text = format!(
        "name: k\ncluster: {{nodes: 6}}\nplacement:\n  embedded:\n{placement}workload:\n  shape: {{burst: {{count: 10}}}}\n{checks}"
    );
    let src = Source::inline("k.yaml", text);
    (parse(&src).expect("parses"), src)
}

fn issues(placement: &str, checks: &str) -> Vec<ProfileIssue> {
    let (p, src) = profile(placement, checks);
    validate(&p, &src)
}

#[test]
fn a_k_list_gives_one_run_per_k_and_mode_in_profile_order() {
    let (p, src) = profile(
        "    accounting: [reported, optimistic]\n    best_of_k: {k: [3, 5]}\n",
        "",
    );
    assert!(validate(&p, &src).is_empty());
    let PlacementSection::Embedded(e) = &p.placement else {
        panic!("embedded")
    };
    let labels: Vec<String> = e.runs().iter().map(|r| r.label()).collect();
    assert_eq!(
        labels,
        [
            "reported K3",
            "optimistic K3",
            "reported K5",
            "optimistic K5"
        ]
    );
    let cfg = e.placement_config(e.runs()[3]);
    assert_eq!((cfg.k, cfg.mode.as_str()), (5, "optimistic"));
    assert_eq!(e.runs()[2].settings().k, Some(5));
}

#[test]
fn one_k_keeps_the_mode_as_the_label() {
    let (p, _) = profile("    accounting: reported\n    best_of_k: {k: 2}\n", "");
    let PlacementSection::Embedded(e) = &p.placement else {
        panic!("embedded")
    };
    let runs = e.runs();
    assert_eq!(runs.len(), 1);
    assert_eq!(runs[0].label(), "reported");
    assert_eq!(runs[0].settings().k, Some(2));
}

#[test]
fn bad_k_lists_name_the_item() {
    let found = issues("    best_of_k: {k: [3, 0, 3, 9]}\n", "");
    let at = |f: &str| {
        found
            .iter()
            .find(|i| i.field == f)
            .unwrap_or_else(|| panic!("no issue at {f}: {found:#?}"))
            .message
            .clone()
    };
    assert_eq!(at("placement.embedded.best_of_k.k[1]"), "must be >= 1");
    assert!(at("placement.embedded.best_of_k.k[2]").contains("listed twice"));
    assert!(at("placement.embedded.best_of_k.k[3]").contains("number of nodes (6)"));
    let empty = issues("    best_of_k: {k: []}\n", "");
    assert!(
        empty
            .iter()
            .any(|i| i.field == "placement.embedded.best_of_k.k"),
        "{empty:#?}"
    );
}

#[test]
fn per_k_checks_must_name_a_k_the_profile_runs() {
    let ok = issues(
        "    best_of_k: {k: [3, 5]}\n",
        "checks:\n  per_k:\n    5: {cv: {max: 1.0}}\n  per_mode:\n    reported:\n      per_k:\n        3: {cv: {min: 0.2}}\n",
    );
    assert!(ok.is_empty(), "{ok:#?}");
    let bad = issues(
        "    best_of_k: {k: [3, 5]}\n",
        "checks:\n  per_k:\n    4: {cv: {max: 1.0}}\n",
    );
    let i = bad
        .iter()
        .find(|i| i.field == "checks.per_k.4")
        .unwrap_or_else(|| panic!("{bad:#?}"));
    assert!(i.message.contains("runs no k = 4"), "{}", i.message);
    assert!(i.line > 0, "located: {i:?}");
    let nested = issues(
        "    best_of_k: {k: [3, 5]}\n",
        "checks:\n  per_k:\n    3:\n      per_k:\n        5: {cv: {max: 1.0}}\n",
    );
    assert!(
        nested.iter().any(|i| i.field == "checks.per_k.3.per_k"),
        "{nested:#?}"
    );
}

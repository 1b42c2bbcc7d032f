//! Hostile profiles: no panic, no hang, no unbounded growth, and `validate`
//! catches what `run` rejects. Each test is named after the finding it pins; each
//! hostile input is checked within a time bound (a worker thread and `recv_timeout`),
//! so a regression shows as a failure, not as a test that never ends.

use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::Duration;

use stampede::chaos::FaultPlan;
use stampede::profile::limits::*;
use stampede::profile::{
    load, load_and_validate, parse, validate, CheckId, PlacementSection, Profile, ProfileError,
    ProfileErrors, ProfileIssue, Source, CHECKS,
};

/// `f()` on a worker thread; fails the test if it takes longer than `limit`.
fn within<T: Send + 'static>(limit: Duration, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    match rx.recv_timeout(limit) {
        Ok(v) => v,
        Err(_) => panic!("took longer than {limit:?}"),
    }
}

/// Parse and validate `text` (named `name`) within 10 s: the located issues, or the
/// parse error as the only issue.
fn issues_of(name: &str, text: &str) -> Vec<ProfileIssue> {
    let src = Source::inline(name, text);
    within(Duration::from_secs(10), move || match parse(&src) {
        Ok(p) => validate(&p, &src),
        Err(ProfileError::Parse(i)) => vec![i],
        Err(e) => panic!("unexpected {e}"),
    })
}

/// The issue at `field`, failing with every issue when there is none.
fn issue_at<'a>(issues: &'a [ProfileIssue], field: &str) -> &'a ProfileIssue {
    issues
        .iter()
        .find(|i| i.field == field)
        .unwrap_or_else(|| panic!("no issue at {field}: {issues:#?}"))
}

const HEAD: &str = "name: hostile\n";

/// A small valid embedded profile with `extra` YAML appended at top level and `edit`
/// applied to its lines (`from`, `to` replacements).
fn profile(edits: &[(&str, &str)]) -> String {
    let mut text = format!(
        "{HEAD}cluster:
  nodes: 10
  node: {{cpu_count: 16}}
placement:
  embedded:
    accounting: optimistic
    best_of_k: {{k: 3, r: 4.0}}
    sync_interval: 2s
workload:
  shape:
    rate: {{per_second: 20, duration: 5s}}
  sandbox: {{vcpu: 1, ram_mb: 512, timeout: 300s}}
collect:
  interval: 1s
"
    );
    for (from, to) in edits {
        assert!(text.contains(from), "{from} not in the base profile");
        text = text.replace(from, to);
    }
    text
}

#[test]
fn base_profile_of_these_tests_is_valid() {
    assert_eq!(issues_of("base.yaml", &profile(&[])), vec![]);
}

/// `cluster.nodes: 100000000` took 45 s and 5.5 GB to validate (a list of every node id
/// was built), then said ok; 4,000,000,000 made `sim` abort.
#[test]
fn huge_node_counts_are_refused_without_listing_the_nodes() {
    for n in ["100000000", "4000000000", "100001"] {
        let issues = issues_of(
            "nodes.yaml",
            &profile(&[("nodes: 10", &format!("nodes: {n}"))]),
        );
        let i = issue_at(&issues, "cluster.nodes");
        assert_eq!((i.line, i.col), (3, 3), "{i}");
        assert!(i.message.contains("100000"), "{i}");
    }
    assert_eq!(
        issues_of("ok.yaml", &profile(&[("nodes: 10", "nodes: 100000")])),
        vec![]
    );
}

/// `replicas: 4294967295` validated, then `sim` aborted allocating the replicas.
#[test]
fn huge_replica_counts_are_refused() {
    let text = profile(&[(
        "sync_interval: 2s",
        "sync_interval: 2s\n    replicas: 4294967295",
    )]);
    let issues = issues_of("replicas.yaml", &text);
    let i = issue_at(&issues, "placement.embedded.replicas");
    assert!(i.message.contains("<= 1000"), "{i}");
    // replicas x nodes is bounded too (each replica tracks every node).
    let text = profile(&[
        ("nodes: 10", "nodes: 100000"),
        ("sync_interval: 2s", "sync_interval: 2s\n    replicas: 11"),
    ]);
    let issues = issues_of("views.yaml", &text);
    assert!(issue_at(&issues, "placement.embedded.replicas")
        .message
        .contains("node views"));
}

/// `per_second: 2147483648` validated, then `sim` aborted allocating the requests.
#[test]
fn huge_rates_are_refused() {
    let text = profile(&[("per_second: 20", "per_second: 2147483648")]);
    let issues = issues_of("rate.yaml", &text);
    let i = issue_at(&issues, "workload.shape.rate.per_second");
    assert_eq!(i.line, 12, "{i}");
    // Under the rate ceiling but too many requests in all.
    let text = profile(&[(
        "rate: {per_second: 20, duration: 5s}",
        "rate: {per_second: 100000, duration: 7d}",
    )]);
    let issues = issues_of("total.yaml", &text);
    assert!(
        issue_at(&issues, "workload.shape.rate")
            .message
            .contains("10000000"),
        "{issues:#?}"
    );
}

/// A goose plan of 10^9 users validated, then `sim` aborted allocating the users.
#[test]
fn plans_of_a_billion_users_are_refused() {
    for steps in ["1000000000,1s", "100000,1s;0,1s;100000,1s;0,1s;100000,1s;0,1s;100000,1s;0,1s;100000,1s;0,1s;100000,1s;0,1s;100000,1s;0,1s;100000,1s;0,1s;100000,1s;0,1s;100000,1s;0,1s;100000,1s", "1,200h"] {
        let text = profile(&[(
            "rate: {per_second: 20, duration: 5s}",
            &format!("plan: {{steps: \"{steps}\"}}"),
        )]);
        let issues = issues_of("plan.yaml", &text);
        issue_at(&issues, "workload.shape.plan.steps");
    }
    // A refused plan step is named without goose printing to stderr.
    let text = profile(&[(
        "rate: {per_second: 20, duration: 5s}",
        "plan: {steps: \"10,5ms\"}",
    )]);
    let issues = issues_of("plan.yaml", &text);
    assert!(issue_at(&issues, "workload.shape.plan.steps")
        .message
        .contains("`10,5ms`"));
}

/// A burst, `max_in_flight` and request sizes are bounded too.
#[test]
fn huge_bursts_in_flight_and_request_sizes_are_refused() {
    let burst = profile(&[(
        "rate: {per_second: 20, duration: 5s}",
        "burst: {count: 4000000000}",
    )]);
    issue_at(&issues_of("b.yaml", &burst), "workload.shape.burst.count");
    let text = profile(&[(
        "timeout: 300s}",
        "timeout: 300s}\n  max_in_flight: 4000000000",
    )]);
    issue_at(&issues_of("m.yaml", &text), "workload.max_in_flight");
}

/// A sandbox no node can hold is refused every time and retried until its deadline.
#[test]
fn sandboxes_larger_than_every_node_are_refused() {
    // A node admits no sandbox larger than its 16 CPUs; 65536 MiB of memory.
    let text = profile(&[("vcpu: 1, ram_mb: 512", "vcpu: 65, ram_mb: 70000")]);
    let issues = issues_of("size.yaml", &text);
    assert!(issue_at(&issues, "workload.sandbox.vcpu")
        .message
        .contains("no node can hold"));
    assert!(issue_at(&issues, "workload.sandbox.ram_mb")
        .message
        .contains("no node can hold"));
    // One larger node is enough.
    let text = profile(&[
        ("vcpu: 1, ram_mb: 512", "vcpu: 65, ram_mb: 512"),
        (
            "node: {cpu_count: 16}",
            "node: {cpu_count: 16}\n  overrides:\n    node-03: {cpu_count: 96}",
        ),
    ]);
    assert_eq!(issues_of("size.yaml", &text), vec![]);
}

/// YAML nested 100,000 deep took 29 s to validate (every key's full path was copied at
/// every level, and the YAML scanners revisit every open level per token). It is now
/// refused at the level past the bound, at once.
#[test]
fn yaml_nested_100000_deep_is_refused_at_its_depth_quickly() {
    let n = 100_000;
    let flow = format!("{HEAD}description: {}{}\n", "[".repeat(n), "]".repeat(n));
    let block = format!("{HEAD}description:\n{}x\n", "- ".repeat(n));
    let maps = format!(
        "{HEAD}description: {}1{}\n",
        "{a: ".repeat(n),
        "}".repeat(n)
    );
    for (text, line) in [(flow, 2), (block, 3), (maps, 2)] {
        let issues = issues_of("deep.yaml", &text);
        assert_eq!(issues.len(), 1, "{issues:#?}");
        let i = &issues[0];
        assert!(i.message.contains("nested deeper than"), "{i}");
        assert_eq!(i.line, line, "{i}");
        // Where the nesting passes the bound, not at the end of the 100,000 levels.
        assert!(i.col > MAX_YAML_DEPTH && i.col < 1_000, "{i}");
    }
}

/// `sync_interval: 1ns` and `collect.interval: 1ns` validated and then the simulation
/// ran without end (3.4 GB in 20 s).
#[test]
fn intervals_have_a_floor_and_a_ceiling() {
    for (from, to, field) in [
        (
            "sync_interval: 2s",
            "sync_interval: 1ns",
            "placement.embedded.sync_interval",
        ),
        ("interval: 1s", "interval: 1ns", "collect.interval"),
        (
            "sync_interval: 2s",
            "sync_interval: 400d",
            "placement.embedded.sync_interval",
        ),
        ("interval: 1s", "interval: 2d", "collect.interval"),
    ] {
        let issues = issues_of("i.yaml", &profile(&[(from, to)]));
        let i = issue_at(&issues, field);
        assert!(i.message.contains("between 1ms and 1day"), "{i}");
    }
}

/// Lifetimes of 500,000 years and huge latencies validated and kept `sim` running.
#[test]
fn lifetimes_latencies_and_timeouts_have_a_ceiling() {
    let cases = [
        (
            "timeout: 300s}",
            "timeout: 300s}\n  lifetime: {dist: constant, value: 500000years}",
            "workload.lifetime.value",
        ),
        (
            "node: {cpu_count: 16}",
            "node: {cpu_count: 16, create_latency: {dist: uniform, min: 0ms, max: 100000h}}",
            "cluster.node.create_latency.max",
        ),
        (
            "node: {cpu_count: 16}",
            "node: {cpu_count: 16, delete_latency: {dist: lognormal, median: 1ms, sigma: 1000}}",
            "cluster.node.delete_latency.sigma",
        ),
        (
            "sync_interval: 2s",
            "sync_interval: 2s\n    request_timeout: 3650d",
            "placement.embedded.request_timeout",
        ),
        (
            "sync_interval: 2s",
            "sync_interval: 2s\n    create_rpc_timeout: 2s",
            "placement.embedded.create_rpc_timeout",
        ),
        (
            "duration: 5s}",
            "duration: 100d}",
            "workload.shape.rate.duration",
        ),
    ];
    for (from, to, field) in cases {
        let issues = issues_of("t.yaml", &profile(&[(from, to)]));
        issue_at(&issues, field);
    }
}

/// With `timeout: 1ns` the nightly profile passed with 0 live sandboxes (CV 0, Jain 1).
#[test]
fn sandbox_timeout_of_1ns_is_refused() {
    let text = std::fs::read_to_string("profiles/nightly.yaml")
        .unwrap()
        .replace("timeout: 300s", "timeout: 1ns");
    let issues = issues_of("nightly.yaml", &text);
    assert_eq!(issues.len(), 1, "{issues:#?}");
    assert_eq!(issues[0].field, "workload.sandbox.timeout");
    assert!(
        issues[0].message.contains("between 1s and 30days"),
        "{}",
        issues[0]
    );
}

/// `best_of_k.r: 1e-310` validated and answered 503 on an empty cluster.
#[test]
fn best_of_k_r_and_alpha_must_be_sane() {
    for (r, ok) in [
        ("1e-310", false),
        ("0.001", false),
        ("1e9", false),
        ("0.01", true),
    ] {
        let issues = issues_of("r.yaml", &profile(&[("r: 4.0", &format!("r: {r}"))]));
        assert_eq!(issues.is_empty(), ok, "r {r}: {issues:#?}");
    }
    let issues = issues_of("a.yaml", &profile(&[("r: 4.0", "r: 4.0, alpha: 1e300")]));
    issue_at(&issues, "placement.embedded.best_of_k.alpha");
}

/// `per_second: 1e-9` validated and sent nothing.
#[test]
fn a_rate_that_sends_nothing_is_refused() {
    let issues = issues_of(
        "r.yaml",
        &profile(&[("per_second: 20", "per_second: 1e-9")]),
    );
    let i = issue_at(&issues, "workload.shape.rate.per_second");
    assert!(i.message.contains("sends no request"), "{i}");
}

/// Whether `run` accepts the chaos steps of `text`: it parses (faults and their
/// parameters are typed) and its plan resolves.
fn resolve_ok(text: &str) -> bool {
    let Ok(p) = parse(&Source::inline("c.yaml", text)) else {
        return false;
    };
    let p: Profile = p;
    let ids: Vec<String> = (0..p.cluster.nodes).map(|k| p.cluster.node_id(k)).collect();
    FaultPlan::resolve(&p.chaos, &ids, p.seed).is_ok()
}

/// `validate` said ok to chaos steps `run` refuses: an unknown error code, `errors`
/// without `probability`, unknown parameter keys; `restart` with a `duration` was
/// silently accepted.
#[test]
fn chaos_steps_that_run_refuses_do_not_validate() {
    let cases = [
        (
            "{at: 1s, fault: errors, nodes: [node-01], params: {probability: 0.5, code: banana}}",
            "chaos[0].params.code",
            false,
        ),
        (
            "{at: 1s, fault: errors, nodes: [node-01]}",
            "chaos[0].params.probability",
            false,
        ),
        (
            "{at: 1s, fault: kill, nodes: [node-01], params: {colour: red}}",
            "chaos[0].params.colour",
            false,
        ),
        (
            "{at: 1s, fault: slow, nodes: [node-01]}",
            "chaos[0].params.latency",
            false,
        ),
        (
            "{at: 1s, fault: status, nodes: [node-01], params: {status: asleep}}",
            "chaos[0].params.status",
            false,
        ),
        (
            "{at: 1s, fault: restart, nodes: [node-01], duration: 5s}",
            "chaos[0].duration",
            // The plan ignores it; validation refuses it.
            true,
        ),
        (
            "{at: 1s, fault: slow, nodes: [node-01], params: {latency: 100000h}}",
            "chaos[0].params.latency",
            // The latency bound is checked as the typed fault is parsed, once, so the
            // plan never sees it (it used to resolve and only validation refused it).
            false,
        ),
        (
            "{at: 1000d, fault: kill, nodes: [node-01]}",
            "chaos[0].at",
            true,
        ),
    ];
    for (step, field, resolves) in cases {
        let text = format!("{}chaos:\n  - {step}\n", profile(&[]));
        let issues = issues_of("chaos.yaml", &text);
        assert_eq!(issues.len(), 1, "{step}: {issues:#?}");
        let i = &issues[0];
        assert_eq!((i.field.as_str(), i.line), (field, 17), "{step}: {i}");
        assert_eq!(resolve_ok(&text), resolves, "{step}");
    }
    // And what validates, resolves.
    let good = format!(
        "{}chaos:\n  - {{at: 1s, fault: errors, nodes: [node-01], params: {{probability: 0.5, code: internal}}}}\n",
        profile(&[])
    );
    assert_eq!(issues_of("good.yaml", &good), vec![]);
    assert!(resolve_ok(&good));
}

/// A repeated `cluster:` on line 7 was reported at 3:1, the start of the enclosing
/// mapping; a repeated key in a map (`params`) was silently overwritten.
#[test]
fn duplicate_keys_are_reported_at_their_own_line() {
    let text = "# a comment\n\nname: dup\ncluster:\n  nodes: 3\nworkload: {shape: {burst: {count: 1}}}\ncluster:\n  nodes: 4\n";
    let issues = issues_of("dup.yaml", text);
    assert_eq!(issues.len(), 1, "{issues:#?}");
    assert_eq!((issues[0].line, issues[0].col), (7, 1), "{}", issues[0]);
    assert_eq!(issues[0].field, "cluster");
    assert!(
        issues[0].message.contains("duplicate key `cluster`"),
        "{}",
        issues[0]
    );
    let text = format!(
        "{}chaos:\n  - at: 1s\n    fault: errors\n    nodes: [node-01]\n    params:\n      probability: 0.1\n      probability: 0.9\n",
        profile(&[])
    );
    let issues = issues_of("dup.yaml", &text);
    assert_eq!(
        (issues[0].line, issues[0].col, issues[0].field.as_str()),
        (22, 7, "chaos[0].params.probability"),
        "{issues:#?}"
    );
}

/// `bytes` written to `name` in this process's temp directory for `test`.
fn temp_file(test: &str, name: &str, bytes: &[u8]) -> PathBuf {
    let dir = temp_dir(test);
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(name);
    std::fs::write(&path, bytes).unwrap();
    path
}

fn temp_dir(test: &str) -> PathBuf {
    std::env::temp_dir().join(format!("stampede-hostile-{test}-{}", std::process::id()))
}

fn load_issue(path: &Path) -> ProfileIssue {
    match load(path) {
        Err(ProfileError::Parse(i)) => i,
        other => panic!("expected a parse error, got {other:?}"),
    }
}

/// Multi-document and non-UTF-8 files were reported without a line.
#[test]
fn multi_document_and_non_utf8_files_are_reported_at_a_line() {
    let two = temp_file(
        "docs",
        "two.yaml",
        b"name: a\nworkload: {shape: {burst: {count: 1}}}\n---\nname: b\n",
    );
    let i = load_issue(&two);
    assert_eq!((i.line, i.col), (3, 1), "{i}");
    assert!(i.message.contains("second YAML document"), "{i}");
    let bad = temp_file("docs", "latin1.yaml", b"name: a\ndescription: caf\xe9\n");
    let i = load_issue(&bad);
    assert_eq!((i.line, i.col), (2, 17), "{i}");
    assert!(i.to_string().contains("latin1.yaml:2:17: not UTF-8"), "{i}");
    let big = temp_file("docs", "big.yaml", &vec![b'#'; MAX_PROFILE_BYTES + 1]);
    assert!(load_issue(&big).message.contains("larger than"));
    let _ = std::fs::remove_dir_all(temp_dir("docs"));
}

/// Every shipped profile still validates (and a lot of problems are capped).
#[test]
fn every_shipped_profile_validates_and_problem_lists_are_capped() {
    for entry in std::fs::read_dir("profiles").unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "yaml") {
            let p = load_and_validate(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            if let PlacementSection::Embedded(_) = p.placement {
                assert!(p.cluster.nodes <= MAX_NODES);
            }
        }
    }
    let ids: String = (0..5000).map(|k| format!("node-x{k}, ")).collect();
    let text = format!(
        "{}chaos:\n  - {{at: 1s, fault: kill, nodes: [{ids}]}}\n",
        profile(&[])
    );
    let path = temp_file("capped", "many.yaml", text.as_bytes());
    let Err(ProfileErrors::Invalid(issues)) = load_and_validate(&path) else {
        panic!("expected issues");
    };
    assert_eq!(issues.len(), MAX_ISSUES + 1);
    assert!(issues[MAX_ISSUES].message.contains("more problems"));
    let _ = std::fs::remove_dir_all(temp_dir("capped"));
}

/// Aliases are not expanded without bound ("billion laughs"): nine levels of ten
/// aliases each would be 10^9 values.
#[test]
fn nested_aliases_do_not_expand_without_bound() {
    // In `nodes`, which an untagged enum reads whole before choosing its variant (the
    // fault's `params` are typed now and refuse the first unknown key before any alias).
    let mut nodes = String::from("&l0 [x, x, x, x, x, x, x, x, x, x]");
    for i in 1..10 {
        let refs = vec![format!("*l{}", i - 1); 10].join(", ");
        nodes.push_str(&format!(", &l{i} [{refs}]"));
    }
    let text = format!(
        "{}chaos:\n  - {{at: 1s, fault: kill, nodes: [{nodes}]}}\n",
        profile(&[])
    );
    let issues = issues_of("laughs.yaml", &text);
    assert!(!issues.is_empty());
    assert!(
        issues[0].message.contains("repetition limit"),
        "{issues:#?}"
    );
}

/// `create_rpc_timeout` was removed (E2B bounds a Create only by the request deadline,
/// `packages/api/main.go`): a profile still giving it is refused with that reason, not
/// silently ignored nor with a bare "unknown field".
#[test]
fn create_rpc_timeout_is_refused_as_removed() {
    let text = profile(&[(
        "sync_interval: 2s",
        "sync_interval: 2s\n    create_rpc_timeout: 10s",
    )]);
    let issues = issues_of("t.yaml", &text);
    assert_eq!(issues.len(), 1, "{issues:#?}");
    let i = issue_at(&issues, "placement.embedded.create_rpc_timeout");
    assert!(i.message.contains("was removed"), "{}", i.message);
    assert!(i.message.contains("request_timeout"), "{}", i.message);
    assert!(i.line > 0, "{i:?}");
}

/// `placements_cv: {}` validated and then passed every run (a guard that guards nothing),
/// and a negative `max` on the four over-time checks was accepted: validation listed 9 of
/// the 13 checks. Every check of the table refuses an empty bound and a negative one, at
/// the field's own line and column.
#[test]
fn every_check_refuses_an_empty_and_a_negative_bound_at_its_field() {
    for def in &CHECKS {
        let field = format!("checks.{}", def.name);
        let empty = profile(&[(
            "collect:\n",
            &format!("checks:\n  {}: {{}}\ncollect:\n", def.name),
        )]);
        let issues = issues_of("empty.yaml", &empty);
        assert!(!issues.is_empty(), "{}: {{}} validated", def.name);
        let line = empty.lines().position(|l| l.contains(def.name)).unwrap() + 1;
        assert!(
            issues.iter().any(|i| i.line == line && i.col > 1),
            "{}: {{}} not refused at line {line}: {issues:#?}",
            def.name
        );
        // A latency cannot be written negative: its smallest refused bound is zero.
        let negative = if def.id == CheckId::P99Latency {
            "{max: 0s}"
        } else {
            "{max: -1}"
        };
        let text = profile(&[(
            "collect:\n",
            &format!("checks:\n  {}: {negative}\ncollect:\n", def.name),
        )]);
        let issues = issues_of("negative.yaml", &text);
        let issue = issues
            .iter()
            .find(|i| i.field.starts_with(&field))
            .unwrap_or_else(|| panic!("{}: {negative} validated: {issues:#?}", def.name));
        assert_eq!(issue.line, line, "{issue:?}");
        assert!(issue.col > 1, "{issue:?}");
    }
}

/// A lifecycle that resumes before it pauses, or holds past the longest sandbox, is
/// named at its step's line and column.
#[test]
fn a_bad_lifecycle_step_is_named_where_it_is() {
    let text = profile(&[(
        "timeout: 300s}",
        "timeout: 300s}\n  lifecycle:\n    mix: 0.5\n    steps:\n      - resume\n      \
         - hold: {dist: constant, value: 400d}\n      - kill",
    )]);
    let issues = issues_of("l.yaml", &text);
    let resume = issue_at(&issues, "workload.lifecycle.steps[0]");
    assert!(resume.message.contains("pause"), "{resume}");
    assert_eq!((resume.line, resume.col), (17, 9), "{resume}");
    let hold = issue_at(&issues, "workload.lifecycle.steps[1].hold.value");
    assert_eq!(hold.line, 18, "{hold}");
    let mix = issues_of(
        "m.yaml",
        &profile(&[(
            "timeout: 300s}",
            "timeout: 300s}\n  lifecycle: {mix: 1.5, steps: [pause]}",
        )]),
    );
    issue_at(&mix, "workload.lifecycle.mix");
}

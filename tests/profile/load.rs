//! Profile loading and validation against real files in tests/fixtures/profiles:
//! every error names file:line:col and the dotted field path (positions counted by
//! hand in the fixture files).

use std::path::{Path, PathBuf};

use stampede::profile::{
    is_loopback_host, load, load_and_validate, validate_targets, validate_targets_in, ProfileError,
    ProfileErrors, ProfileIssue, Source,
};

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/profiles")
        .join(name)
}

fn parse_issue(name: &str) -> ProfileIssue {
    match load(&fixture(name)) {
        Err(ProfileError::Parse(issue)) => issue,
        other => panic!("{name}: expected a parse error, got {other:?}"),
    }
}

fn at(issue: &ProfileIssue) -> (usize, usize, &str) {
    (issue.line, issue.col, issue.field.as_str())
}

#[test]
fn valid_profile_loads_and_validates() {
    let p = load_and_validate(&fixture("valid.yaml")).expect("valid profile");
    assert_eq!(p.name, "valid");
    assert_eq!(p.cluster.nodes, 5);
    assert!(validate_targets(&p).is_ok());
}

/// `colour` is line 8, column 5 of unknown_field.yaml.
#[test]
fn unknown_field_names_file_line_col_and_path() {
    let issue = parse_issue("unknown_field.yaml");
    assert_eq!(at(&issue), (8, 5, "workload.sandbox.colour"), "{issue}");
    assert!(issue.message.contains("unknown field `colour`"), "{issue}");
    let shown = issue.to_string();
    assert!(
        shown.ends_with(
            "unknown_field.yaml:8:5: workload.sandbox.colour: "
                .to_string()
                .as_str()
        ) || shown.contains("unknown_field.yaml:8:5: workload.sandbox.colour: unknown field"),
        "{shown}"
    );
    assert!(
        !shown.contains(" at line "),
        "location printed twice: {shown}"
    );
}

/// `k: three`: the value starts at line 5, column 10.
#[test]
fn wrong_type_names_the_value_position() {
    let issue = parse_issue("wrong_type.yaml");
    assert_eq!(
        at(&issue),
        (5, 10, "placement.embedded.best_of_k.k"),
        "{issue}"
    );
    assert!(issue.message.contains("invalid type"), "{issue}");
}

/// `duration: 25 parsecs`: the value starts at line 6, column 17.
#[test]
fn bad_duration_names_the_duration_field() {
    let issue = parse_issue("bad_duration.yaml");
    assert_eq!(
        at(&issue),
        (6, 17, "workload.shape.rate.duration"),
        "{issue}"
    );
}

#[test]
fn syntax_error_has_a_position() {
    let src = Source::inline("broken.yaml", "name: x\nworkload: [\n");
    let Err(ProfileError::Parse(issue)) = stampede::profile::parse(&src) else {
        panic!("expected a syntax error");
    };
    assert!(issue.line >= 2, "{issue}");
}

/// Every semantic problem at once, each at its key (positions counted by hand).
#[test]
fn semantic_problems_are_all_reported_at_their_keys() {
    let Err(ProfileErrors::Invalid(issues)) = load_and_validate(&fixture("semantic.yaml")) else {
        panic!("expected semantic issues");
    };
    let got: Vec<(usize, usize, &str)> = issues.iter().map(at).collect();
    let want = vec![
        (5, 5, "cluster.node.cpu_count"),
        (8, 28, "placement.embedded.accounting[1]"),
        (10, 7, "placement.embedded.best_of_k.k"),
        (11, 5, "placement.embedded.replicas"),
        (15, 7, "workload.shape.rate.per_second"),
        (16, 7, "workload.shape.rate.duration"),
        (18, 3, "checks.cv"),
        (19, 16, "checks.error_rate.max"),
        // An unknown fault name is a parse error now (the fault is typed): see
        // `chaos_plan::bad_faults_and_params_are_parse_errors_at_their_field`.
        (21, 5, "chaos[0].at"),
        (23, 13, "chaos[0].nodes[0]"),
        (26, 13, "chaos[1].nodes.fraction"),
    ];
    assert_eq!(got, want, "{issues:#?}");
    let k = issues[2].to_string();
    assert!(
        k.ends_with("semantic.yaml:10:7: placement.embedded.best_of_k.k: must be >= 1"),
        "{k}"
    );
}

#[test]
fn k_larger_than_the_cluster_is_refused() {
    let text = "name: x\ncluster: {nodes: 2}\nplacement:\n  embedded:\n    best_of_k: {k: 3}\nworkload:\n  shape: {burst: {count: 1}}\n";
    let src = Source::inline("k.yaml", text);
    let p = stampede::profile::parse(&src).expect("parses");
    let issues = stampede::profile::validate(&p, &src);
    assert_eq!(issues.len(), 1, "{issues:?}");
    assert_eq!(
        issues[0].to_string(),
        "k.yaml:5:17: placement.embedded.best_of_k.k: must be <= the number of nodes (2)"
    );
}

#[test]
fn loopback_hosts() {
    for h in [
        "localhost",
        "LOCALHOST",
        "127.0.0.1",
        "127.5.6.7",
        "::1",
        "[::1]",
        "a.localhost",
    ] {
        assert!(is_loopback_host(h), "{h} is loopback");
    }
    for h in [
        "10.0.0.1",
        "128.0.0.1",
        "0.0.0.0",
        "example.com",
        "localhost.example.com",
        "::2",
        "",
    ] {
        assert!(!is_loopback_host(h), "{h} is not loopback");
    }
}

/// external.yaml allows the API host but not orchestrator 10.0.0.7 (line 6, col 39).
#[test]
fn non_loopback_target_must_be_allowed() {
    let path = fixture("external.yaml");
    let p = load_and_validate(&path).expect("valid profile");
    let issue = validate_targets(&p).expect_err("10.0.0.7 is not allowed");
    assert_eq!(issue.field, "placement.external.orchestrators[1]");
    assert!(issue.message.contains("10.0.0.7"), "{issue}");
    let src = Source::read(&path).expect("read");
    let located = validate_targets_in(&p, Some(&src)).expect_err("located");
    assert_eq!((located.line, located.col), (6, 39), "{located}");
    assert_eq!(
        issue.to_string(),
        "placement.external.orchestrators[1]: host `10.0.0.7` is not loopback; \
         list it under `allow_targets` to send load there"
    );
    let mut allowed = p.clone();
    allowed.allow_targets.push("10.0.0.7".into());
    assert!(validate_targets(&allowed).is_ok());
}

/// The committed `stampede.schema.json` is what `json_schema()` generates; run with
/// `STAMPEDE_UPDATE_SCHEMA=1` to rewrite it after changing the profile types.
#[test]
fn committed_profile_schema_is_current() {
    let schema = stampede::profile::json_schema();
    assert!(schema["properties"]["workload"].is_object());
    assert!(schema["required"]
        .as_array()
        .expect("required")
        .iter()
        .any(|r| r == "name"));
    let text = format!("{}\n", serde_json::to_string_pretty(&schema).expect("json"));
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("stampede.schema.json");
    if std::env::var_os("STAMPEDE_UPDATE_SCHEMA").is_some() {
        std::fs::write(&path, &text).expect("write schema");
    }
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        committed == text,
        "stampede.schema.json is stale: rerun with STAMPEDE_UPDATE_SCHEMA=1"
    );
}

/// `placement: {embedded: ...}` and `shape: {rate: ...}` are one-key maps: they parse
/// with plain `serde_yaml_ng::from_str` (no `!embedded` tags) and also through
/// `singleton_map_recursive`, which other modules use.
#[test]
fn one_key_map_enums_parse_with_plain_and_recursive_deserializers() {
    let text = std::fs::read_to_string(fixture("valid.yaml")).expect("read");
    let plain: stampede::profile::Profile = serde_yaml_ng::from_str(&text).expect("plain");
    let recursive: stampede::profile::Profile =
        serde_yaml_ng::with::singleton_map_recursive::deserialize(
            serde_yaml_ng::Deserializer::from_str(&text),
        )
        .expect("recursive");
    assert_eq!(plain, recursive);
    assert!(matches!(
        plain.workload.shape,
        stampede::profile::Shape::Rate { per_second, .. } if per_second == 20.0
    ));
    // And back: a profile serializes to YAML that loads again.
    let yaml = serde_yaml_ng::to_string(&plain).expect("to yaml");
    assert!(yaml.contains("embedded:"), "{yaml}");
    let again: stampede::profile::Profile = serde_yaml_ng::from_str(&yaml).expect("reload");
    assert_eq!(again, plain);
}

/// A bad accounting mode is named at its own position, in a list or alone (not
/// "data did not match any variant of untagged enum").
#[test]
fn unknown_accounting_mode_is_named_where_it_is_written() {
    let head = "name: x\nworkload:\n  shape: {burst: {count: 3}}\nplacement:\n  embedded:\n";
    for (line, want) in [
        (
            "    accounting: [optimistic, bogus]\n",
            "m.yaml:6:30: placement.embedded.accounting[1]: unknown variant `bogus`",
        ),
        (
            "    accounting: bogus\n",
            "m.yaml:6:17: placement.embedded.accounting: unknown variant `bogus`",
        ),
    ] {
        let src = Source::inline("m.yaml", format!("{head}{line}"));
        let Err(ProfileError::Parse(issue)) = stampede::profile::parse(&src) else {
            panic!("expected a parse error for {line}");
        };
        assert!(issue.to_string().starts_with(want), "{issue}");
    }
    let ok = Source::inline(
        "m.yaml",
        format!("{head}    accounting: [reported, in-flight]\n"),
    );
    let p = stampede::profile::parse(&ok).expect("two modes");
    let stampede::profile::PlacementSection::Embedded(e) = p.placement else {
        panic!("embedded");
    };
    assert_eq!(e.accounting.to_vec().len(), 2);
}

/// A profile with `api_stage` and node-load problems: `(errors, warnings)` fields.
fn stage_and_idle(text: &str) -> (Vec<String>, Vec<String>) {
    let source = Source::inline("p.yaml", text);
    let profile = stampede::profile::parse(&source).expect("parses");
    let fields = |v: Vec<ProfileIssue>| v.into_iter().map(|i| i.field).collect::<Vec<_>>();
    (
        fields(stampede::profile::validate(&profile, &source)),
        fields(stampede::profile::warnings(&profile, &source)),
    )
}

const STAGE_AND_IDLE: &str = "name: p
cluster:
  nodes: 3
  node:
    idle_cpu_percent: {min: 90, max: 150}
  overrides:
    node-01: {cpu_percent: per_sandbox}
    node-02: {idle_cpu_percent: {min: 120, max: 130}}
placement:
  embedded:
    api_stage:
      time: {dist: uniform, min: 9ms, max: 1ms}
      workers: 0
workload:
  shape:
    burst: {count: 1}
";

#[test]
fn api_stage_problems_and_host_idle_above_100_are_named() {
    let (errors, warnings) = stage_and_idle(STAGE_AND_IDLE);
    assert_eq!(
        errors,
        vec![
            "placement.embedded.api_stage.time",
            "placement.embedded.api_stage.workers"
        ]
    );
    // node-01 reports per sandbox (no cap); node-02's own range is above the cap.
    assert_eq!(
        warnings,
        vec![
            "cluster.node.idle_cpu_percent",
            "cluster.overrides.node-02.idle_cpu_percent"
        ]
    );
    let fine = STAGE_AND_IDLE
        .replace("max: 150", "max: 100")
        .replace("min: 120, max: 130", "min: 20, max: 30")
        .replace("max: 1ms", "max: 20ms")
        .replace("workers: 0", "workers: 8");
    assert_eq!(stage_and_idle(&fine), (vec![], vec![]));
}

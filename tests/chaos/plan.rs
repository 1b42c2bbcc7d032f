//! Fault plans resolve deterministically from the seed, name the bad field of a bad
//! step, and every shipped drill profile parses, validates and resolves.

use std::path::Path;
use std::time::Duration;

use mock_node::api::{FailureCode, FaultKind};
use stampede::chaos::{FaultPlan, PlanError};
use stampede::profile::{self, ChaosFault, ChaosStep, NodeSelector, PlacementSection, Profile};

fn ids(n: usize) -> Vec<String> {
    (0..n).map(|k| format!("node-{k:02}")).collect()
}

fn step(kind: FaultKind, nodes: NodeSelector) -> ChaosStep {
    ChaosStep {
        at: Duration::from_secs(1),
        fault: ChaosFault::Node(kind),
        nodes,
        duration: Some(Duration::from_secs(5)),
    }
}

#[test]
fn same_seed_same_plan_other_seeds_other_picks() {
    let steps = vec![
        step(FaultKind::Kill, NodeSelector::Random { random: 3 }),
        step(
            FaultKind::Exhaust,
            NodeSelector::Fraction { fraction: 0.25 },
        ),
    ];
    let nodes = ids(20);
    let a = FaultPlan::resolve(&steps, &nodes, 77).unwrap();
    let b = FaultPlan::resolve(&steps, &nodes, 77).unwrap();
    assert_eq!(a, b);
    assert_eq!(a.faults[0].nodes.len(), 3);
    assert_eq!(a.faults[1].nodes.len(), 5, "0.25 of 20 nodes");
    for f in &a.faults {
        let mut sorted = f.nodes.clone();
        sorted.sort();
        sorted.dedup();
        assert_eq!(sorted, f.nodes, "picks are distinct and in node order");
    }
    let picks: std::collections::BTreeSet<Vec<String>> = (0..10)
        .map(|seed| {
            FaultPlan::resolve(&steps, &nodes, seed).unwrap().faults[0]
                .nodes
                .clone()
        })
        .collect();
    assert!(picks.len() > 5, "seeds must change the picks: {picks:?}");
}

#[test]
fn a_step_keeps_its_picks_when_another_step_is_added() {
    let one = vec![step(FaultKind::Kill, NodeSelector::Random { random: 2 })];
    let mut two = vec![step(FaultKind::Hang, NodeSelector::Random { random: 2 })];
    two.extend(one.clone());
    let nodes = ids(10);
    let p1 = FaultPlan::resolve(&one, &nodes, 5).unwrap();
    let p2 = FaultPlan::resolve(&two, &nodes, 5).unwrap();
    // Step 0 of `one` is step 1 of `two`: different index, so an independent stream,
    // but resolving `one` twice or `two` twice never differs.
    assert_eq!(p2, FaultPlan::resolve(&two, &nodes, 5).unwrap());
    assert_eq!(p1.faults[0].kind, FaultKind::Kill);
}

#[test]
fn fraction_rounds_up_and_ids_keep_node_order() {
    let nodes = ids(10);
    let steps = vec![
        step(FaultKind::Kill, NodeSelector::Fraction { fraction: 0.01 }),
        step(FaultKind::Kill, NodeSelector::Fraction { fraction: 1.0 }),
        step(
            FaultKind::Kill,
            NodeSelector::Ids(vec!["node-07".into(), "node-02".into()]),
        ),
    ];
    let p = FaultPlan::resolve(&steps, &nodes, 1).unwrap();
    assert_eq!(p.faults[0].nodes.len(), 1);
    assert_eq!(p.faults[1].nodes, nodes);
    assert_eq!(p.faults[2].nodes, vec!["node-02", "node-07"]);
}

#[test]
fn typed_params_pass_through_and_restart_has_no_duration() {
    let errors = step(
        FaultKind::Errors {
            probability: 0.3,
            code: FailureCode::Internal,
        },
        NodeSelector::Random { random: 1 },
    );
    let slow = step(
        FaultKind::Slow {
            latency: Duration::from_millis(250),
        },
        NodeSelector::Random { random: 1 },
    );
    let restart = step(FaultKind::Restart, NodeSelector::Random { random: 1 });
    let p = FaultPlan::resolve(&[errors, slow, restart], &ids(4), 3).unwrap();
    assert_eq!(
        p.faults[0].kind,
        FaultKind::Errors {
            probability: 0.3,
            code: FailureCode::Internal
        }
    );
    assert_eq!(
        p.faults[1].kind,
        FaultKind::Slow {
            latency: Duration::from_millis(250)
        }
    );
    assert_eq!(p.faults[2].duration, None);
    assert_eq!(p.span(), Duration::from_secs(6));
}

/// The profile's text becomes the typed fault: `delay` is `latency`, `code` defaults
/// to `unavailable`.
#[test]
fn profile_text_becomes_the_typed_fault() {
    let text = "name: t\nworkload: {shape: {burst: {count: 1}}}\nchaos:\n  \
        - {at: 1s, fault: slow, nodes: [node-00], params: {delay: 250ms}}\n  \
        - {at: 1s, fault: errors, nodes: [node-00], params: {probability: 0.5}}\n  \
        - {at: 1s, fault: drain, nodes: [node-00]}\n";
    let p = profile::parse(&profile::Source::inline("t.yaml", text)).expect("parses");
    let faults: Vec<ChaosFault> = p.chaos.iter().map(|s| s.fault.clone()).collect();
    assert_eq!(
        faults,
        vec![
            ChaosFault::Node(FaultKind::Slow {
                latency: Duration::from_millis(250)
            }),
            ChaosFault::Node(FaultKind::Errors {
                probability: 0.5,
                code: FailureCode::Unavailable
            }),
            ChaosFault::Drain,
        ]
    );
}

fn resolve_err(s: ChaosStep) -> PlanError {
    let ok = step(FaultKind::Kill, NodeSelector::Random { random: 1 });
    FaultPlan::resolve(&[ok, s], &ids(4), 0).unwrap_err()
}

#[test]
fn bad_steps_name_their_index_and_field() {
    let e = resolve_err(step(
        FaultKind::Kill,
        NodeSelector::Ids(vec!["node-00".into(), "node-99".into()]),
    ));
    assert_eq!((e.step, e.field.as_str()), (1, "nodes[1]"));
    assert!(e.message.contains("node-99"));

    let e = resolve_err(step(FaultKind::Kill, NodeSelector::Random { random: 5 }));
    assert_eq!(e.field, "nodes.random");
    let e = resolve_err(step(
        FaultKind::Kill,
        NodeSelector::Fraction { fraction: 1.5 },
    ));
    assert_eq!(e.field, "nodes.fraction");
}

/// A bad fault or parameter cannot reach a plan: the profile does not parse, and the
/// error names the step's field.
#[test]
fn bad_faults_and_params_are_parse_errors_at_their_field() {
    let cases = [
        (
            "{at: 1s, fault: explode, nodes: [node-00]}",
            "chaos[1].fault",
            "unknown fault `explode`",
        ),
        (
            "{at: 1s, fault: slow, nodes: [node-00]}",
            "chaos[1].params.latency",
            "`slow` needs `latency`",
        ),
        (
            "{at: 1s, fault: errors, nodes: [node-00], params: {probabilty: 0.3}}",
            "chaos[1].params.probabilty",
            "unknown field",
        ),
        (
            "{at: 1s, fault: errors, nodes: [node-00], params: {probability: 3.0}}",
            "chaos[1].params.probability",
            "[0, 1]",
        ),
    ];
    for (bad, field, message) in cases {
        let text = format!(
            "name: t\nworkload: {{shape: {{burst: {{count: 1}}}}}}\nchaos:\n  \
             - {{at: 1s, fault: kill, nodes: [node-00]}}\n  - {bad}\n"
        );
        let Err(profile::ProfileError::Parse(i)) =
            profile::parse(&profile::Source::inline("t.yaml", &text))
        else {
            panic!("{bad}: parsed");
        };
        assert_eq!((i.field.as_str(), i.line), (field, 5), "{bad}: {i}");
        assert!(i.message.contains(message), "{bad}: {i}");
    }
}

const DRILLS: [&str; 5] = [
    "chaos-node-kill",
    "chaos-hang",
    "chaos-flaky",
    "chaos-stale-heartbeat",
    "chaos-restart",
];

fn drill(name: &str) -> Profile {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("profiles/{name}.yaml"));
    match profile::load_and_validate(&path) {
        Ok(p) => p,
        Err(e) => panic!("{name}: {:?}", e.issues()),
    }
}

#[test]
fn drill_profiles_parse_validate_and_resolve() {
    for name in DRILLS {
        let p = drill(name);
        assert_eq!(p.name, name);
        let nodes: Vec<String> = (0..p.cluster.nodes).map(|k| p.cluster.node_id(k)).collect();
        let plan = FaultPlan::resolve(&p.chaos, &nodes, p.seed).unwrap();
        assert!(!plan.is_empty(), "{name} has no fault");
        assert_eq!(p.checks.lost.and_then(|b| b.max), Some(0.0), "{name}");
        assert_eq!(p.checks.duplicated.and_then(|b| b.max), Some(0.0), "{name}");
        let PlacementSection::Embedded(e) = &p.placement else {
            panic!("{name}: drills run the embedded service");
        };
        // Under 90 s: the workload, plus the set audit's wait of one sync, per mode.
        let stampede::profile::Shape::Rate { duration, .. } = p.workload.shape else {
            panic!("{name}: drills use a steady rate");
        };
        let modes = e.accounting.to_vec().len() as u32;
        let budget = (duration + e.sync_interval * 2 + Duration::from_secs(3)) * modes;
        assert!(budget < Duration::from_secs(90), "{name}: {budget:?}");
        assert!(
            plan.span() <= duration,
            "{name}: faults outlast the workload"
        );
    }
}

#[test]
fn drill_specifics() {
    let kill = FaultPlan::resolve(&drill("chaos-node-kill").chaos, &ids(10), 5001).unwrap();
    assert_eq!(kill.faults[0].kind, FaultKind::Kill);
    assert_eq!(kill.faults[0].nodes.len(), 2);
    assert_eq!(kill.faults[0].duration, Some(Duration::from_secs(10)));

    let hang = drill("chaos-hang");
    let PlacementSection::Embedded(e) = &hang.placement else {
        unreachable!()
    };
    assert!(e.create_rpc_timeout.is_none());
    assert_eq!(hang.chaos[0].fault, ChaosFault::Node(FaultKind::Hang));

    let flaky = drill("chaos-flaky");
    let plan = FaultPlan::resolve(&flaky.chaos, &ids(12), flaky.seed).unwrap();
    assert_eq!(plan.faults[0].nodes.len(), 4, "a third of 12");
    assert!(
        matches!(plan.faults[0].kind, FaultKind::Errors { probability, .. } if probability == 0.3),
        "{:?}",
        plan.faults[0].kind
    );

    let stale = drill("chaos-stale-heartbeat");
    let plan = FaultPlan::resolve(&stale.chaos, &ids(10), stale.seed).unwrap();
    assert_eq!(plan.faults[0].kind, FaultKind::FreezeMetrics);
    assert_eq!(plan.faults[0].nodes.len(), 10);
    let modes: Vec<String> = stale
        .checks
        .per_mode
        .keys()
        .map(|m| m.to_string())
        .collect();
    assert_eq!(modes.len(), 2, "{modes:?}");
    assert!(stale.checks.per_mode.values().all(|c| c.cv.is_some()));

    let restart = drill("chaos-restart");
    assert_eq!(restart.chaos[0].fault, ChaosFault::Node(FaultKind::Restart));
}

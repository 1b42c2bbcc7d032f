//! Fault plans resolve deterministically from the seed, name the bad field of a bad
//! step, and every shipped drill profile parses, validates and resolves.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use mock_node::api::{FailureCode, FaultKind};
use stampede::chaos::{FaultPlan, PlanError};
use stampede::profile::{self, ChaosStep, NodeSelector, PlacementSection, Profile};

fn ids(n: usize) -> Vec<String> {
    (0..n).map(|k| format!("node-{k:02}")).collect()
}

fn step(fault: &str, nodes: NodeSelector) -> ChaosStep {
    ChaosStep {
        at: Duration::from_secs(1),
        fault: fault.into(),
        nodes,
        duration: Some(Duration::from_secs(5)),
        params: BTreeMap::new(),
    }
}

#[test]
fn same_seed_same_plan_other_seeds_other_picks() {
    let steps = vec![
        step("kill", NodeSelector::Random { random: 3 }),
        step("exhaust", NodeSelector::Fraction { fraction: 0.25 }),
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
    let one = vec![step("kill", NodeSelector::Random { random: 2 })];
    let mut two = vec![step("hang", NodeSelector::Random { random: 2 })];
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
        step("kill", NodeSelector::Fraction { fraction: 0.01 }),
        step("kill", NodeSelector::Fraction { fraction: 1.0 }),
        step(
            "kill",
            NodeSelector::Ids(vec!["node-07".into(), "node-02".into()]),
        ),
    ];
    let p = FaultPlan::resolve(&steps, &nodes, 1).unwrap();
    assert_eq!(p.faults[0].nodes.len(), 1);
    assert_eq!(p.faults[1].nodes, nodes);
    assert_eq!(p.faults[2].nodes, vec!["node-02", "node-07"]);
}

#[test]
fn params_become_typed_and_restart_has_no_duration() {
    let mut errors = step("errors", NodeSelector::Random { random: 1 });
    errors.params.insert("probability".into(), 0.3.into());
    errors.params.insert("code".into(), "internal".into());
    let mut slow = step("slow", NodeSelector::Random { random: 1 });
    slow.params.insert("delay".into(), "250ms".into());
    let restart = step("restart", NodeSelector::Random { random: 1 });
    let p = FaultPlan::resolve(&[errors, slow, restart], &ids(4), 3).unwrap();
    assert_eq!(p.faults[0].params.probability, Some(0.3));
    assert_eq!(p.faults[0].params.code, Some(FailureCode::Internal));
    assert_eq!(p.faults[1].params.latency, Some(Duration::from_millis(250)));
    assert_eq!(p.faults[2].duration, None);
    assert_eq!(p.span(), Duration::from_secs(6));
}

fn resolve_err(s: ChaosStep) -> PlanError {
    let ok = step("kill", NodeSelector::Random { random: 1 });
    FaultPlan::resolve(&[ok, s], &ids(4), 0).unwrap_err()
}

#[test]
fn bad_steps_name_their_index_and_field() {
    let e = resolve_err(step("explode", NodeSelector::Random { random: 1 }));
    assert_eq!((e.step, e.field.as_str()), (1, "fault"));
    assert!(
        e.to_string()
            .starts_with("chaos[1].fault: unknown fault `explode`"),
        "{e}"
    );

    let e = resolve_err(step(
        "kill",
        NodeSelector::Ids(vec!["node-00".into(), "node-99".into()]),
    ));
    assert_eq!(e.field, "nodes[1]");
    assert!(e.message.contains("node-99"));

    let e = resolve_err(step("kill", NodeSelector::Random { random: 5 }));
    assert_eq!(e.field, "nodes.random");
    let e = resolve_err(step("kill", NodeSelector::Fraction { fraction: 1.5 }));
    assert_eq!(e.field, "nodes.fraction");
    let e = resolve_err(step("slow", NodeSelector::Random { random: 1 }));
    assert_eq!(e.field, "params.latency");
    let mut typo = step("errors", NodeSelector::Random { random: 1 });
    typo.params.insert("probabilty".into(), 0.3.into());
    assert_eq!(resolve_err(typo).field, "params.probabilty");
    let mut bad = step("errors", NodeSelector::Random { random: 1 });
    bad.params.insert("probability".into(), 3.0.into());
    assert_eq!(resolve_err(bad).field, "params.probability");
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
        // Under 90 s: the workload, plus the checker's wait of one sync, per mode.
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
    assert_eq!(hang.chaos[0].fault, "hang");

    let flaky = drill("chaos-flaky");
    let plan = FaultPlan::resolve(&flaky.chaos, &ids(12), flaky.seed).unwrap();
    assert_eq!(plan.faults[0].nodes.len(), 4, "a third of 12");
    assert_eq!(plan.faults[0].params.probability, Some(0.3));

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
    assert_eq!(restart.chaos[0].fault, "restart");
}

//! The sans-IO node model alone: no sockets, time passed in.

use std::time::Duration;

use mock_node::config::{LatencyDist, NodeSpec, VcpuRange};
use mock_node::model::{CreateRejection, CreateRequest, NodeModel};

fn ms(v: u64) -> Duration {
    Duration::from_millis(v)
}

fn req(id: &str, vcpu: i64) -> CreateRequest {
    CreateRequest {
        sandbox_id: id.into(),
        vcpu,
        ram_mb: 512,
        ..Default::default()
    }
}

fn node(edit: impl FnOnce(&mut NodeSpec)) -> NodeModel {
    let mut spec = NodeSpec::default();
    edit(&mut spec);
    NodeModel::new("node-00".into(), spec, 7)
}

#[test]
fn begin_finish_abort_and_counters() {
    let mut m = node(|_| {});
    m.begin_create(req("a", 1), ms(0)).expect("admit");
    assert_eq!(m.starting_count(), 1);
    assert_eq!(
        m.metrics(ms(1)).sandboxes_running,
        0,
        "starting is not running"
    );
    m.finish_create("a", ms(2)).expect("finish");
    m.begin_create(req("b", 1), ms(3)).expect("admit");
    m.abort_create("b", ms(4));
    assert!(
        m.finish_create("b", ms(5)).is_err(),
        "aborted create cannot finish"
    );
    let c = m.counters();
    assert_eq!((c.creates_ok, c.creates_failed), (1, 2));
    assert_eq!(m.delete("a", ms(6)).expect("delete").sandbox_id, "a");
    assert!(m.delete("a", ms(7)).is_err());
    assert_eq!(m.counters().deletes_ok, 1);
}

#[test]
fn max_starting_zero_is_unlimited_and_starting_counts_for_overcommit() {
    let mut m = node(|s| {
        s.max_starting = 0;
        s.cpu_count = 2;
        s.overcommit = 2.0;
    });
    for i in 0..4 {
        m.begin_create(req(&format!("s{i}"), 1), ms(0))
            .expect("admit");
    }
    let e = m
        .begin_create(req("s4", 1), ms(0))
        .expect_err("4 starting vCPU fill 2 * 2");
    assert!(matches!(e, CreateRejection::Overcommit { .. }), "{e:?}");
    assert_eq!(m.counters().creates_rejected.get("overcommit"), Some(&1));
}

/// E2B's orchestrator only reports `end_time` (`packages/orchestrator/pkg/server/sandboxes.go`);
/// the API's evictor deletes the sandbox. A node that dropped it by itself would hide
/// evictor bugs and leaks.
#[test]
fn a_sandbox_past_its_end_time_stays_until_deleted() {
    let mut m = node(|_| {});
    let mut r = req("a", 1);
    r.end_time = Some(ms(100));
    m.begin_create(r, ms(0)).expect("admit");
    m.finish_create("a", ms(1)).expect("finish");
    let later = Duration::from_secs(3600);
    let listed = m.list(later);
    assert_eq!(listed.len(), 1, "still running an hour past its end time");
    assert_eq!(listed[0].end, Some(ms(100)), "end time reported as sent");
    assert_eq!(m.truth(later).sandboxes_running, 1);
    m.update_end_time("a", None, later).expect("still there");
    m.delete("a", later).expect("deleted");
    assert!(m.list(later).is_empty());
}

/// Host CPU% is resampled on E2B's 10 s `hostPollInterval` (`pkg/metrics/host.go`),
/// while the allocated vCPU in the same ServiceInfo stays live (`service_info.go`).
#[test]
fn host_cpu_percent_is_sampled_per_period_and_allocation_stays_live() {
    let mut m = node(|s| {
        s.cpu_count = 4;
        s.busy_fraction = 1.0;
        s.idle_cpu_percent = VcpuRange { min: 0, max: 0 };
        s.cpu_percent_period = Duration::from_secs(10);
    });
    // The node's ticks run at a seeded phase: find the first tick after 1 s.
    let before = m.metrics(ms(0)).cpu_percent;
    assert_eq!(before, 0);
    m.begin_create(req("a", 1), ms(1)).expect("admit");
    m.finish_create("a", ms(1)).expect("finish");
    let now = m.metrics(ms(2));
    assert_eq!(now.allocated_vcpu, 1, "allocation is live");
    let mut seen = Vec::new();
    for t in (2..=12_000).step_by(1) {
        seen.push(m.metrics(ms(t)).cpu_percent);
    }
    // One busy vCPU of 4 is 25 %: reached once, at a tick, and kept from then on.
    let first = seen
        .iter()
        .position(|&p| p == 25)
        .expect("a tick within 10 s");
    assert!(seen[first..].iter().all(|&p| p == 25));
    assert!(seen[..first].iter().all(|&p| p == 0));
    let mut live = node(|s| {
        s.cpu_count = 4;
        s.busy_fraction = 1.0;
        s.idle_cpu_percent = VcpuRange { min: 0, max: 0 };
        s.cpu_percent_period = Duration::ZERO;
    });
    live.begin_create(req("a", 1), ms(1)).expect("admit");
    live.finish_create("a", ms(1)).expect("finish");
    assert_eq!(live.metrics(ms(2)).cpu_percent, 25, "period 0: live");
}

/// A fleet draws its nodes' background host load without replacement, so default nodes
/// never tie on `metric_cpu_percent`.
#[test]
fn fleet_idle_loads_are_distinct_while_the_range_allows() {
    use mock_node::config::ClusterConfig;
    for seed in 0..200 {
        let c = ClusterConfig::default();
        let mut v = c.idle_cpu_percents(seed);
        assert!(v.iter().all(|p| (1..=20).contains(p)));
        v.sort_unstable();
        v.dedup();
        assert_eq!(v.len(), c.nodes, "seed {seed}");
    }
    // More nodes than values: drawn independently, still in range.
    let c = ClusterConfig {
        nodes: 50,
        ..Default::default()
    };
    assert!(c.idle_cpu_percents(1).iter().all(|p| (1..=20).contains(p)));
}

#[test]
fn metrics_lag_refreshes_once_per_period() {
    let mut m = node(|s| s.metrics_lag = ms(100));
    assert_eq!(m.metrics(ms(10)).sandboxes_running, 0);
    m.begin_create(req("a", 2), ms(20)).expect("admit");
    m.finish_create("a", ms(21)).expect("finish");
    assert_eq!(m.metrics(ms(99)).sandboxes_running, 0, "same period: stale");
    assert_eq!(m.truth(ms(99)).sandboxes_running, 1, "truth is live");
    let fresh = m.metrics(ms(100));
    assert_eq!((fresh.sandboxes_running, fresh.allocated_vcpu), (1, 2));
}

#[test]
fn freeze_and_restart() {
    let mut m = node(|s| s.baseline_vcpu = VcpuRange { min: 1, max: 3 });
    let base = m.baseline_vcpu();
    assert!((1..=3).contains(&base));
    m.begin_create(req("a", 1), ms(0)).expect("admit");
    m.finish_create("a", ms(0)).expect("finish");
    m.freeze_metrics(ms(1));
    m.begin_create(req("b", 1), ms(2)).expect("admit");
    m.finish_create("b", ms(2)).expect("finish");
    assert_eq!(m.metrics(ms(3)).allocated_vcpu, base + 1);
    m.unfreeze_metrics();
    assert_eq!(m.metrics(ms(3)).allocated_vcpu, base + 2);
    let sid = m.service_id().to_string();
    m.begin_create(req("c", 1), ms(4)).expect("admit");
    m.restart(ms(5));
    assert_ne!(m.service_id(), sid);
    assert_eq!((m.list(ms(5)).len(), m.starting_count()), (0, 0));
    assert!(
        m.finish_create("c", ms(6)).is_err(),
        "create lost in the crash"
    );
    assert_eq!(m.metrics(ms(6)).allocated_vcpu, base, "baseline survives");
}

#[test]
fn same_seed_same_draws() {
    let spec = NodeSpec {
        create_latency: LatencyDist::Exponential { mean: ms(5) },
        baseline_vcpu: VcpuRange { min: 0, max: 100 },
        ..Default::default()
    };
    let mut a = NodeModel::new("n".into(), spec.clone(), 99);
    let mut b = NodeModel::new("n".into(), spec.clone(), 99);
    let mut c = NodeModel::new("n".into(), spec, 100);
    assert_eq!(a.service_id(), b.service_id());
    assert_ne!(a.service_id(), c.service_id());
    let da: Vec<_> = (0..50).map(|_| a.sample_create_latency()).collect();
    let db: Vec<_> = (0..50).map(|_| b.sample_create_latency()).collect();
    let dc: Vec<_> = (0..50).map(|_| c.sample_create_latency()).collect();
    assert_eq!(da, db);
    assert_ne!(da, dc);
}

#[test]
fn node_seeds_differ_per_node_and_are_stable() {
    use mock_node::fleet::node_seed;
    assert_eq!(node_seed(1, 0), node_seed(1, 0));
    assert_ne!(node_seed(1, 0), node_seed(1, 1));
    assert_ne!(node_seed(1, 0), node_seed(2, 0));
}

#[test]
fn memory_accounting_saturates_instead_of_wrapping() {
    // 2 * (2^63 - 1) MiB + 256 + 258 MiB wrapped to 512 MiB. On a node big
    // enough to admit such sandboxes the total must saturate, never wrap.
    let mut m = node(|s| s.memory_mib = u64::MAX);
    for (id, ram_mb) in [("h1", i64::MAX), ("h2", i64::MAX), ("s1", 256), ("s2", 258)] {
        let r = CreateRequest {
            ram_mb,
            ..req(id, 1)
        };
        m.begin_create(r, ms(0)).expect("admit");
        m.finish_create(id, ms(0)).expect("finish");
    }
    let t = m.truth(ms(1));
    assert_eq!(t.memory_allocated_bytes, u64::MAX, "saturated");
    assert!(t.memory_used_bytes <= t.memory_allocated_bytes);
}

#[test]
fn sandbox_larger_than_the_node_is_invalid_argument() {
    let mut m = node(|s| {
        s.cpu_count = 4;
        s.memory_mib = 1024;
    });
    for (vcpu, ram_mb) in [(5, 1), (1, 1025), (1, i64::MAX), (i64::MAX, 1)] {
        let r = CreateRequest {
            ram_mb,
            ..req("big", vcpu)
        };
        let e = m.begin_create(r, ms(0)).expect_err("larger than the node");
        assert!(matches!(e, CreateRejection::InvalidArgument(_)), "{e:?}");
    }
    let r = CreateRequest {
        ram_mb: 1024,
        ..req("whole", 4)
    };
    m.begin_create(r, ms(0)).expect("exactly the node");
}

/// `cpu_percent: host` is a real orchestrator's gopsutil figure (aggregate host percent,
/// 0-100; e2b-dev/infra `packages/orchestrator/pkg/metrics/host.go`, sent as
/// `MetricCpuPercent` by `pkg/service/service_info.go`); `per_sandbox` is E2B's placement
/// benchmark LaggyNode (`placement_benchmark_test.go`: `ActualCPUUsage * 100` summed over
/// the node's sandboxes, the baseline allocation not counted).
#[test]
fn cpu_percent_models_host_and_per_sandbox() {
    use mock_node::config::CpuPercentModel;
    let with = |model: CpuPercentModel| {
        let mut m = node(|s| {
            s.cpu_count = 8;
            s.busy_fraction = 1.0;
            s.baseline_vcpu = VcpuRange { min: 2, max: 2 };
            s.idle_cpu_percent = VcpuRange { min: 0, max: 0 };
            s.cpu_percent_period = Duration::ZERO;
            s.cpu_percent = model;
        });
        for id in ["a", "b", "c"] {
            m.begin_create(req(id, 1), ms(0)).expect("admit");
            m.finish_create(id, ms(1)).expect("finish");
        }
        m.metrics(ms(2)).cpu_percent
    };
    // (2 baseline + 3 sandboxes) busy of 8 CPUs = 62.5 %.
    assert_eq!(with(CpuPercentModel::Host), 63);
    // 3 fully busy sandbox vCPUs x 100; the baseline is not a sandbox.
    assert_eq!(with(CpuPercentModel::PerSandbox), 300);
    // The host figure never passes 100, however overcommitted the node is.
    let mut full = node(|s| {
        s.cpu_count = 2;
        s.busy_fraction = 1.0;
        s.cpu_percent_period = Duration::ZERO;
    });
    for id in ["a", "b", "c", "d", "e"] {
        full.begin_create(req(id, 1), ms(0)).expect("admit");
        full.finish_create(id, ms(1)).expect("finish");
    }
    assert_eq!(full.metrics(ms(2)).cpu_percent, 100);
}

/// A real orchestrator refuses only at max-sandboxes-per-node (200) and
/// max-starting-instances-per-node (3), with E2B's messages
/// (`packages/orchestrator/pkg/server/sandboxes.go`, `packages/shared/pkg/featureflags/flags.go`);
/// it has no vCPU overcommit refusal.
#[test]
fn defaults_follow_a_real_orchestrator() {
    let spec = NodeSpec::default();
    assert_eq!((spec.max_sandboxes, spec.max_starting), (200, 3));
    assert_eq!(spec.overcommit, 0.0, "no vCPU refusal by default");
    let mut m = node(|s| s.cpu_count = 1);
    // 3 starting at once on a 1-CPU node: no vCPU rule refuses them.
    for id in ["a", "b", "c"] {
        m.begin_create(req(id, 1), ms(0)).expect("admit");
    }
    let e = m
        .begin_create(req("d", 1), ms(0))
        .expect_err("fourth starting");
    assert_eq!(
        e.to_string(),
        "too many sandboxes starting on this node, please retry"
    );
    assert!(e.is_resource_exhausted());
    for id in ["a", "b", "c"] {
        m.finish_create(id, ms(1)).expect("finish");
    }
    let mut m = node(|s| {
        s.max_sandboxes = 2;
        s.max_starting = 0;
    });
    for id in ["a", "b"] {
        m.begin_create(req(id, 1), ms(0)).expect("admit");
        m.finish_create(id, ms(1)).expect("finish");
    }
    let e = m.begin_create(req("c", 1), ms(2)).expect_err("full");
    assert_eq!(
        e.to_string(),
        "max number of running sandboxes on node reached (2), please retry"
    );
}

/// Creates with the same template, team and execution ids share one copy of them in
/// the model; `List` still echoes each sandbox's own, whatever the order of creates.
#[test]
fn list_echoes_each_sandboxs_own_ids_when_creates_alternate() {
    let mut m = node(|_| {});
    let labelled = |id: &str, team: &str| CreateRequest {
        template_id: format!("tpl-{team}").as_str().into(),
        team_id: team.into(),
        execution_id: format!("exec-{id}").as_str().into(),
        ..req(id, 1)
    };
    for (id, team) in [("a", "x"), ("b", "y"), ("c", "x"), ("d", "x")] {
        m.begin_create(labelled(id, team), ms(0)).expect("admit");
        m.finish_create(id, ms(1)).expect("finish");
    }
    let listed: Vec<(String, String, String, String)> = m
        .list(ms(2))
        .into_iter()
        .map(|s| {
            let text = |i: &stampede_id::Id| i.to_string();
            (
                text(&s.sandbox_id),
                text(&s.template_id),
                text(&s.team_id),
                text(&s.execution_id),
            )
        })
        .collect();
    let want = |id: &str, team: &str| {
        (
            id.to_string(),
            format!("tpl-{team}"),
            team.to_string(),
            format!("exec-{id}"),
        )
    };
    assert_eq!(
        listed,
        vec![
            want("a", "x"),
            want("b", "y"),
            want("c", "x"),
            want("d", "x")
        ]
    );
    let b = m.delete("b", ms(3)).expect("delete");
    assert_eq!(
        (
            b.template_id.as_str(),
            b.team_id.as_str(),
            b.execution_id.as_str()
        ),
        ("tpl-y", "y", "exec-b")
    );
}

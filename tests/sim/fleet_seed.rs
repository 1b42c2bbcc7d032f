//! One profile, one fleet: `mock-node --config PROFILE` and the simulator derive the
//! fleet seed by the same rule (`cluster.seed`, else the profile's `seed`) and build the
//! same nodes from it.

use std::time::Duration;

use stampede::placement::AccountingMode;
use stampede::profile::load_and_validate;
use stampede::sim::{simulate_profile, SimSetup};
use stampede_proto::info_service_client::InfoServiceClient;

use crate::support::staging::{spawn_ready, stampede, tempdir};

/// Baselines and idle loads drawn from wide ranges, so that another seed builds
/// another fleet; `per_sandbox` CPU makes an idle node's `metric_cpu_percent` its idle
/// load exactly. No `cluster.seed`: the profile's `seed` is the fleet's.
const PROFILE: &str = "name: fleet-seed
seed: 500
cluster:
  nodes: 6
  node:
    cpu_count: 64
    baseline_vcpu: {min: 0, max: 40}
    idle_cpu_percent: {min: 1, max: 60}
    cpu_percent: per_sandbox
placement:
  embedded: {accounting: [reported]}
workload:
  shape:
    burst: {count: 10}
  sandbox: {template: base, vcpu: 1, ram_mb: 256, timeout: 300s}
";

#[test]
fn mock_node_config_and_sim_of_one_profile_build_the_same_fleet() {
    let dir = tempdir("fleet-seed");
    let path = dir.join("profile.yaml");
    std::fs::write(&path, PROFILE).expect("profile written");

    let profile = load_and_validate(&path).expect("valid profile");
    let setup = SimSetup::from_profile(&profile, AccountingMode::Reported).expect("setup");
    let simulated: Vec<(String, u32, u32)> = setup
        .node_models()
        .iter()
        .map(|m| (m.id().to_string(), m.baseline_vcpu(), m.idle_cpu_percent()))
        .collect();
    let report = simulate_profile(&profile).expect("simulated");
    assert_eq!(
        report.fleet_seed,
        Some(500),
        "the simulated report's fleet seed"
    );

    let mut cmd = stampede();
    cmd.args(["mock-node", "--base-port", "0", "--config"])
        .arg(&path);
    let (_fleet, line) = spawn_ready(cmd, "mock-node ready");
    let field = |key: &str| {
        line.split_whitespace()
            .find_map(|w| w.strip_prefix(key))
            .unwrap_or_else(|| panic!("{key} in the ready line: {line}"))
            .to_string()
    };
    assert_eq!(field("fleet_seed="), "500", "ready line: {line}");
    let admin = field("admin=");

    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let served: Vec<(String, u32, u32)> = rt.block_on(async {
        let http = reqwest::Client::new();
        let nodes = stampede::mock_admin::MockAdmin::new(http, &admin, None)
            .nodes()
            .await
            .expect("GET /nodes");
        assert_eq!(
            nodes.fleet_seed,
            Some(500),
            "GET /nodes names the fleet seed"
        );
        let mut out = Vec::new();
        for n in nodes.nodes {
            let endpoint =
                tonic::transport::Endpoint::from_shared(format!("http://{}", n.grpc_addr))
                    .expect("endpoint")
                    .connect_timeout(Duration::from_secs(5))
                    .timeout(Duration::from_secs(5));
            let mut info = InfoServiceClient::new(endpoint.connect().await.expect("connect"));
            let answer = info
                .service_info(())
                .await
                .expect("ServiceInfo")
                .into_inner();
            let baseline = u32::try_from(n.baseline_vcpu).expect("baseline fits u32");
            out.push((n.id, baseline, answer.metric_cpu_percent));
        }
        out
    });
    assert_eq!(
        served, simulated,
        "(node, baseline vCPU, idle CPU %) on the wire vs simulated"
    );
    // The seed matters: another one builds another fleet, so equality above is no accident.
    let mut other = setup.clone();
    other.cluster_seed = 0;
    let other: Vec<(String, u32, u32)> = other
        .node_models()
        .iter()
        .map(|m| (m.id().to_string(), m.baseline_vcpu(), m.idle_cpu_percent()))
        .collect();
    assert_ne!(other, simulated, "seed 0 builds another fleet");
    let _ = std::fs::remove_dir_all(&dir);
}

//! YAML config errors, flag resolution, and fleet addressing.

use std::net::{IpAddr, Ipv4Addr};

use clap::Parser;
use mock_node::cli::MockNodeArgs;
use mock_node::fleet::{self, Addressing, FleetOptions};
use mock_node::{parse_cluster, ConfigFileError};

#[derive(Parser)]
struct Cli {
    #[command(flatten)]
    args: MockNodeArgs,
}

fn parse_err(yaml: &str) -> ConfigFileError {
    parse_cluster(yaml, "f.yaml").expect_err("must be refused")
}

#[test]
fn type_errors_name_file_line_column_and_field() {
    let e = parse_err("cluster:\n  nodes: 3\n  node:\n    cpu_count: lots\n");
    let msg = e.to_string();
    assert!(
        msg.starts_with("f.yaml:4:16: cluster.node.cpu_count: "),
        "{msg}"
    );
    let e = parse_err("nodes: 2\nnode:\n  max_startng: 3\n");
    let msg = e.to_string();
    assert!(
        msg.starts_with("f.yaml:3:3: node.max_startng: unknown field"),
        "{msg}"
    );
    let e = parse_err("nodes: [1\n");
    assert!(matches!(e, ConfigFileError::Parse { line: 2, .. }), "{e:?}");
}

#[test]
fn semantic_errors_name_the_field() {
    let e = parse_err("cluster:\n  nodes: 2\n  node:\n    busy_fraction: 3.0\n");
    assert!(e.to_string().contains("cluster.node.busy_fraction"), "{e}");
    let e = parse_err("nodes: 2\noverrides:\n  node-09:\n    cpu_count: 4\n");
    assert!(e.to_string().contains("overrides.node-09"), "{e}");
}

#[test]
fn profile_shaped_and_bare_files_both_load() {
    let c = parse_cluster(
        "seed: 5\ncluster:\n  nodes: 4\n  node:\n    cpu_count: 8\n",
        "p.yaml",
    )
    .expect("profile");
    assert_eq!((c.nodes, c.node.cpu_count), (4, 8));
    let c = parse_cluster(
        "nodes: 2\nnode:\n  create_latency: {dist: uniform, min: 0ms, max: 2ms}\n",
        "c.yaml",
    )
    .expect("bare");
    assert_eq!(c.nodes, 2);
}

#[test]
fn flags_override_yaml_and_single_node_mode_uses_e2b_names() {
    let dir = std::env::temp_dir().join(format!("mock-node-cfg-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    let path = dir.join("c.yaml");
    std::fs::write(
        &path,
        "nodes: 4\nnode:\n  cpu_count: 8\n  max_starting: 5\n",
    )
    .expect("write");
    let cli = Cli::parse_from([
        "mock-node",
        "--config",
        path.to_str().expect("utf8"),
        "--cpu-count",
        "12",
        "--base-port",
        "0",
    ]);
    let (cfg, opts) = cli.args.resolve().expect("resolves");
    assert_eq!(
        (cfg.nodes, cfg.node.cpu_count, cfg.node.max_starting),
        (4, 12, 5)
    );
    assert_eq!(
        opts.addressing,
        Addressing::Ports {
            ip: IpAddr::V4(Ipv4Addr::LOCALHOST),
            base_port: 0
        }
    );
    let cli = Cli::parse_from([
        "mock-node",
        "--node-id",
        "orch-a",
        "--labels",
        "a,b",
        "--port",
        "7001",
    ]);
    let (cfg, opts) = cli.args.resolve().expect("resolves");
    assert_eq!(cfg.nodes, 1);
    assert_eq!(opts.node_id.as_deref(), Some("orch-a"));
    assert_eq!(opts.labels, vec!["a", "b"]);
    assert!(matches!(
        opts.addressing,
        Addressing::Ports {
            base_port: 7001,
            ..
        }
    ));
    let _ = std::fs::remove_dir_all(dir);
}

#[tokio::test]
async fn loopback_ips_give_one_ip_per_node() {
    let cfg = mock_node::config::ClusterConfig {
        nodes: 3,
        ..Default::default()
    };
    let opts = FleetOptions {
        addressing: Addressing::LoopbackIps { port: 0 },
        ..Default::default()
    };
    let f = fleet::start(cfg, opts).await.expect("starts");
    let ips: Vec<String> = f.nodes().iter().map(|n| n.addr.ip().to_string()).collect();
    assert_eq!(ips, vec!["127.0.1.1", "127.0.1.2", "127.0.1.3"]);
    let line = mock_node::cli::ready_line(&f);
    assert!(
        line.starts_with("mock-node ready admin=http://127.0.0.1:"),
        "{line}"
    );
    assert!(line.contains("node-02@127.0.1.3:"), "{line}");
    f.shutdown().await;
}

#[tokio::test]
async fn shutdown_frees_consecutive_ports() {
    // Find a free block by binding port 0 and using the ports after it.
    let probe = std::net::TcpListener::bind("127.0.0.1:0").expect("probe");
    let base = probe.local_addr().expect("addr").port().saturating_add(1);
    drop(probe);
    let cfg = mock_node::config::ClusterConfig {
        nodes: 2,
        ..Default::default()
    };
    let opts = FleetOptions {
        addressing: Addressing::Ports {
            ip: IpAddr::V4(Ipv4Addr::LOCALHOST),
            base_port: base,
        },
        ..Default::default()
    };
    let Ok(f) = fleet::start(cfg.clone(), opts.clone()).await else {
        return; // someone else holds a port of the block: nothing to check here
    };
    let ports: Vec<u16> = f.nodes().iter().map(|n| n.addr.port()).collect();
    assert_eq!(ports, vec![base, base + 1]);
    f.shutdown().await;
    let again = fleet::start(cfg, opts).await.expect("ports were freed");
    again.shutdown().await;
}

#[tokio::test]
async fn same_seed_same_fleet_different_seed_different_fleet() {
    let cfg = |seed| mock_node::config::ClusterConfig {
        nodes: 4,
        seed: Some(seed),
        node: mock_node::config::NodeSpec {
            baseline_vcpu: mock_node::config::VcpuRange { min: 0, max: 1000 },
            ..Default::default()
        },
        ..Default::default()
    };
    let mut seen = Vec::new();
    for seed in [1, 1, 2] {
        let f = fleet::start(cfg(seed), FleetOptions::default())
            .await
            .expect("starts");
        let t: Vec<(String, u64)> = f
            .truth()
            .nodes
            .into_iter()
            .map(|n| (n.service_id, n.baseline_vcpu))
            .collect();
        f.shutdown().await;
        seen.push(t);
    }
    assert_eq!(seen[0], seen[1]);
    assert_ne!(seen[0], seen[2]);
    assert_ne!(seen[0][0], seen[0][1], "nodes draw differently");
}

/// Error codes are kebab-case like fault kinds; a snake_case one still loads, with a
/// deprecation warning on stderr naming the new spelling.
#[test]
fn snake_case_error_code_loads_with_a_deprecation_warning() {
    let (read, ready, stderr) = start_with_a_snake_case_code("codes");
    assert!(
        read.is_ok() && ready.starts_with("mock-node ready"),
        "{ready} {stderr}"
    );
    assert!(
        stderr.contains("`resource_exhausted` is deprecated")
            && stderr.contains("`resource-exhausted`"),
        "{stderr}"
    );
}

/// mock-node's log lines carried ANSI colour codes into files and CI logs. With stderr
/// not a terminal, a logged line (the deprecation warning) holds no escape byte.
#[test]
fn logs_to_a_file_carry_no_colour_codes() {
    let (read, ready, stderr) = start_with_a_snake_case_code("plain");
    assert!(
        read.is_ok() && stderr.contains("is deprecated"),
        "{ready} {stderr}"
    );
    assert!(!stderr.contains('\u{1b}'), "{stderr:?}");
}

/// Starts mock-node with a config holding a snake_case error code (which logs a
/// deprecation warning), reads its ready line, stops it: (the read's result, the ready
/// line, stderr).
fn start_with_a_snake_case_code(tag: &str) -> (std::io::Result<usize>, String, String) {
    use std::io::BufRead;
    let dir = std::env::temp_dir().join(format!("mock-node-{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let file = dir.join("cluster.yaml");
    std::fs::write(
        &file,
        "nodes: 1\nnode:\n  failures: [{rpc: create, probability: 0.5, code: resource_exhausted}]\n",
    )
    .expect("write");
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_mock-node"))
        .arg("--config")
        .arg(&file)
        .env_remove("MOCK_NODE_ADMIN_TOKEN")
        .env_remove("RUST_LOG")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("mock-node runs");
    let mut ready = String::new();
    let read = std::io::BufReader::new(child.stdout.take().expect("stdout")).read_line(&mut ready);
    let _ = child.kill();
    let out = child.wait_with_output().expect("exits");
    let _ = std::fs::remove_dir_all(&dir);
    let stderr = String::from_utf8_lossy(&out.stderr);
    (read, ready, stderr.into_owned())
}

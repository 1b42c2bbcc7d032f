//! Prometheus text exposition of the fleet's ground truth, one series per node.

use std::fmt::Write;

use crate::api::NodesResponse;

/// Renders every node's figures as Prometheus text format 0.0.4.
pub fn render(truth: &NodesResponse) -> String {
    let mut out = String::new();
    type Getter = fn(&crate::api::NodeTruth) -> u64;
    let gauges: [(&str, &str, &str, Getter); 9] = [
        ("mock_node_sandboxes", "gauge", "Running sandboxes.", |n| {
            n.sandbox_count
        }),
        (
            "mock_node_allocated_vcpu",
            "gauge",
            "Allocated vCPU (baseline + sandboxes).",
            |n| n.allocated_vcpu,
        ),
        (
            "mock_node_allocated_memory_mib",
            "gauge",
            "Memory of running sandboxes, MiB.",
            |n| n.allocated_memory_mib,
        ),
        (
            "mock_node_cpus",
            "gauge",
            "vCPUs of the node (metric_cpu_count).",
            |n| u64::from(n.cpu_count),
        ),
        ("mock_node_starting", "gauge", "Creates in progress.", |n| {
            n.starting
        }),
        (
            "mock_node_creates_ok_total",
            "counter",
            "Creates that stored a sandbox.",
            |n| n.creates_ok,
        ),
        (
            "mock_node_creates_failed_total",
            "counter",
            "Creates that failed.",
            |n| n.creates_failed,
        ),
        (
            "mock_node_deletes_ok_total",
            "counter",
            "Deletes that removed a sandbox.",
            |n| n.deletes_ok,
        ),
        (
            "mock_node_restarts_total",
            "counter",
            "Node restarts.",
            |n| n.restarts,
        ),
    ];
    for (name, kind, help, get) in gauges {
        let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}");
        for n in &truth.nodes {
            let _ = writeln!(out, "{name}{{node=\"{}\"}} {}", n.id, get(n));
        }
    }
    let name = "mock_node_creates_rejected_total";
    let _ = writeln!(
        out,
        "# HELP {name} Creates refused, by reason.\n# TYPE {name} counter"
    );
    for n in &truth.nodes {
        for (reason, v) in &n.creates_rejected {
            let _ = writeln!(out, "{name}{{node=\"{}\",reason=\"{reason}\"}} {v}", n.id);
        }
    }
    let name = "mock_node_up";
    let _ = writeln!(
        out,
        "# HELP {name} 1 unless a kill fault holds the node down.\n# TYPE {name} gauge"
    );
    for n in &truth.nodes {
        let up = u8::from(n.status != "killed");
        let _ = writeln!(
            out,
            "{name}{{node=\"{}\",status=\"{}\"}} {up}",
            n.id, n.status
        );
    }
    out
}

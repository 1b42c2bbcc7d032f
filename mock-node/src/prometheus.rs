//! Prometheus text exposition (format 0.0.4) of the fleet's ground truth, one series
//! per node, written with the project's one Prometheus line writer (`stampede-http-kit`).
//!
//! Label values are escaped as the text format requires (backslash, double quote and
//! line feed), so a node id such as `edge"node\1` cannot break the exposition. A node's
//! status is an enum-style set (`mock_node_status{node, status}`, 1 for the current
//! status and 0 for the others) beside `mock_node_up{node}`, so that no series changes
//! identity when a status changes.
//!
//! The `prometheus-client` crate was weighed: its registry holds live metric objects,
//! while these figures are a snapshot computed at each scrape; a custom collector would
//! be more code than this writer.

use stampede_http_kit::{write_header, write_sample};

use crate::api::NodesResponse;
use stampede_node_model::snapshot::ServiceStatus;

/// The status of a node whose listener a kill fault holds closed.
const KILLED: &str = "killed";

/// Renders every node's figures as Prometheus text format 0.0.4.
pub(crate) fn render(truth: &NodesResponse) -> String {
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
        write_header(&mut out, name, kind, help);
        for n in &truth.nodes {
            write_sample(&mut out, name, &[("node", &n.id)], get(n));
        }
    }
    let name = "mock_node_creates_rejected_total";
    write_header(&mut out, name, "counter", "Creates refused, by reason.");
    for n in &truth.nodes {
        for (reason, v) in &n.creates_rejected {
            write_sample(&mut out, name, &[("node", &n.id), ("reason", reason)], v);
        }
    }
    let name = "mock_node_up";
    write_header(
        &mut out,
        name,
        "gauge",
        "1 unless a kill fault holds the node down.",
    );
    for n in &truth.nodes {
        write_sample(
            &mut out,
            name,
            &[("node", &n.id)],
            u8::from(n.status != KILLED),
        );
    }
    let name = "mock_node_status";
    write_header(
        &mut out,
        name,
        "gauge",
        "1 for the node's current status (as ServiceInfo reports it, or killed), 0 for the others.",
    );
    let statuses = ServiceStatus::ALL.map(ServiceStatus::as_str);
    for n in &truth.nodes {
        for status in statuses.iter().copied().chain([KILLED]) {
            let now = u8::from(n.status == status);
            write_sample(&mut out, name, &[("node", &n.id), ("status", status)], now);
        }
    }
    out
}

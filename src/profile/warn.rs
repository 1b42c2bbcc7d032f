//! Warnings: a profile that runs, but not as its author likely meant. `stampede
//! validate` prints them; they never refuse a profile.

use stampede_node_model::config::{CpuPercentModel, NodeSpec};

use super::issue::ProfileIssue;
use super::load::Source;
use super::locate::Locator;
use super::types::{PlacementSection, Profile};

/// Every warning of `profile`, located in `source`.
pub fn warnings(profile: &Profile, source: &Source) -> Vec<ProfileIssue> {
    let mut found: Vec<String> = Vec::new();
    // Another fleet's nodes are not ours to model.
    if let PlacementSection::Embedded(_) = profile.placement {
        let c = &profile.cluster;
        if idle_above_host_cap(&c.node) {
            found.push("cluster.node.idle_cpu_percent".into());
        }
        for (id, o) in &c.overrides {
            let touched = o.idle_cpu_percent.is_some() || o.cpu_percent.is_some();
            if touched && idle_above_host_cap(&o.apply(&c.node)) {
                found.push(format!("cluster.overrides.{id}.idle_cpu_percent"));
            }
        }
    }
    let locator = Locator::new(&source.text);
    found
        .iter()
        .map(|field| source.issue_at(&locator, field, IDLE_ABOVE_HOST_CAP))
        .collect()
}

/// Why an `idle_cpu_percent` above 100 under `cpu_percent: host` is worth a warning.
pub const IDLE_ABOVE_HOST_CAP: &str = "above 100 under `cpu_percent: host`: a node reports \
     at most 100 (the host's whole CPU), so every node drawing more reports 100 and \
     Best-of-K ties on usage; lower it, or use `cpu_percent: per_sandbox`";

/// A spec whose idle load can exceed the host figure's cap of 100.
fn idle_above_host_cap(spec: &NodeSpec) -> bool {
    spec.cpu_percent == CpuPercentModel::Host && spec.idle_cpu_percent.max > 100
}

//! The placement services' per-node create counters read at a fault's two edges.
//!
//! The periodic sampler reads `GET /nodes` every `collect.interval`, so a window built
//! from its samples starts at the last sample *before* the fault: creates that landed on
//! the node just before it was killed fall inside it. Reading the counters right after
//! the fault is in force and right before its heal is sent brackets the window exactly.
//! One race is left, and it is bounded: a create already on its way when the fault took
//! hold may still be answered afterwards. E2B's `sandboxStartingCount` (read in the same
//! response as the counters, under the same lock in our service) says how many those are.

use serde::{Deserialize, Serialize};

use crate::api_key::ApiKey;
use crate::collect::fetch_api_nodes;

/// Create RPCs the placement services had sent to a fault's nodes at one instant,
/// summed over services and nodes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct EdgeCalls {
    /// Creates the nodes answered with success (`createSuccesses`).
    pub ok: u64,
    /// Creates that failed on the nodes (`createFails`).
    pub failed: u64,
    /// Creates on their way to the nodes, not answered yet (`sandboxStartingCount`).
    pub starting: u64,
}

impl EdgeCalls {
    /// Creates answered, either way.
    pub fn answered(&self) -> u64 {
        self.ok + self.failed
    }
}

/// Reads [`EdgeCalls`] from the placement services' `GET /nodes`.
#[derive(Debug, Clone)]
pub struct CallProbe {
    client: reqwest::Client,
    services: Vec<String>,
    admin_token: Option<ApiKey>,
}

impl CallProbe {
    /// A probe of `services` (base URLs), sending `admin_token` when given.
    pub fn new(services: Vec<String>, admin_token: Option<ApiKey>) -> Self {
        Self {
            client: crate::http_client::client(),
            services,
            admin_token,
        }
    }

    /// The counters for `nodes` now; `None` when there is no service to ask or any read
    /// fails (a partial sum would make the window wrong, not just coarse).
    pub async fn read(&self, nodes: &[String]) -> Option<EdgeCalls> {
        if self.services.is_empty() {
            return None;
        }
        let mut total = EdgeCalls::default();
        for base in &self.services {
            let listed = fetch_api_nodes(&self.client, base, self.admin_token.as_ref())
                .await
                .ok()?;
            for n in listed.iter().filter(|n| nodes.contains(&n.id)) {
                total.ok += n.create_successes;
                total.failed += n.create_fails;
                total.starting += n.sandbox_starting_count;
            }
        }
        Some(total)
    }
}

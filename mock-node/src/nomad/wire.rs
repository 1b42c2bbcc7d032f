//! Nomad's JSON objects, field names as Nomad's API (and its Go client) spells them.

use serde::Serialize;

/// Version the virtual Nomad nodes report (a 1.x client with native service discovery).
pub(super) const NOMAD_VERSION: &str = "1.10.0";

/// One entry of `GET /v1/service/<name>` (Nomad `api.ServiceRegistration`).
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "PascalCase")]
pub(super) struct ServiceRegistration {
    #[serde(rename = "ID")]
    pub id: String,
    pub service_name: String,
    pub namespace: String,
    #[serde(rename = "NodeID")]
    pub node_id: String,
    pub datacenter: String,
    #[serde(rename = "JobID")]
    pub job_id: String,
    #[serde(rename = "AllocID")]
    pub alloc_id: String,
    pub tags: Vec<String>,
    pub address: String,
    pub port: u16,
    pub create_index: u64,
    pub modify_index: u64,
}

/// One entry of `GET /v1/nodes` (Nomad `api.NodeListStub`).
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "PascalCase")]
pub(super) struct NodeListStub {
    pub address: String,
    #[serde(rename = "ID")]
    pub id: String,
    pub attributes: Option<serde_json::Map<String, serde_json::Value>>,
    pub datacenter: String,
    pub name: String,
    pub node_class: String,
    pub node_pool: String,
    pub version: String,
    pub drain: bool,
    pub scheduling_eligibility: String,
    pub status: String,
    pub status_description: String,
    pub drivers: serde_json::Map<String, serde_json::Value>,
    pub node_resources: Option<serde_json::Value>,
    pub reserved_resources: Option<serde_json::Value>,
    pub last_drain: Option<serde_json::Value>,
    pub create_index: u64,
    pub modify_index: u64,
}

/// One namespace of `GET /v1/services`.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "PascalCase")]
pub(super) struct ServiceListEntry {
    pub namespace: String,
    pub services: Vec<ServiceStub>,
}

/// One service of a namespace in `GET /v1/services`.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "PascalCase")]
pub(super) struct ServiceStub {
    pub service_name: String,
    pub tags: Vec<String>,
}

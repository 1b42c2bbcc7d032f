//! `stampede serve`: the reference service's flags plus `--mock-admin`, which the harness
//! resolves (it reads the fleet's `GET /nodes`) and hands the service as node targets, so
//! that the service under test does not link the fake fleet.

use crate::mock_admin::{MockAdmin, MockAdminError};
use crate::serve::{NodeTarget, ServeArgs, ServeError};

/// Flags of `stampede serve`.
#[derive(Debug, Clone, clap::Args)]
pub struct ServeCmdArgs {
    /// The service's own flags.
    #[command(flatten)]
    pub serve: ServeArgs,
    /// Read node ids and addresses from a mock-node admin endpoint (`GET /nodes`).
    #[arg(long, value_name = "URL")]
    pub mock_admin: Option<String>,
    /// Bearer token of the mock-node admin endpoint, if it requires one.
    #[arg(long, env = "STAMPEDE_MOCK_ADMIN_TOKEN", hide_env_values = true)]
    pub mock_admin_token: Option<String>,
}

/// Why `stampede serve` stopped.
#[derive(Debug, thiserror::Error)]
pub enum ServeCmdError {
    /// Reading the node list from a mock-node admin endpoint failed.
    #[error("cannot read the nodes of a mock-node fleet")]
    MockAdmin(#[from] MockAdminError),
    /// The service failed.
    #[error(transparent)]
    Serve(#[from] ServeError),
}

/// Resolves `--mock-admin`, then runs the service until Ctrl-C.
pub async fn run(args: ServeCmdArgs) -> Result<(), ServeCmdError> {
    let discovered = match &args.mock_admin {
        Some(url) => nodes_from_mock_admin(url, args.mock_admin_token.as_deref()).await?,
        None => Vec::new(),
    };
    Ok(crate::serve::run(args.serve, discovered).await?)
}

/// Node ids and gRPC addresses from a mock-node admin endpoint's `GET /nodes`.
async fn nodes_from_mock_admin(
    url: &str,
    token: Option<&str>,
) -> Result<Vec<NodeTarget>, MockAdminError> {
    let body = MockAdmin::new(reqwest::Client::new(), url, token)
        .nodes()
        .await?;
    Ok(body
        .nodes
        .into_iter()
        .map(|n| NodeTarget {
            id: Some(n.id),
            addr: n.grpc_addr.to_string(),
        })
        .collect())
}

/// Every node of an in-process mock-node fleet as the service's targets, id and address
/// known.
pub fn targets_of(fleet: &mock_node::fleet::FleetHandle) -> Vec<NodeTarget> {
    fleet
        .nodes()
        .into_iter()
        .map(|n| NodeTarget {
            id: Some(n.id),
            addr: n.addr.to_string(),
        })
        .collect()
}

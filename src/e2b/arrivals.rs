//! When the node's Create arrived, for every sandbox a trial left running: each node's
//! `List` over gRPC gives every sandbox's start, stamped by mock-node as the Create
//! reached it. Their spread is the spread of the API's placement decisions, the figure
//! the twin's API stage has to reproduce (a burst released at once by the client reaches
//! the nodes over however long the API takes to decide them all).

use std::net::SocketAddr;
use std::time::Duration;

use serde::Serialize;
use stampede_proto::sandbox_service_client::SandboxServiceClient;

/// How long one node's `List` may take (an assumption: a loopback call answered from
/// memory; a loaded 2-core host answers within a second).
const LIST_DEADLINE: Duration = Duration::from_secs(5);

/// The spread of the Creates' arrivals at the nodes, from the first one.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct ArrivalSpread {
    /// Sandboxes read.
    pub sandboxes: usize,
    /// Milliseconds from the first arrival to the 5th, 50th and 95th percentile.
    pub p5_ms: f64,
    /// As above, the median.
    pub p50_ms: f64,
    /// As above, the 95th percentile.
    pub p95_ms: f64,
    /// Milliseconds from the first arrival to the last.
    pub span_ms: f64,
}

impl ArrivalSpread {
    /// The spread of arrival times given in seconds (any order, any origin).
    pub fn from_seconds(mut at: Vec<f64>) -> Option<Self> {
        at.retain(|t| t.is_finite());
        at.sort_by(f64::total_cmp);
        let first = *at.first()?;
        let ms = |q: f64| {
            let i = ((at.len() - 1) as f64 * q).round() as usize;
            (at[i] - first) * 1e3
        };
        Some(ArrivalSpread {
            sandboxes: at.len(),
            p5_ms: ms(0.05),
            p50_ms: ms(0.5),
            p95_ms: ms(0.95),
            span_ms: ms(1.0),
        })
    }
}

/// Errors reading the nodes' lists.
#[derive(Debug, thiserror::Error)]
pub enum ArrivalError {
    /// A node could not be reached.
    #[error("listing the sandboxes of the node at {addr}: {source}")]
    Connect {
        /// The node's gRPC address.
        addr: SocketAddr,
        /// The transport's error.
        #[source]
        source: tonic::transport::Error,
    },
    /// A node refused or failed `List`.
    #[error("listing the sandboxes of the node at {addr}: {source}")]
    List {
        /// The node's gRPC address.
        addr: SocketAddr,
        /// The status it answered.
        #[source]
        source: Box<tonic::Status>,
    },
}

/// Every running sandbox's start, seconds since the Unix epoch, over the given nodes.
pub async fn read_starts(nodes: &[SocketAddr]) -> Result<Vec<f64>, ArrivalError> {
    let mut out = Vec::new();
    for &addr in nodes {
        let connect = |source| ArrivalError::Connect { addr, source };
        let channel = tonic::transport::Endpoint::from_shared(format!("http://{addr}"))
            .map_err(connect)?
            .connect_timeout(LIST_DEADLINE)
            .timeout(LIST_DEADLINE)
            .connect()
            .await
            .map_err(connect)?;
        let list = SandboxServiceClient::new(channel)
            .list(())
            .await
            .map_err(|e| ArrivalError::List {
                addr,
                source: Box::new(e),
            })?
            .into_inner();
        out.extend(
            list.sandboxes
                .iter()
                .filter_map(|s| s.start_time.as_ref())
                .map(|t| t.seconds as f64 + f64::from(t.nanos) * 1e-9),
        );
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_spread_counts_from_the_first_arrival() {
        let at: Vec<f64> = (0..101)
            .rev()
            .map(|i| 1000.0 + f64::from(i) * 1e-3)
            .collect();
        let s = ArrivalSpread::from_seconds(at).expect("not empty");
        assert_eq!(s.sandboxes, 101);
        assert!((s.p5_ms - 5.0).abs() < 1e-6, "{s:?}");
        assert!((s.p50_ms - 50.0).abs() < 1e-6, "{s:?}");
        assert!((s.p95_ms - 95.0).abs() < 1e-6, "{s:?}");
        assert!((s.span_ms - 100.0).abs() < 1e-6, "{s:?}");
    }

    #[test]
    fn no_arrival_gives_no_spread() {
        assert_eq!(ArrivalSpread::from_seconds(vec![f64::NAN]), None);
    }
}

//! The one mock-node admin client (`stampede::mock_admin`) against a real fleet on
//! loopback: it reads every node, sends the bearer token, and a refusal or an
//! unreachable fleet is a typed error that keeps its cause.

use std::error::Error as _;

use mock_node::config::ClusterConfig;
use mock_node::fleet::{self, FleetOptions};
use stampede::error_chain::chain_text;
use stampede::mock_admin::{MockAdmin, MockAdminError};
use stampede_http_kit::Secret;

async fn fleet(nodes: usize, token: Option<&str>) -> fleet::FleetHandle {
    let cluster = ClusterConfig {
        nodes,
        seed: Some(10),
        ..ClusterConfig::default()
    };
    let options = FleetOptions {
        admin_token: token.map(Secret::new),
        ..FleetOptions::default()
    };
    fleet::start(cluster, options).await.expect("fleet starts")
}

#[tokio::test]
async fn reads_every_node_of_the_fleet() {
    let f = fleet(3, None).await;
    let got = MockAdmin::new(reqwest::Client::new(), &format!("{}/", f.admin_url()), None)
        .nodes()
        .await
        .expect("GET /nodes");
    let mut ids: Vec<_> = got.nodes.iter().map(|n| n.id.clone()).collect();
    ids.sort();
    let mut want: Vec<_> = f.nodes().iter().map(|n| n.id.clone()).collect();
    want.sort();
    assert_eq!(ids, want);
    for n in &got.nodes {
        let addr = f.nodes().iter().find(|x| x.id == n.id).expect("known").addr;
        assert_eq!(
            n.grpc_addr, addr,
            "node {} answers on its own address",
            n.id
        );
    }
    f.shutdown().await;
}

#[tokio::test]
async fn sends_the_token_and_reports_a_refusal_with_its_status() {
    let f = fleet(1, Some("s3cret")).await;
    let http = reqwest::Client::new();
    let admin = MockAdmin::new(http.clone(), &f.admin_url(), Some("s3cret"));
    assert!(
        !format!("{admin:?}").contains("s3cret"),
        "Debug redacts the token"
    );
    let ok = admin
        .nodes()
        .await
        .expect("the right token reads the nodes");
    assert_eq!(ok.nodes.len(), 1);
    let err = MockAdmin::new(http, &f.admin_url(), Some("not-the-t0ken-42"))
        .nodes()
        .await
        .expect_err("a wrong token is refused");
    match &err {
        MockAdminError::Status { status, url, .. } => {
            assert_eq!(*status, 401);
            assert!(url.ends_with("/nodes"), "{url}");
        }
        other => panic!("expected a status error, got {other:?}"),
    }
    let shown = format!("{err} {err:?}");
    assert!(
        !shown.contains("not-the-t0ken-42"),
        "the token never shows: {shown}"
    );
    f.shutdown().await;
}

#[tokio::test]
async fn an_unreachable_fleet_keeps_the_transport_cause() {
    // A port held by a socket that is bound but never listens: connects are refused,
    // and no other test can take the port while the test runs.
    let held = tokio::net::TcpSocket::new_v4().expect("socket");
    held.bind("127.0.0.1:0".parse().unwrap()).expect("bind");
    let port = held.local_addr().expect("addr").port();
    let err = MockAdmin::new(
        reqwest::Client::new(),
        &format!("http://127.0.0.1:{port}"),
        None,
    )
    .nodes()
    .await
    .expect_err("nothing listens there");
    assert!(matches!(err, MockAdminError::Request { .. }), "{err:?}");
    drop(held);
    assert!(
        err.source().is_some(),
        "the reqwest error is kept as the source"
    );
    let text = chain_text(&err);
    assert!(
        text.starts_with(&format!("GET http://127.0.0.1:{port}/nodes failed: ")),
        "{text}"
    );
}

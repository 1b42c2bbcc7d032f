//! Wire compatibility: field numbers checked on raw bytes, and a client written
//! independently from E2B's published field numbers talking to mock-node.

use crate::support as common;

use std::time::Duration;

use common::*;
use prost::Message;
use stampede_proto::{RunningSandbox, SandboxConfig, SandboxCreateRequest};
use tonic::codegen::http::uri::PathAndQuery;

/// One decoded protobuf field: number, wire type, and the varint or the bytes.
#[derive(Debug, Clone, PartialEq)]
enum Val {
    Varint(u64),
    Bytes(Vec<u8>),
}

fn varint(buf: &[u8], i: &mut usize) -> u64 {
    let (mut v, mut shift) = (0u64, 0);
    loop {
        let b = buf[*i];
        *i += 1;
        v |= u64::from(b & 0x7f) << shift;
        if b & 0x80 == 0 {
            return v;
        }
        shift += 7;
    }
}

/// Decodes a message by hand: tag = field << 3 | wire type.
fn fields(buf: &[u8]) -> Vec<(u64, Val)> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < buf.len() {
        let tag = varint(buf, &mut i);
        let (field, wire) = (tag >> 3, tag & 7);
        match wire {
            0 => out.push((field, Val::Varint(varint(buf, &mut i)))),
            2 => {
                let len = varint(buf, &mut i) as usize;
                out.push((field, Val::Bytes(buf[i..i + len].to_vec())));
                i += len;
            }
            other => panic!("unexpected wire type {other} for field {field}"),
        }
    }
    out
}

fn get(fs: &[(u64, Val)], n: u64) -> Option<Val> {
    fs.iter().find(|(f, _)| *f == n).map(|(_, v)| v.clone())
}

#[test]
fn generated_types_use_e2b_field_numbers() {
    let req = SandboxCreateRequest {
        sandbox: Some(SandboxConfig {
            template_id: "tpl".into(),
            build_id: "bld".into(),
            sandbox_id: "sbx".into(),
            vcpu: 3,
            ram_mb: 700,
            team_id: "team".into(),
            ..Default::default()
        }),
        start_time: None,
        end_time: None,
    };
    let top = fields(&req.encode_to_vec());
    let Some(Val::Bytes(cfg)) = get(&top, 1) else {
        panic!("sandbox=1")
    };
    let cfg = fields(&cfg);
    assert_eq!(get(&cfg, 1), Some(Val::Bytes(b"tpl".to_vec())));
    assert_eq!(get(&cfg, 2), Some(Val::Bytes(b"bld".to_vec())));
    assert_eq!(get(&cfg, 6), Some(Val::Bytes(b"sbx".to_vec())));
    assert_eq!(get(&cfg, 11), Some(Val::Varint(3)));
    assert_eq!(get(&cfg, 12), Some(Val::Varint(700)));
    assert_eq!(get(&cfg, 13), Some(Val::Bytes(b"team".to_vec())));

    let rs = RunningSandbox {
        sandbox_id: "sbx".into(),
        client_id: "node".into(),
        vcpu: 5,
        ram_mb: 9,
        team_id: "t".into(),
        execution_id: "e".into(),
        ..Default::default()
    };
    let f = fields(&rs.encode_to_vec());
    assert_eq!(get(&f, 2), Some(Val::Bytes(b"node".to_vec())));
    assert_eq!(get(&f, 5), Some(Val::Bytes(b"sbx".to_vec())));
    assert_eq!(get(&f, 6), Some(Val::Bytes(b"t".to_vec())));
    assert_eq!(get(&f, 7), Some(Val::Bytes(b"e".to_vec())));
    assert_eq!(get(&f, 8), Some(Val::Varint(5)));
    assert_eq!(get(&f, 9), Some(Val::Varint(9)));
}

#[tokio::test]
async fn service_info_bytes_from_the_server_carry_e2b_numbers() {
    let f = fleet_with(1, |c| c.node.cpu_count = 24).await;
    let (mut sb, mut info) = clients(f.nodes()[0].addr).await;
    sb.create(create("x", 3, 128)).await.expect("create");
    let si = info.service_info(()).await.expect("info").into_inner();
    let fs = fields(&si.encode_to_vec());
    assert_eq!(get(&fs, 1), Some(Val::Bytes(b"node-00".to_vec())));
    assert_eq!(get(&fs, 108), Some(Val::Varint(24)), "metric_cpu_count=108");
    assert_eq!(
        get(&fs, 110),
        Some(Val::Varint(3)),
        "metric_cpu_allocated=110"
    );
    assert_eq!(
        get(&fs, 104),
        Some(Val::Varint(1)),
        "metric_sandboxes_running=104"
    );
    assert_eq!(get(&fs, 111), Some(Val::Varint(128 << 20)));
    // Healthy = 0 is the proto3 default and is not written; roles = [Orchestrator=1].
    assert_eq!(get(&fs, 51), None);
    assert_eq!(
        get(&fs, 52),
        Some(Val::Bytes(vec![1])),
        "packed service_roles=52"
    );
    let Some(Val::Bytes(ext)) = get(&fs, 1000) else {
        panic!("extension 1000")
    };
    assert_eq!(get(&fields(&ext), 1), Some(Val::Bytes(b"x".to_vec())));
    f.shutdown().await;
}

#[test]
fn draining_status_is_field_51_value_1() {
    let si = stampede_proto::ServiceInfoResponse {
        service_status: stampede_proto::ServiceInfoStatus::Draining as i32,
        ..Default::default()
    };
    assert_eq!(get(&fields(&si.encode_to_vec()), 51), Some(Val::Varint(1)));
}

/// Messages written from E2B's published orchestrator.proto / info.proto numbers,
/// independently of `stampede_proto`.
mod e2b {
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Empty {}

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Config {
        #[prost(string, tag = "1")]
        pub template_id: String,
        #[prost(string, tag = "6")]
        pub sandbox_id: String,
        #[prost(int64, tag = "11")]
        pub vcpu: i64,
        #[prost(int64, tag = "12")]
        pub ram_mb: i64,
        #[prost(string, tag = "13")]
        pub team_id: String,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct CreateReq {
        #[prost(message, optional, tag = "1")]
        pub sandbox: Option<Config>,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct CreateResp {
        #[prost(string, tag = "1")]
        pub client_id: String,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct DeleteReq {
        #[prost(string, tag = "1")]
        pub sandbox_id: String,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Running {
        #[prost(string, tag = "5")]
        pub sandbox_id: String,
        #[prost(int64, tag = "8")]
        pub vcpu: i64,
        #[prost(int64, tag = "9")]
        pub ram_mb: i64,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct ListResp {
        #[prost(message, repeated, tag = "1")]
        pub sandboxes: Vec<Running>,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Info {
        #[prost(string, tag = "1")]
        pub node_id: String,
        #[prost(string, tag = "2")]
        pub service_id: String,
        #[prost(int32, tag = "51")]
        pub service_status: i32,
        #[prost(int32, repeated, tag = "52")]
        pub service_roles: Vec<i32>,
        #[prost(uint32, tag = "104")]
        pub metric_sandboxes_running: u32,
        #[prost(uint32, tag = "108")]
        pub metric_cpu_count: u32,
        #[prost(uint32, tag = "110")]
        pub metric_cpu_allocated: u32,
        #[prost(uint64, tag = "111")]
        pub metric_memory_allocated_bytes: u64,
    }
}

async fn call<Req, Resp>(
    grpc: &mut tonic::client::Grpc<tonic::transport::Channel>,
    path: &'static str,
    req: Req,
) -> Result<Resp, tonic::Status>
where
    Req: prost::Message + Send + Sync + 'static,
    Resp: prost::Message + Default + Send + Sync + 'static,
{
    grpc.ready()
        .await
        .map_err(|e| tonic::Status::unavailable(e.to_string()))?;
    let codec = tonic_prost::ProstCodec::<Req, Resp>::default();
    let r = grpc
        .unary(
            tonic::Request::new(req),
            PathAndQuery::from_static(path),
            codec,
        )
        .await?;
    Ok(r.into_inner())
}

#[tokio::test]
async fn independent_client_creates_lists_deletes_and_reads_info() {
    let f = fleet_with(1, |c| c.node.cpu_count = 32).await;
    let ch = channel(f.nodes()[0].addr, Duration::from_secs(5)).await;
    let mut grpc = tonic::client::Grpc::new(ch);
    let create = e2b::CreateReq {
        sandbox: Some(e2b::Config {
            template_id: "tpl".into(),
            sandbox_id: "indep-1".into(),
            vcpu: 2,
            ram_mb: 1024,
            team_id: "team".into(),
        }),
    };
    let r: e2b::CreateResp = call(&mut grpc, "/SandboxService/Create", create)
        .await
        .expect("create");
    assert_eq!(r.client_id, "node-00");
    let l: e2b::ListResp = call(&mut grpc, "/SandboxService/List", e2b::Empty {})
        .await
        .expect("list");
    assert_eq!(l.sandboxes.len(), 1);
    assert_eq!(
        (
            l.sandboxes[0].sandbox_id.as_str(),
            l.sandboxes[0].vcpu,
            l.sandboxes[0].ram_mb
        ),
        ("indep-1", 2, 1024)
    );
    let i: e2b::Info = call(&mut grpc, "/InfoService/ServiceInfo", e2b::Empty {})
        .await
        .expect("info");
    assert_eq!(i.node_id, "node-00");
    assert!(!i.service_id.is_empty());
    assert_eq!((i.service_status, i.service_roles.clone()), (0, vec![1]));
    assert_eq!((i.metric_cpu_count, i.metric_cpu_allocated), (32, 2));
    assert_eq!(i.metric_sandboxes_running, 1);
    assert_eq!(i.metric_memory_allocated_bytes, 1024 << 20);
    let _: e2b::Empty = call(
        &mut grpc,
        "/SandboxService/Delete",
        e2b::DeleteReq {
            sandbox_id: "indep-1".into(),
        },
    )
    .await
    .expect("delete");
    let e = call::<_, e2b::Empty>(
        &mut grpc,
        "/SandboxService/Delete",
        e2b::DeleteReq {
            sandbox_id: "indep-1".into(),
        },
    )
    .await
    .expect_err("second delete");
    assert_eq!(e.code(), tonic::Code::NotFound);
    let l: e2b::ListResp = call(&mut grpc, "/SandboxService/List", e2b::Empty {})
        .await
        .expect("list");
    assert!(l.sandboxes.is_empty());
    f.shutdown().await;
}

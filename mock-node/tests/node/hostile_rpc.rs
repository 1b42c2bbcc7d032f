//! Hostile gRPC input: oversized messages, absurd sizes, huge ids and
//! backwards lifetimes get a clean status code, never a panic, a wrap or a huge List.

use crate::support as common;

use std::time::Duration;

use common::*;
use mock_node::model::MAX_ID_BYTES;
use mock_node::MAX_MESSAGE_BYTES;
use stampede_proto::{SandboxDeleteRequest, SandboxPauseRequest, SandboxUpdateRequest};
use tonic::Code;

fn code<T: std::fmt::Debug>(r: Result<T, tonic::Status>) -> Code {
    r.expect_err("must fail").code()
}

#[tokio::test]
async fn oversized_message_is_resource_exhausted_not_out_of_range() {
    let f = fleet_with(1, |_| {}).await;
    let (mut sb, _) = clients(f.nodes()[0].addr).await;
    // A template id alone pushes the encoded request past the limit.
    let mut big = create("big", 1, 1);
    big.sandbox.as_mut().expect("config").template_id = "t".repeat(MAX_MESSAGE_BYTES + 1);
    let e = sb.create(big).await.expect_err("over the limit");
    assert_eq!(e.code(), Code::ResourceExhausted, "{e:?}");
    assert!(e.message().contains("exceeds"), "{}", e.message());
    // Under the message limit the request is decoded and judged on its fields instead.
    let mut fits = create("fits", 1, 1);
    fits.sandbox.as_mut().expect("config").template_id = "t".repeat(1 << 20);
    assert_eq!(code(sb.create(fits).await), Code::InvalidArgument);
    // The connection survives both.
    sb.create(create("ok", 1, 1)).await.expect("normal create");
    let t = truth(&f, 0);
    assert_eq!(t.sandbox_ids, vec!["ok"]);
    f.shutdown().await;
}

#[tokio::test]
async fn ram_mb_above_node_memory_is_invalid_argument_and_memory_never_wraps() {
    // Two sandboxes of 2^63-1 MiB plus two small ones showed 512 MiB allocated.
    let f = fleet_with(1, |c| c.node.memory_mib = 65536).await;
    let (mut sb, mut info) = clients(f.nodes()[0].addr).await;
    for id in ["huge-1", "huge-2"] {
        let e = sb
            .create(create(id, 1, i64::MAX))
            .await
            .expect_err("bigger than the node");
        assert_eq!(e.code(), Code::InvalidArgument, "{e:?}");
        assert!(e.message().contains("ram_mb"), "{}", e.message());
    }
    assert_eq!(
        code(sb.create(create("over", 1, 65537)).await),
        Code::InvalidArgument
    );
    sb.create(create("whole-node", 1, 65536))
        .await
        .expect("exactly the node's memory");
    sb.create(create("small-1", 1, 256)).await.expect("create");
    sb.create(create("small-2", 1, 258)).await.expect("create");
    let t = truth(&f, 0);
    assert_eq!(t.allocated_memory_mib, 65536 + 256 + 258);
    let si = info.service_info(()).await.expect("info").into_inner();
    assert_eq!(si.metric_memory_allocated_bytes, (65536 + 256 + 258) << 20);
    assert_eq!(t.creates_rejected.get("invalid_argument"), Some(&3));
    f.shutdown().await;
}

#[tokio::test]
async fn vcpu_above_node_cpu_count_is_invalid_argument() {
    let f = fleet_with(1, |c| {
        c.node.cpu_count = 8;
        c.node.overcommit = 0.0; // no overcommit rule to hide behind
    })
    .await;
    let (mut sb, _) = clients(f.nodes()[0].addr).await;
    for vcpu in [9, i64::from(u32::MAX), i64::MAX] {
        let e = sb
            .create(create("fat", vcpu, 1))
            .await
            .expect_err("more vCPU than the node");
        assert_eq!(e.code(), Code::InvalidArgument, "{vcpu}: {e:?}");
        assert!(e.message().contains("vcpu"), "{}", e.message());
    }
    sb.create(create("whole-node", 8, 1))
        .await
        .expect("exactly the node's CPUs");
    f.shutdown().await;
}

#[tokio::test]
async fn ids_longer_than_the_limit_are_invalid_argument_and_list_stays_small() {
    // Three 1 MB ids made List 8.2 MB, which a client then failed to decode.
    let f = fleet_with(1, |_| {}).await;
    let (mut sb, _) = clients(f.nodes()[0].addr).await;
    let long = "x".repeat(1 << 20);
    let over = "y".repeat(MAX_ID_BYTES + 1);
    let at_limit = "z".repeat(MAX_ID_BYTES);
    for k in 0..3 {
        let e = sb
            .create(create(&format!("{long}{k}"), 1, 1))
            .await
            .expect_err("1 MB id");
        assert_eq!(e.code(), Code::InvalidArgument, "{e:?}");
        assert!(e.message().len() < 1024, "the id is not echoed back");
    }
    let fields: [fn(&mut stampede_proto::SandboxConfig, String); 4] = [
        |c, v| c.sandbox_id = v,
        |c, v| c.template_id = v,
        |c, v| c.team_id = v,
        |c, v| c.execution_id = v,
    ];
    for (i, set) in fields.iter().enumerate() {
        let mut req = create(&format!("field-{i}"), 1, 1);
        set(req.sandbox.as_mut().expect("config"), over.clone());
        let e = sb.create(req).await.expect_err("one byte over");
        assert_eq!(e.code(), Code::InvalidArgument, "field {i}: {e:?}");
        let mut req = create(&format!("field-{i}"), 1, 1);
        set(req.sandbox.as_mut().expect("config"), at_limit.clone());
        sb.create(req).await.expect("at the limit");
        if i == 0 {
            sb.delete(SandboxDeleteRequest {
                sandbox_id: at_limit.clone(),
            })
            .await
            .expect("delete at the limit");
        }
    }
    // Ids that cannot exist on the node are refused before any lookup, without an echo.
    let e = sb
        .delete(SandboxDeleteRequest {
            sandbox_id: long.clone(),
        })
        .await
        .expect_err("delete");
    assert_eq!(e.code(), Code::InvalidArgument);
    assert!(e.message().len() < 1024);
    let pause = SandboxPauseRequest {
        sandbox_id: long.clone(),
        ..Default::default()
    };
    assert_eq!(code(sb.pause(pause).await), Code::InvalidArgument);
    let upd = SandboxUpdateRequest {
        sandbox_id: long.clone(),
        end_time: None,
    };
    assert_eq!(code(sb.update(upd).await), Code::InvalidArgument);
    let list = sb.list(()).await.expect("list").into_inner().sandboxes;
    assert_eq!(list.len(), 3, "{:?}", list.iter().map(|s| &s.sandbox_id));
    let bytes: usize = list
        .iter()
        .map(|s| s.sandbox_id.len() + s.team_id.len())
        .sum();
    assert!(bytes < 16 * MAX_ID_BYTES, "List stays small: {bytes} bytes");
    f.shutdown().await;
}

#[tokio::test]
async fn end_time_before_start_time_is_invalid_argument() {
    let f = fleet_with(1, |_| {}).await;
    let (mut sb, _) = clients(f.nodes()[0].addr).await;
    let start = ts_in(Duration::from_secs(60));
    let mut backwards = create("backwards", 1, 1);
    backwards.start_time = Some(start);
    backwards.end_time = Some(ts_in(Duration::from_secs(30)));
    let e = sb
        .create(backwards)
        .await
        .expect_err("ends before it starts");
    assert_eq!(e.code(), Code::InvalidArgument, "{e:?}");
    assert!(e.message().contains("end_time"), "{}", e.message());
    // A zero lifetime is taken, as E2B's orchestrator takes it (a connect with
    // `timeout: 0` resumes one): the sandbox is due at once.
    let mut empty = create("empty", 1, 1);
    empty.start_time = Some(start);
    empty.end_time = Some(start);
    sb.create(empty).await.expect("end_time == start_time");
    let mut ok = create("ok", 1, 1);
    ok.start_time = Some(start);
    ok.end_time = Some(ts_in(Duration::from_secs(3600)));
    sb.create(ok).await.expect("end after start");
    let mut no_start = create("no-start", 1, 1);
    no_start.start_time = None;
    no_start.end_time = Some(ts_in(Duration::from_secs(3600)));
    sb.create(no_start).await.expect("only end_time given");
    let t = truth(&f, 0);
    assert_eq!(t.creates_rejected.get("invalid_argument"), Some(&1));
    f.shutdown().await;
}

/// A call with more than 16 KiB of metadata made mock-node close the whole HTTP/2
/// connection (hyper's 16 KiB header-list default), failing the other calls in flight on
/// it. E2B's orchestrator (grpc-go, 16 MiB) answers such a call like any other.
#[tokio::test]
async fn large_metadata_is_answered_alone_and_calls_in_flight_survive() {
    let f = fleet_with(1, |c| {
        c.node.create_latency = mock_node::config::LatencyDist::Constant {
            value: Duration::from_millis(500),
        };
    })
    .await;
    let ch = channel(f.nodes()[0].addr, Duration::from_secs(10)).await;
    let mut slow = stampede_proto::sandbox_service_client::SandboxServiceClient::new(ch.clone());
    let mut info = stampede_proto::info_service_client::InfoServiceClient::new(ch);
    let in_flight = tokio::spawn(async move { slow.create(create("slow", 1, 1)).await });
    // The slow create is on the connection before the large call goes out.
    let started = eventually(Duration::from_secs(5), async || truth(&f, 0).starting > 0).await;
    assert!(started, "the create never started");
    for bytes in [20 << 10, 1 << 20] {
        let mut req = tonic::Request::new(());
        let value = "v".repeat(bytes);
        req.metadata_mut()
            .insert("x-large", value.parse().expect("ascii"));
        let answer = info.service_info(req).await;
        assert!(answer.is_ok(), "{bytes} bytes of metadata: {answer:?}");
    }
    let r = in_flight.await.expect("task");
    assert!(r.is_ok(), "the call in flight survives: {r:?}");
    f.shutdown().await;
}

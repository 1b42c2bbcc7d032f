//! Resume placement: the origin node first when it can accept, dropped after its first
//! failure, then Best-of-K; the warmed node of a timed-out request.

use std::time::Duration;

use crate::{
    Answered, CreateReply, ErrorKind, InfoReply, Input, NodeMetrics, NodeStatus, Output, Placer,
    PlacerConfig,
};

fn placer(nodes: usize) -> Placer {
    let cfg = PlacerConfig {
        placement: crate::PlacementConfig::default(),
        seed: 7,
        request_timeout: Duration::from_secs(70),
        retry_backoff: None,
        api_stage: crate::ApiStage::off(),
        defer_retries: false,
    };
    let ids: Vec<String> = (0..nodes).map(|i| format!("node-{i}")).collect();
    let mut p = Placer::new(cfg, ids.iter().map(Into::into));
    for id in ids {
        sync(&mut p, &id, NodeStatus::Ready, 0);
    }
    p
}

fn sync(p: &mut Placer, node: &str, status: NodeStatus, allocated: u32) {
    let info = InfoReply {
        status,
        metrics: NodeMetrics {
            cpu_allocated: allocated,
            cpu_count: 16,
            cpu_percent: 0,
            memory_allocated_bytes: 0,
            memory_total_bytes: 1 << 36,
            sandboxes_running: 0,
        },
        ids: Some(Vec::new()),
    };
    p.handle(
        Duration::ZERO,
        Input::Synced {
            node: node.into(),
            info,
            listed: Some(Vec::new()),
        },
    );
}

fn resume(p: &mut Placer, req: u64, origin: Option<&str>) -> Option<Output> {
    p.handle(
        Duration::ZERO,
        Input::Resume {
            req,
            sandbox_id: format!("isb{req}").into(),
            vcpu: 2,
            origin: origin.map(Into::into),
        },
    )
}

fn sent_to(out: Option<Output>) -> String {
    match out {
        Some(Output::SendCreate { node, .. }) => node.to_string(),
        other => panic!("expected a Create, got {other:?}"),
    }
}

#[test]
fn resume_goes_to_its_origin_even_when_it_scores_worst() {
    let mut p = placer(4);
    // The origin is the fullest node: Best-of-K would never pick it over three others.
    sync(&mut p, "node-2", NodeStatus::Ready, 60);
    for req in 0..20 {
        assert_eq!(sent_to(resume(&mut p, req, Some("node-2"))), "node-2");
        p.handle(
            Duration::ZERO,
            Input::CreateReplied {
                req,
                reply: CreateReply::Created,
            },
        );
    }
}

#[test]
fn origin_that_cannot_accept_is_skipped_for_best_of_k() {
    let mut p = placer(4);
    sync(&mut p, "node-1", NodeStatus::Draining, 0);
    for req in 0..20 {
        let node = sent_to(resume(&mut p, req, Some("node-1")));
        assert_ne!(node, "node-1", "a draining origin is never tried");
    }
    // An unknown origin (a node gone since the pause) is no origin at all.
    assert_ne!(sent_to(resume(&mut p, 99, Some("node-9"))), "node-9");
}

#[test]
fn refused_origin_is_dropped_and_never_retried_first() {
    let mut p = placer(4);
    sync(&mut p, "node-3", NodeStatus::Ready, 60);
    assert_eq!(sent_to(resume(&mut p, 1, Some("node-3"))), "node-3");
    let next = p.handle(
        Duration::ZERO,
        Input::CreateReplied {
            req: 1,
            reply: CreateReply::Refused,
        },
    );
    // The next try is a draw of K = 3 among four nodes: any three sampled hold at least
    // one emptier than the fullest, so a draw never returns it.
    assert_ne!(sent_to(next), "node-3");
}

#[test]
fn timed_out_resume_reports_the_first_node_that_tried() {
    let mut p = placer(2);
    assert_eq!(sent_to(resume(&mut p, 1, Some("node-0"))), "node-0");
    let next = p.handle(
        Duration::from_secs(1),
        Input::CreateReplied {
            req: 1,
            reply: CreateReply::Failed {
                code: ErrorKind::Other,
                message: "boom".into(),
            },
        },
    );
    assert_eq!(sent_to(next), "node-1");
    let out = p.handle(Duration::from_secs(71), Input::Cancel { req: 1 });
    let Some(Output::Answer(Answered {
        warmed, failure, ..
    })) = out
    else {
        panic!("expected an answer, got {out:?}");
    };
    assert!(failure.is_some());
    assert_eq!(warmed.as_deref(), Some("node-0"));
}

#[test]
fn create_failure_without_timeout_reports_no_warmed_node() {
    let mut p = placer(1);
    assert_eq!(sent_to(resume(&mut p, 1, Some("node-0"))), "node-0");
    let out = p.handle(
        Duration::from_secs(1),
        Input::CreateReplied {
            req: 1,
            reply: CreateReply::Failed {
                code: ErrorKind::Other,
                message: "boom".into(),
            },
        },
    );
    let Some(Output::Answer(a)) = out else {
        panic!("expected an answer, got {out:?}");
    };
    assert!(a.failure.is_some());
    assert_eq!(a.warmed, None);
}

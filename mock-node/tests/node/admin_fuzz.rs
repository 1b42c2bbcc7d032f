//! Property test of the admin API: arbitrary fault bodies sent to a real
//! admin endpoint never get a 5xx or kill the handler, and `GET /faults` keeps answering.
//!
//! 200 cases by default (a few seconds); `PROPTEST_CASES=100000 cargo test -p mock-node
//! --test admin_fuzz -- --nocapture` runs a long session and prints what it sent.

use crate::support as common;

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use common::*;
use mock_node::api::{ApiError, FaultCreated, FaultsResponse, NodesResponse};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};
use serde_json::{json, Map, Value};

/// Cases when `PROPTEST_CASES` is not set.
const DEFAULT_CASES: u32 = 200;

/// Any JSON value, small: the "wrong type" of every field.
fn any_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        any::<f64>().prop_map(|x| json!(x)),
        "\\PC{0,16}".prop_map(Value::from),
    ];
    leaf.prop_recursive(2, 8, 3, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..3).prop_map(Value::from),
            prop::collection::btree_map("[a-z]{1,6}", inner, 0..3)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

/// Every field of a fault request.
const FIELDS: [&str; 7] = [
    "kind",
    "nodes",
    "duration",
    "latency",
    "probability",
    "code",
    "status",
];

/// Duration-like strings: mostly short ones humantime parses, then digits and a unit
/// (numbers past u64 included), compound forms, known edge values, and garbage.
fn duration() -> impl Strategy<Value = Value> {
    let units = prop::sample::select(vec![
        "", "ns", "us", "ms", "s", "sec", "m", "min", "h", "d", "w", "M", "y", "years", "parsecs",
    ]);
    prop_oneof![
        4 => ("[1-9][0-9]{0,2}", prop::sample::select(vec!["ms", "s", "m", "h", "d"]))
            .prop_map(|(n, u)| Value::from(format!("{n}{u}"))),
        3 => ("[0-9]{1,24}", units.clone()).prop_map(|(n, u)| Value::from(format!("{n}{u}"))),
        1 => (any::<u64>(), units.clone(), any::<u32>(), units)
            .prop_map(|(a, u, b, v)| Value::from(format!("{a}{u} {b}{v}"))),
        2 => prop::sample::select(vec![
            "18446744073709551615s",
            "18446744073709551616s",
            "9223372036854775807s",
            "584942417355y",
            "8000y",
            "30days",
            "31days",
            "1ms",
            "0s",
            "-1s",
            "1.5s",
        ])
        .prop_map(Value::from),
        1 => any_json(),
    ]
}

fn probability() -> impl Strategy<Value = Value> {
    prop_oneof![
        4 => (0.0..=1.0f64).prop_map(|x| json!(x)),
        2 => (-0.5..1.5f64).prop_map(|x| json!(x)),
        1 => prop::sample::select(vec![0.0, 1.0, 1e-300, 1e300, -0.0]).prop_map(|x| json!(x)),
        1 => any_json(),
    ]
}

fn named(names: Vec<&'static str>) -> impl Strategy<Value = Value> {
    prop_oneof![
        6 => prop::sample::select(names).prop_map(Value::from),
        1 => "\\PC{0,12}".prop_map(Value::from),
        1 => any_json(),
    ]
}

fn nodes() -> impl Strategy<Value = Value> {
    let real = vec!["node-00", "node-01", "node-02"];
    let name = prop_oneof![
        6 => prop::sample::select(real.clone()).prop_map(String::from),
        1 => prop::sample::select(vec!["node-99", "", "node-0", "NODE-00"]).prop_map(String::from),
        1 => "\\PC{0,12}",
    ];
    prop_oneof![
        6 => prop::sample::subsequence(real.clone(), 1..=3).prop_map(Value::from),
        2 => prop::collection::vec(prop::sample::select(real), 1..6).prop_map(Value::from),
        1 => prop::collection::vec(name, 0..6).prop_map(Value::from),
    ]
}

/// A fault request that is valid more often than not: a real kind, real nodes, the
/// parameters its kind needs (usually), others sometimes.
fn fault_object() -> impl Strategy<Value = Map<String, Value>> {
    let kinds = prop::sample::select(vec![
        "kill",
        "hang",
        "slow",
        "errors",
        "exhaust",
        "freeze-metrics",
        "status",
        "restart",
    ]);
    let codes = named(vec![
        "unavailable",
        "internal",
        "resource_exhausted",
        "deadline_exceeded",
        "unknown",
        "ok",
    ]);
    let statuses = named(vec![
        "healthy",
        "draining",
        "unhealthy",
        "standby",
        "sleepy",
    ]);
    (
        (kinds, nodes(), prop::option::weighted(0.6, duration())),
        (duration(), probability(), codes, statuses),
        (
            prop::collection::vec(prop::bool::weighted(0.9), 4),
            prop::collection::vec(prop::bool::weighted(0.15), 4),
        ),
    )
        .prop_map(|((kind, nodes, duration), params, (needed, other))| {
            let mut m = Map::new();
            m.insert("kind".into(), Value::from(kind));
            m.insert("nodes".into(), nodes);
            if let Some(d) = duration {
                m.insert("duration".into(), d);
            }
            let (latency, probability, code, status) = params;
            let wants = [
                ("latency", latency, kind == "slow"),
                ("probability", probability, kind == "errors"),
                ("code", code, kind == "errors"),
                ("status", status, kind == "status"),
            ];
            for (i, (key, v, needs)) in wants.into_iter().enumerate() {
                if (needs && needed[i]) || (!needs && other[i]) {
                    m.insert(key.into(), v);
                }
            }
            m
        })
}

/// A change to a request: a field (real or unknown) set to any JSON value (the wrong
/// type, usually), or removed.
fn mutation() -> impl Strategy<Value = (String, Option<Value>)> {
    let key = prop_oneof![
        3 => prop::sample::select(FIELDS.to_vec()).prop_map(String::from),
        1 => "[a-z_]{1,10}",
    ];
    (key, prop::option::weighted(0.7, any_json()))
}

/// Request bytes, shown as text when a case fails.
#[derive(Clone)]
struct Body(Vec<u8>);

impl std::fmt::Debug for Body {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", String::from_utf8_lossy(&self.0))
    }
}

/// A whole `POST /faults` body: mostly fault requests, half of them mutated, sometimes
/// any JSON at all, sometimes not JSON.
fn body() -> impl Strategy<Value = Body> {
    let mutations = prop_oneof![
        1 => Just(Vec::new()),
        1 => prop::collection::vec(mutation(), 1..3),
    ];
    let request = (fault_object(), mutations).prop_map(|(mut m, changes)| {
        for (key, v) in changes {
            match v {
                Some(v) => m.insert(key, v),
                None => m.remove(&key),
            };
        }
        Body(serde_json::to_vec(&Value::Object(m)).expect("serialisable"))
    });
    prop_oneof![
        18 => request,
        1 => any_json().prop_map(|v| Body(serde_json::to_vec(&v).expect("serialisable"))),
        1 => prop::collection::vec(any::<u8>(), 0..64).prop_map(Body),
    ]
}

struct Tally {
    started: std::time::Instant,
    /// Seconds since `started` of the last progress line.
    reported: AtomicU64,
    cases: AtomicU64,
    created: AtomicU64,
    refused: AtomicU64,
    healed: AtomicU64,
    already_inactive: AtomicU64,
    rebind_failed: AtomicU64,
    /// The last accepted bodies: the fault book outlives a case, so the input that broke
    /// the endpoint may be an earlier one than the case that noticed.
    accepted: std::sync::Mutex<std::collections::VecDeque<String>>,
}

impl Tally {
    fn bump(c: &AtomicU64) {
        c.fetch_add(1, Ordering::Relaxed);
    }

    fn accept(&self, body: &str) {
        let mut q = self.accepted.lock().unwrap_or_else(|p| p.into_inner());
        if q.len() == 5 {
            q.pop_front();
        }
        q.push_back(body.to_string());
    }

    fn recent(&self) -> String {
        let q = self.accepted.lock().unwrap_or_else(|p| p.into_inner());
        format!("{:?}", q.iter().collect::<Vec<_>>())
    }
}

async fn one_case(
    client: &reqwest::Client,
    base: &str,
    body: Body,
    tally: &Tally,
) -> Result<(), TestCaseError> {
    let n = tally.cases.fetch_add(1, Ordering::Relaxed) + 1;
    let secs = tally.started.elapsed().as_secs();
    if secs >= tally.reported.load(Ordering::Relaxed) + 30 {
        tally.reported.store(secs, Ordering::Relaxed);
        eprintln!("admin fuzz: {n} inputs sent in {secs} s");
    }
    let shown = format!("{body:?}");
    let r = client
        .post(format!("{base}/faults"))
        .header("content-type", "application/json")
        .body(body.0)
        .send()
        .await
        .map_err(|e| TestCaseError::fail(format!("POST {shown}: no answer ({e}): a panic?")))?;
    let status = r.status().as_u16();
    let text = r.text().await.unwrap_or_default();
    match status {
        201 => {
            Tally::bump(&tally.created);
            tally.accept(&shown);
            let id = serde_json::from_str::<FaultCreated>(&text)
                .map_err(|e| TestCaseError::fail(format!("201 body {text}: {e}")))?
                .id;
            let d = client
                .delete(format!("{base}/faults/{id}"))
                .send()
                .await
                .map_err(|e| TestCaseError::fail(format!("DELETE {id}: no answer ({e})")))?;
            let ds = d.status().as_u16();
            let dt = d.text().await.unwrap_or_default();
            match ds {
                204 => Tally::bump(&tally.healed),
                // Healed by its own duration already, or an instant fault (restart).
                404 => Tally::bump(&tally.already_inactive),
                // A killed node's port taken by another process meanwhile: the machine,
                // not the input. Counted and reported, not a failure.
                500 if dt.contains("cannot re-bind") => Tally::bump(&tally.rebind_failed),
                _ => {
                    return Err(TestCaseError::fail(format!(
                        "DELETE {id} after POST {shown}: {ds} {dt}"
                    )))
                }
            }
        }
        400 => {
            Tally::bump(&tally.refused);
            let e = serde_json::from_str::<ApiError>(&text)
                .map_err(|e| TestCaseError::fail(format!("400 body {text}: {e}")))?;
            prop_assert!(!e.error.is_empty(), "empty error for {}", shown);
        }
        _ => {
            return Err(TestCaseError::fail(format!(
                "POST {shown}: {status} {text}"
            )))
        }
    }
    let g = client
        .get(format!("{base}/faults"))
        .send()
        .await
        .map_err(|e| {
            TestCaseError::fail(format!(
                "GET /faults after {shown}: no answer ({e}); last accepted: {}",
                tally.recent()
            ))
        })?;
    let gs = g.status().as_u16();
    let gt = g.text().await.unwrap_or_default();
    prop_assert_eq!(gs, 200, "GET /faults after {}: {}", shown, gt);
    serde_json::from_str::<FaultsResponse>(&gt)
        .map_err(|e| TestCaseError::fail(format!("GET /faults body: {e}")))?;
    Ok(())
}

#[test]
fn admin_fault_requests_never_5xx_and_get_faults_keeps_answering() {
    let mut config = Config::default(); // honours PROPTEST_CASES
    if std::env::var_os("PROPTEST_CASES").is_none() {
        config.cases = DEFAULT_CASES;
    }
    config.failure_persistence = None;
    let cases = config.cases;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let fleet = rt.block_on(fleet_with(3, |_| {}));
    let base = fleet.admin_url();
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(10))
        .build()
        .expect("client");
    let tally = Tally {
        started: std::time::Instant::now(),
        reported: AtomicU64::new(0),
        cases: AtomicU64::new(0),
        created: AtomicU64::new(0),
        refused: AtomicU64::new(0),
        healed: AtomicU64::new(0),
        already_inactive: AtomicU64::new(0),
        rebind_failed: AtomicU64::new(0),
        accepted: Default::default(),
    };
    let mut runner = TestRunner::new(config);
    let result = runner.run(&body(), |b| {
        rt.block_on(one_case(&client, &base, b, &tally))
    });
    // Whatever happened, the endpoint still answers and the nodes are all there.
    let after = rt.block_on(async {
        let n: NodesResponse = client
            .get(format!("{base}/nodes"))
            .send()
            .await
            .expect("GET /nodes answers")
            .json()
            .await
            .expect("json");
        n.nodes.len()
    });
    let t = |c: &AtomicU64| c.load(Ordering::Relaxed);
    eprintln!(
        "admin fuzz: {} inputs sent ({} cases asked) in {:.1?}: {} created ({} healed, {} already \
         inactive, {} re-bind failures), {} refused with 400",
        t(&tally.cases),
        cases,
        tally.started.elapsed(),
        t(&tally.created),
        t(&tally.healed),
        t(&tally.already_inactive),
        t(&tally.rebind_failed),
        t(&tally.refused),
    );
    rt.block_on(fleet.shutdown());
    if let Err(e) = result {
        panic!("{e}");
    }
    assert_eq!(after, 3);
}

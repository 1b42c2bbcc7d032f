//! The two HTTP calls of the workload, in E2B's REST dialect.

use std::time::Duration;

use goose::prelude::*;
use serde::Deserialize;

use super::ledger::{Limit, LimitKind, Outcome};
use crate::api_key::ApiKey;
use crate::profile::SandboxSpec;

/// E2B's create response; only the fields the workload reads.
#[derive(Debug, Deserialize)]
struct CreatedSandbox {
    #[serde(rename = "sandboxID")]
    sandbox_id: String,
}

/// What a create returned.
pub(crate) struct CreateResult {
    pub outcome: Outcome,
    pub sandbox_id: Option<String>,
    pub node: Option<String>,
}

pub use crate::serve::NODE_HEADER;

/// Metadata key every create of a tagged run carries (value: the run's tag), so that
/// cleanup can find sandboxes whose 201 the run never read (E2B's `NewSandbox.metadata`).
pub const RUN_TAG_KEY: &str = "stampede-run";

/// The JSON body of `POST /sandboxes` (E2B's `NewSandbox`, plus the optional
/// `cpuCount`/`memoryMB` stampede's reference service honours).
pub(crate) fn create_body(spec: &SandboxSpec, run_tag: Option<&str>) -> serde_json::Value {
    let mut body = serde_json::json!({
        "templateID": spec.template,
        "timeout": spec.timeout.as_secs(),
        "cpuCount": spec.vcpu,
        "memoryMB": spec.ram_mb,
    });
    if let Some(tag) = run_tag {
        body["metadata"] = serde_json::json!({ RUN_TAG_KEY: tag });
    }
    body
}

/// `Retry-After` in milliseconds (delta-seconds form; an HTTP date is not parsed).
fn retry_after_ms(headers: &reqwest::header::HeaderMap) -> Option<u64> {
    let v = headers.get(reqwest::header::RETRY_AFTER)?.to_str().ok()?;
    v.trim().parse::<u64>().ok().map(|s| s.saturating_mul(1000))
}

/// A create ready to leave: everything but the send is done beforehand, so that the
/// start gate releases requests, not request building.
pub(crate) type PreparedCreate = Result<GooseRequest<'static>, String>;

/// Builds `POST {base}/sandboxes` on the goose user's client.
pub(crate) fn prepare_create(
    user: &GooseUser,
    base: &str,
    key: &ApiKey,
    body: &serde_json::Value,
) -> PreparedCreate {
    let url = format!("{}/sandboxes", base.trim_end_matches('/'));
    let rb = user
        .get_request_builder(&GooseMethod::Post, &url)
        .map_err(|e| format!("building request: {e}"))?
        // Replaces goose's own `User-Agent` default.
        .header("User-Agent", crate::http_client::USER_AGENT)
        .header("X-API-Key", key.expose())
        .json(body);
    Ok(GooseRequest::builder()
        .set_request_builder(rb)
        .name(CREATE_NAME)
        .expect_status_code(201)
        .build())
}

/// The name goose's report gives the creates.
pub(crate) const CREATE_NAME: &str = "POST /sandboxes";

/// Sends a prepared create through the goose user, so goose's report counts it too.
pub(crate) async fn send_create(user: &mut GooseUser, prepared: PreparedCreate) -> CreateResult {
    let req = match prepared {
        Ok(r) => r,
        Err(e) => return transport(e),
    };
    let resp = match user.request(req).await {
        Ok(r) => r.response,
        Err(e) => return transport(format!("goose: {e}")),
    };
    match resp {
        Ok(r) => {
            let status = r.status().as_u16();
            let headers = r.headers().clone();
            match r.bytes().await {
                Ok(body) => answered(status, &headers, &body),
                Err(e) if e.is_timeout() => timed_out(),
                Err(e) => transport(e.to_string()),
            }
        }
        Err(e) if e.is_timeout() => timed_out(),
        Err(e) => transport(e.to_string()),
    }
}

/// What a create's answer means: a 201's sandbox (and node), a 429's limit, or the
/// status as it is.
pub(crate) fn answered(
    status: u16,
    headers: &reqwest::header::HeaderMap,
    body: &[u8],
) -> CreateResult {
    let node = headers
        .get(NODE_HEADER)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    if status == 429 {
        let retry_after_ms = retry_after_ms(headers);
        let message = String::from_utf8_lossy(body);
        let kind = LimitKind::classify(retry_after_ms.is_some(), &message);
        return CreateResult {
            outcome: Outcome::Limited(Limit {
                kind,
                retry_after_ms,
            }),
            sandbox_id: None,
            node,
        };
    }
    let sandbox_id = if status == 201 {
        serde_json::from_slice::<CreatedSandbox>(body)
            .ok()
            .map(|c| c.sandbox_id)
    } else {
        None
    };
    CreateResult {
        outcome: Outcome::Status(status),
        sandbox_id,
        node,
    }
}

/// A create that got no answer within the request timeout.
pub(crate) fn timed_out() -> CreateResult {
    CreateResult {
        outcome: Outcome::Timeout,
        sandbox_id: None,
        node: None,
    }
}

/// A create that failed below HTTP.
pub(crate) fn transport(msg: String) -> CreateResult {
    CreateResult {
        outcome: Outcome::TransportError(msg),
        sandbox_id: None,
        node: None,
    }
}

/// `DELETE {base}/sandboxes/{id}` with a plain client (deletes are not paced).
pub(crate) async fn delete(
    client: &reqwest::Client,
    base: &str,
    key: &ApiKey,
    id: &str,
    timeout: Duration,
) -> Outcome {
    let url = sandbox_url(base, id);
    match client
        .delete(url)
        .header("X-API-Key", key.expose())
        .timeout(timeout)
        .send()
        .await
    {
        Ok(r) => Outcome::Status(r.status().as_u16()),
        Err(e) if e.is_timeout() => Outcome::Timeout,
        Err(e) => Outcome::TransportError(e.to_string()),
    }
}

/// `{api}/sandboxes/{id}` with `id` as one percent-encoded path segment: an id from an
/// API's answer is data, never a path (`../nodes/node-00` must not reach `/nodes`).
pub fn sandbox_url(api: &str, id: &str) -> String {
    let mut segment = String::with_capacity(id.len());
    for b in id.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'~') {
            segment.push(b as char);
        } else {
            // `.` too: `.` and `..` segments are resolved by URL parsers.
            segment.push_str(&format!("%{b:02X}"));
        }
    }
    format!("{}/sandboxes/{segment}", api.trim_end_matches('/'))
}

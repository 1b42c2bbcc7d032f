//! Sandboxes that runs against an external API left behind (a run killed before its
//! cleanup): every create carries the metadata `stampede-run=<tag>`, so they are found
//! by listing the API. `stampede cleanup` deletes them; a run warns when it sees some.

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use futures::stream::{self, StreamExt};
use serde::Deserialize;

use super::cleanup::{CleanupTarget, Killed};
use crate::api_key::ApiKey;
use crate::workload::RUN_TAG_KEY;

/// Deadline of one page of the listing.
const PAGE_TIMEOUT: Duration = Duration::from_secs(10);
/// Sandboxes per page (the largest `limit` E2B's `GET /v2/sandboxes` takes).
const PAGE_LIMIT: usize = 100;
/// Pages read at most: 100,000 sandboxes, far beyond what one API key runs.
const MAX_PAGES: usize = 1000;
/// DELETEs in flight at once.
const CONCURRENCY: usize = 16;
/// Bytes of one page read at most: a page of [`PAGE_LIMIT`] sandboxes is a few tens of
/// KB; an API that ignores `limit` must not make the harness read a gigabyte.
const MAX_PAGE_BYTES: usize = 8 << 20;
/// Bytes of the one-answer `GET /sandboxes` listing read at most.
const MAX_LIST_BYTES: usize = 64 << 20;
/// Sandboxes of the one-answer listing kept at most (as many as every page together).
const MAX_LIST_ITEMS: usize = PAGE_LIMIT * MAX_PAGES;

/// One sandbox as the API lists it.
#[derive(Debug, Clone, Deserialize)]
pub(crate) struct ListedSandbox {
    /// Its id.
    #[serde(rename = "sandboxID")]
    pub sandbox_id: String,
    /// Its metadata.
    #[serde(default)]
    pub metadata: Option<BTreeMap<String, String>>,
}

impl ListedSandbox {
    /// The `stampede-run` tag, if the sandbox has one.
    pub(crate) fn run_tag(&self) -> Option<&str> {
        self.metadata.as_ref()?.get(RUN_TAG_KEY).map(String::as_str)
    }
}

/// Lists the sandboxes of `api` whose metadata holds `key=value` (all when `filter` is
/// none), page by page (`GET /v2/sandboxes`, `limit` and `nextToken`, the next token in
/// the `x-next-token` header, as E2B's `spec/openapi.yml`). A service without
/// `/v2/sandboxes` (404) is read with `GET /sandboxes` in one answer.
pub(crate) async fn list(
    client: &reqwest::Client,
    api: &str,
    key: &ApiKey,
    filter: Option<(&str, &str)>,
) -> Result<Vec<ListedSandbox>, String> {
    let base = api.trim_end_matches('/');
    let meta = filter.map(|(k, v)| format!("{k}={v}"));
    let mut out = Vec::new();
    let mut token: Option<String> = None;
    for _ in 0..MAX_PAGES {
        let mut query: Vec<(&str, String)> = vec![("limit", PAGE_LIMIT.to_string())];
        if let Some(m) = &meta {
            query.push(("metadata", m.clone()));
        }
        if let Some(t) = &token {
            query.push(("nextToken", t.clone()));
        }
        let resp = client
            .get(with_query(&format!("{base}/v2/sandboxes"), &query)?)
            .header("X-API-Key", key.expose())
            .timeout(PAGE_TIMEOUT)
            .send()
            .await
            .map_err(|e| format!("GET /v2/sandboxes: {e}"))?;
        if resp.status() == reqwest::StatusCode::NOT_FOUND && token.is_none() {
            return list_v1(client, base, key, meta.as_deref()).await;
        }
        if !resp.status().is_success() {
            return Err(format!("GET /v2/sandboxes: status {}", resp.status()));
        }
        token = resp
            .headers()
            .get("x-next-token")
            .and_then(|v| v.to_str().ok())
            .filter(|t| !t.is_empty())
            .map(str::to_string);
        let page: Vec<ListedSandbox> = read_json(resp, MAX_PAGE_BYTES)
            .await
            .map_err(|e| format!("GET /v2/sandboxes: {e}"))?;
        if page.len() > PAGE_LIMIT {
            return Err(format!(
                "GET /v2/sandboxes: a page of {} sandboxes, {PAGE_LIMIT} asked",
                page.len()
            ));
        }
        let empty = page.is_empty();
        out.extend(page);
        if token.is_none() || empty {
            return Ok(matching(out, filter));
        }
    }
    Err(format!(
        "GET /v2/sandboxes: more than {MAX_PAGES} pages of {PAGE_LIMIT}"
    ))
}

async fn list_v1(
    client: &reqwest::Client,
    base: &str,
    key: &ApiKey,
    meta: Option<&str>,
) -> Result<Vec<ListedSandbox>, String> {
    let query: Vec<(&str, String)> = meta
        .map(|m| ("metadata", m.to_string()))
        .into_iter()
        .collect();
    let resp = client
        .get(with_query(&format!("{base}/sandboxes"), &query)?)
        .header("X-API-Key", key.expose())
        .timeout(PAGE_TIMEOUT)
        .send()
        .await
        .map_err(|e| format!("GET /sandboxes: {e}"))?;
    if !resp.status().is_success() {
        return Err(format!("GET /sandboxes: status {}", resp.status()));
    }
    let all: Vec<ListedSandbox> = read_json(resp, MAX_LIST_BYTES)
        .await
        .map_err(|e| format!("GET /sandboxes: {e}"))?;
    if all.len() > MAX_LIST_ITEMS {
        return Err(format!(
            "GET /sandboxes: {} sandboxes listed, more than {MAX_LIST_ITEMS}",
            all.len()
        ));
    }
    Ok(all)
}

/// The JSON body of `resp`, read chunk by chunk and refused past `max` bytes (the
/// declared length is checked first).
async fn read_json<T: serde::de::DeserializeOwned>(
    mut resp: reqwest::Response,
    max: usize,
) -> Result<T, String> {
    let too_big = || format!("the answer is larger than {max} bytes");
    if resp.content_length().is_some_and(|n| n > max as u64) {
        return Err(too_big());
    }
    let mut body = Vec::new();
    while let Some(chunk) = resp.chunk().await.map_err(|e| e.to_string())? {
        if body.len() + chunk.len() > max {
            return Err(too_big());
        }
        body.extend_from_slice(&chunk);
    }
    serde_json::from_slice(&body).map_err(|e| e.to_string())
}

/// `url` with `query` appended, form-encoded (`=` in a metadata filter is `%3D`).
fn with_query(url: &str, query: &[(&str, String)]) -> Result<reqwest::Url, String> {
    let mut u = reqwest::Url::parse(url).map_err(|e| format!("{url}: {e}"))?;
    if !query.is_empty() {
        let mut pairs = u.query_pairs_mut();
        for (k, v) in query {
            pairs.append_pair(k, v);
        }
    }
    Ok(u)
}

/// A service that ignores the metadata filter lists everything: filter here as well.
fn matching(all: Vec<ListedSandbox>, filter: Option<(&str, &str)>) -> Vec<ListedSandbox> {
    let Some((k, v)) = filter else {
        return all;
    };
    all.into_iter()
        .filter(|s| {
            s.metadata
                .as_ref()
                .and_then(|m| m.get(k))
                .is_some_and(|t| t == v)
        })
        .collect()
}

/// When the run that made `tag` started: tags end in `-<pid>-<unix ms>`
/// ([`run_tag`](super::cleanup::run_tag)); `None` for a tag of another shape.
pub(crate) fn tag_time(tag: &str) -> Option<SystemTime> {
    let ms: u64 = tag.rsplit('-').next()?.parse().ok()?;
    UNIX_EPOCH.checked_add(Duration::from_millis(ms))
}

/// Which leftovers `stampede cleanup` removes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Selector {
    /// The sandboxes of one run.
    Tag(String),
    /// The sandboxes of every run that started more than this long ago.
    OlderThan(Duration),
}

/// `stampede cleanup`: where, with which key, what.
#[derive(Debug, Clone)]
pub struct CleanupRequest {
    /// API base URL.
    pub api: String,
    /// Env var holding the API key.
    pub api_key_env: String,
    /// Which sandboxes.
    pub selector: Selector,
    /// List what would be deleted, delete nothing.
    pub dry_run: bool,
}

/// What `stampede cleanup` found and did.
#[derive(Debug, Clone, Default)]
pub struct CleanupSummary {
    /// `(sandbox id, run tag)` of every sandbox selected, each id once.
    pub found: Vec<(String, String)>,
    /// Deleted (answered 2xx).
    pub deleted: u64,
    /// Already gone (answered 404: expired, or deleted by someone else).
    pub already_gone: u64,
    /// `(sandbox id, last answer)` of the ones that could not be deleted.
    pub failed: Vec<(String, String)>,
}

/// Why `stampede cleanup` could not run.
#[derive(Debug, thiserror::Error)]
pub enum CleanupError {
    /// The key's env var is unset or empty.
    #[error("environment variable {0} is not set (it must hold the API key)")]
    MissingKey(String),
    /// The API could not be listed.
    #[error("listing the sandboxes of {api}: {why}")]
    List {
        /// API base URL.
        api: String,
        /// What went wrong.
        why: String,
    },
}

/// Finds the selected leftovers and, unless `dry_run`, deletes them (each with the
/// bounded retry of a run's own cleanup).
pub async fn cleanup_leftovers(req: &CleanupRequest) -> Result<CleanupSummary, CleanupError> {
    let key = ApiKey::from_env(&req.api_key_env)
        .ok_or_else(|| CleanupError::MissingKey(req.api_key_env.clone()))?;
    let client = crate::http_client::client();
    let filter = match &req.selector {
        Selector::Tag(t) => Some((RUN_TAG_KEY, t.as_str())),
        Selector::OlderThan(_) => None,
    };
    let listed = list(&client, &req.api, &key, filter)
        .await
        .map_err(|why| CleanupError::List {
            api: req.api.clone(),
            why,
        })?;
    let now = SystemTime::now();
    let mut found: Vec<(String, String)> = listed
        .iter()
        .filter_map(|s| {
            let tag = s.run_tag()?;
            let selected = match &req.selector {
                Selector::Tag(t) => tag == t,
                Selector::OlderThan(age) => tag_time(tag)
                    .and_then(|t| now.duration_since(t).ok())
                    .is_some_and(|d| d > *age),
            };
            selected.then(|| (s.sandbox_id.clone(), tag.to_string()))
        })
        .collect();
    found.sort();
    // An API that lists an id twice (two pages, or a bug) is asked to delete it once.
    found.dedup_by(|a, b| a.0 == b.0);
    let mut summary = CleanupSummary {
        found,
        ..CleanupSummary::default()
    };
    if req.dry_run {
        return Ok(summary);
    }
    let target = CleanupTarget {
        api: req.api.clone(),
        key,
        tag: String::new(),
    };
    let results: Vec<(String, Result<Killed, String>)> = stream::iter(summary.found.clone())
        .map(|(id, _)| {
            let (client, target) = (&client, &target);
            async move {
                let r = target.kill_telling(client, &id).await;
                (id, r)
            }
        })
        .buffer_unordered(CONCURRENCY)
        .collect()
        .await;
    for (id, r) in results {
        match r {
            Ok(Killed::Deleted) => summary.deleted += 1,
            Ok(Killed::AlreadyGone) => summary.already_gone += 1,
            Err(last) => summary.failed.push((id, last)),
        }
    }
    summary.failed.sort();
    Ok(summary)
}

/// Sandboxes of runs other than `own_tag` still running on `api`: `(tag, count)` by tag.
/// Listing errors are `Err` (the caller decides whether they matter).
pub(crate) async fn others_left(
    api: &str,
    key: &ApiKey,
    own_tag: &str,
) -> Result<BTreeMap<String, usize>, String> {
    let listed = list(&crate::http_client::client(), api, key, None).await?;
    let mut by_tag = BTreeMap::new();
    for s in &listed {
        if let Some(t) = s.run_tag().filter(|t| *t != own_tag) {
            *by_tag.entry(t.to_string()).or_insert(0) += 1;
        }
    }
    Ok(by_tag)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_tag_tells_when_its_run_started() {
        let t = super::super::cleanup::run_tag("nightly");
        let at = tag_time(&t).expect("a time");
        let age = SystemTime::now().duration_since(at).expect("in the past");
        assert!(age < Duration::from_secs(60), "{age:?}");
        assert_eq!(tag_time("no-time-here"), None);
    }
}

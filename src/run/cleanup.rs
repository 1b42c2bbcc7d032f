//! Cleanup after a run against an external API: every sandbox the run created and did
//! not delete is killed (`DELETE /sandboxes/{id}`) with a bounded retry. The run's
//! creates carry the metadata tag `stampede-run=<tag>`, so sandboxes whose 201 the run
//! never read (creates given up on a signal) are found by listing the API by that tag.

use std::collections::BTreeSet;
use std::time::Duration;

use futures::stream::{self, StreamExt};

use super::abort::AbortState;
use crate::api_key::ApiKey;
use crate::report::{CleanupReport, NotCleaned};
use crate::workload::RUN_TAG_KEY;

/// Attempts per DELETE before the id is reported as not cleaned.
const DELETE_ATTEMPTS: u32 = 3;
/// Deadline of one DELETE.
const DELETE_TIMEOUT: Duration = Duration::from_secs(5);
/// Wait before the second attempt (doubled before each later one).
const FIRST_BACKOFF: Duration = Duration::from_millis(200);
/// DELETEs in flight at once.
const CONCURRENCY: usize = 16;
/// When creates were given up, how long their sandboxes may still appear in the
/// listing after cleanup started, and how often it is read again meanwhile.
const LATE_WINDOW: Duration = Duration::from_secs(1);
const LATE_POLL: Duration = Duration::from_millis(250);

/// Where and how to clean up.
#[derive(Debug, Clone)]
pub(crate) struct CleanupTarget {
    /// API base URL.
    pub api: String,
    /// `X-API-Key`.
    pub key: ApiKey,
    /// Value of this run's `stampede-run` metadata.
    pub tag: String,
}

/// What the run knows it left: 201s not deleted, and how many of its creates the
/// workload deleted itself.
#[derive(Debug, Clone, Default)]
pub(crate) struct Leftovers {
    /// Ids acknowledged with a 201 and not deleted.
    pub live: Vec<String>,
    /// Every id acknowledged with a 201 (a bounded ledger's: those not deleted and the
    /// last [`RECENT`](crate::aggregate::RECENT) deleted, so a sandbox deleted long
    /// before and still listed counts as found by its tag).
    pub acked: BTreeSet<String>,
    /// 201s in all.
    pub created: u64,
    /// Deleted by the workload's lifetime.
    pub deleted: u64,
    /// Whether some creates were given up (their sandboxes may appear late).
    pub gave_up: bool,
}

impl CleanupTarget {
    /// Ids listed by the API that carry this run's tag.
    async fn tagged(&self, client: &reqwest::Client) -> Result<BTreeSet<String>, String> {
        let listed =
            super::leftovers::list(client, &self.api, &self.key, Some((RUN_TAG_KEY, &self.tag)))
                .await?;
        Ok(listed.into_iter().map(|s| s.sandbox_id).collect())
    }

    /// Kills `id` with up to [`DELETE_ATTEMPTS`] tries; `Err` holds the last answer.
    pub(super) async fn kill(&self, client: &reqwest::Client, id: &str) -> Result<(), String> {
        self.kill_telling(client, id).await.map(|_| ())
    }

    /// [`kill`](Self::kill), telling a sandbox deleted from one already gone (404).
    pub(super) async fn kill_telling(
        &self,
        client: &reqwest::Client,
        id: &str,
    ) -> Result<Killed, String> {
        let url = crate::workload::sandbox_url(&self.api, id);
        let mut backoff = FIRST_BACKOFF;
        let mut last = String::new();
        for attempt in 0..DELETE_ATTEMPTS {
            if attempt > 0 {
                tokio::time::sleep(backoff).await;
                backoff *= 2;
            }
            match client
                .delete(&url)
                .header("X-API-Key", self.key.expose())
                .timeout(DELETE_TIMEOUT)
                .send()
                .await
            {
                Ok(r) if r.status().is_success() => return Ok(Killed::Deleted),
                // Expired, or deleted by someone else.
                Ok(r) if r.status().as_u16() == 404 => return Ok(Killed::AlreadyGone),
                Ok(r) => last = format!("status {}", r.status()),
                Err(e) if e.is_timeout() => last = format!("no answer within {DELETE_TIMEOUT:?}"),
                Err(e) => last = e.to_string(),
            }
        }
        Err(last)
    }
}

/// How a DELETE ended well.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Killed {
    /// Answered 2xx.
    Deleted,
    /// Answered 404: expired, or deleted by someone else.
    AlreadyGone,
}

/// Kills every sandbox of `left` and every tagged one, registering what is still to
/// kill with `abort` (a second signal prints it).
pub(crate) async fn clean(
    target: &CleanupTarget,
    left: &Leftovers,
    abort: &AbortState,
) -> CleanupReport {
    let client = crate::http_client::client();
    let known: BTreeSet<String> = left.live.iter().cloned().collect();
    let mut report = CleanupReport {
        created: left.created,
        deleted: left.deleted,
        ..CleanupReport::default()
    };
    let mut done: BTreeSet<String> = BTreeSet::new();
    let start = tokio::time::Instant::now();
    let mut pending = known.clone();
    loop {
        match target.tagged(&client).await {
            Ok(tagged) => {
                for id in tagged {
                    if done.contains(&id) {
                        continue;
                    }
                    if !left.acked.contains(&id) && !known.contains(&id) {
                        report.found_by_tag += 1;
                    }
                    pending.insert(id);
                }
            }
            Err(e) => report.listing_error = Some(e),
        }
        pending.retain(|id| !done.contains(id));
        abort.set_sandboxes_left(&target.api, pending.iter().cloned().collect());
        if !pending.is_empty() {
            // A readiness mark for whoever drives the process (tests, CI).
            tracing::info!(
                sandboxes = pending.len(),
                "cleanup: killing this run's sandboxes"
            );
        }
        let results: Vec<(String, Result<(), String>)> = stream::iter(pending.clone())
            .map(|id| {
                let client = &client;
                async move {
                    let r = target.kill(client, &id).await;
                    (id, r)
                }
            })
            .buffer_unordered(CONCURRENCY)
            .collect()
            .await;
        for (id, r) in results {
            match r {
                Ok(()) => {
                    report.cleaned += 1;
                    abort.sandbox_cleaned(&id);
                }
                Err(last) => report.not_cleaned.push(NotCleaned {
                    id: id.clone(),
                    last,
                }),
            }
            done.insert(id);
        }
        pending.clear();
        // Creates given up may still finish on the service: read the listing again
        // for a short, bounded while.
        if !left.gave_up || report.listing_error.is_some() || start.elapsed() >= LATE_WINDOW {
            break;
        }
        tokio::time::sleep(LATE_POLL).await;
    }
    report.created += report.found_by_tag;
    report.not_cleaned.sort_by(|a, b| a.id.cmp(&b.id));
    abort.cleanup_finished();
    report
}

/// A tag unique to this process and moment: `<profile>-<pid>-<unix ms>`, with the
/// profile name reduced to `[a-z0-9-]` so that it needs no URL encoding.
pub(crate) fn run_tag(profile: &str) -> String {
    let name: String = profile
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_lowercase()
            } else {
                '-'
            }
        })
        .take(40)
        .collect();
    let ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis());
    format!("{name}-{}-{ms}", std::process::id())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_run_tag_needs_no_url_encoding() {
        let t = run_tag("Nightly guard: 10 nodes/ë");
        assert!(
            t.chars().all(|c| c.is_ascii_alphanumeric() || c == '-'),
            "{t}"
        );
        assert!(t.starts_with("nightly-guard--10-nodes--"), "{t}");
    }

    #[test]
    fn a_sandbox_id_is_one_encoded_path_segment() {
        let url = crate::workload::sandbox_url("http://h:1/", "../nodes/node-00");
        assert_eq!(url, "http://h:1/sandboxes/%2E%2E%2Fnodes%2Fnode-00");
        let parsed = reqwest::Url::parse(&url).expect("a URL");
        assert_eq!(parsed.path(), "/sandboxes/%2E%2E%2Fnodes%2Fnode-00");
        assert_eq!(
            crate::workload::sandbox_url("http://h", "i3x-Ab_9"),
            "http://h/sandboxes/i3x-Ab_9"
        );
    }
}

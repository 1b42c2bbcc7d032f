//! What a run against an external API adds to its report: where node truth came from
//! and how stale it can be, what was on the nodes before the run, the interrupted and
//! limited creates, and the cleanup of the sandboxes the run created.

use std::collections::BTreeMap;
use std::io::{self, Write};

use serde::{Deserialize, Serialize};

/// Status key of creates given up when the run was interrupted.
pub const CANCELLED_KEY: &str = "cancelled";

/// Creates answered 429 in a status breakdown (`429`, `429_team_limit`, `429_rate_limit`).
pub fn limited_count(statuses: &BTreeMap<String, u64>) -> u64 {
    statuses
        .iter()
        .filter(|(k, _)| k.starts_with("429"))
        .map(|(_, v)| v)
        .sum()
}

/// Staging facts of one external run.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct StagingFacts {
    /// The collector's truth source, e.g. `E2B GET /nodes sandboxCount`.
    pub truth_source: String,
    /// How stale that source can be, e.g. `up to one node sync (20s)`; `live` when exact.
    pub truth_lag: String,
    /// How the final read waited for the source to catch up.
    pub final_read: FinalRead,
    /// What the nodes held before the run (subtracted from every count of this report).
    pub before: Baseline,
    /// Creates in flight when the run was interrupted that were given up.
    pub cancelled: u64,
    /// Creates answered 429.
    pub limited: u64,
    /// Creates sent after the interrupting signal (should be 0), when interrupted.
    #[serde(default)]
    pub sent_after_signal: Option<u64>,
    /// Cleanup of the sandboxes this run created; `None` when it did not run.
    #[serde(default)]
    pub cleanup: Option<CleanupReport>,
}

/// The final read of node truth.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct FinalRead {
    /// Time spent waiting for counts to settle, ms.
    pub waited_ms: f64,
    /// Whether they settled (this run's count matched the creates it kept) in time.
    pub settled: bool,
    /// What the read waited for.
    pub rule: String,
}

/// The nodes' sandboxes before the run.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Baseline {
    /// Sandboxes already there, all nodes.
    pub sandboxes: u64,
    /// Per node id.
    pub per_node: BTreeMap<String, u64>,
    /// Whether they were subtracted by id (the source lists ids) or by count.
    pub by_id: bool,
}

/// What cleanup did with the sandboxes the run created and did not delete.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct CleanupReport {
    /// `--keep` was given: nothing was deleted.
    pub kept: bool,
    /// Sandboxes the run created (201s, plus tagged sandboxes found by listing).
    pub created: u64,
    /// Of those, deleted by the workload's own `lifetime`.
    pub deleted: u64,
    /// Killed by cleanup.
    pub cleaned: u64,
    /// Found by listing the run's metadata tag but never acknowledged to the client
    /// (e.g. creates given up on a signal).
    pub found_by_tag: u64,
    /// Ids cleanup could not kill (with the last answer), left running.
    pub not_cleaned: Vec<NotCleaned>,
    /// Why the listing by tag was not possible, if it was not.
    #[serde(default)]
    pub listing_error: Option<String>,
}

/// A sandbox cleanup could not kill.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct NotCleaned {
    /// Sandbox id.
    pub id: String,
    /// The last DELETE's outcome.
    pub last: String,
}

/// Text lines of `facts` for the terminal and Markdown writers.
pub fn write_staging(facts: &StagingFacts, w: &mut impl Write) -> io::Result<()> {
    writeln!(
        w,
        "truth: {} (lag: {}); final read {} after {:.0} ms ({})",
        facts.truth_source,
        facts.truth_lag,
        if facts.final_read.settled {
            "settled"
        } else {
            "did NOT settle"
        },
        facts.final_read.waited_ms,
        facts.final_read.rule
    )?;
    writeln!(
        w,
        "already on the nodes before the run: {} sandboxes (subtracted by {})",
        facts.before.sandboxes,
        if facts.before.by_id { "id" } else { "count" }
    )?;
    writeln!(
        w,
        "creates cancelled by a signal: {}; answered 429: {}",
        facts.cancelled, facts.limited
    )?;
    if let Some(n) = facts.sent_after_signal {
        writeln!(w, "creates sent after the signal: {n}")?;
    }
    match &facts.cleanup {
        None => writeln!(w, "cleanup: did not run")?,
        Some(c) if c.kept => writeln!(
            w,
            "cleanup: skipped (--keep); {} sandboxes left running",
            c.created.saturating_sub(c.deleted)
        )?,
        Some(c) => {
            writeln!(
                w,
                "cleanup: created {} / deleted {} / cleaned {} / could not clean {} (found by tag: {})",
                c.created,
                c.deleted,
                c.cleaned,
                c.not_cleaned.len(),
                c.found_by_tag
            )?;
            for n in &c.not_cleaned {
                writeln!(w, "  not cleaned: {} ({})", n.id, n.last)?;
            }
            if let Some(e) = &c.listing_error {
                writeln!(w, "  listing by tag failed: {e}")?;
            }
        }
    }
    Ok(())
}

//! `stampede cleanup`: the sandboxes runs against an external API left running.

use std::process::ExitCode;

use super::{ApiFlags, CliError};
use crate::redact::redact_userinfo;
use crate::run::{cleanup_leftovers, CleanupRequest, CleanupSummary, Selector};
use crate::stdout::closed_is_fine;

/// `stampede cleanup`'s arguments.
#[derive(Debug, clap::Args)]
pub struct CleanupArgs {
    /// The API and its key (the same flags as `run`).
    #[command(flatten)]
    pub target: ApiFlags,
    /// The sandboxes of the run with this tag.
    #[arg(
        long,
        value_name = "TAG",
        required_unless_present = "older_than",
        conflicts_with = "older_than"
    )]
    pub tag: Option<String>,
    /// The sandboxes of every stampede run that started longer ago than this
    /// (e.g. `1h`, `30m`).
    #[arg(long, value_name = "AGE", value_parser = humantime::parse_duration)]
    pub older_than: Option<std::time::Duration>,
    /// List what would be deleted; delete nothing.
    #[arg(long)]
    pub dry_run: bool,
}

/// Lists (and deletes) the selected sandboxes: 0 = all deleted or listed, 1 = some could
/// not be deleted, 2 = the API could not be listed.
pub async fn run(args: CleanupArgs) -> Result<ExitCode, CliError> {
    let selector = match (args.tag, args.older_than) {
        (Some(t), _) => Selector::Tag(t),
        (None, Some(age)) => Selector::OlderThan(age),
        // clap requires one of them.
        (None, None) => return Ok(ExitCode::from(2)),
    };
    let req = CleanupRequest {
        api: args.target.api.unwrap_or_default(),
        api_key_env: args
            .target
            .api_key_env
            .unwrap_or_else(crate::profile::ExternalPlacement::default_api_key_env),
        selector,
        dry_run: args.dry_run,
    };
    match cleanup_leftovers(&req).await {
        Ok(summary) => {
            closed_is_fine(print_cleanup(&req, &summary, &mut std::io::stdout().lock()))?;
            Ok(if summary.failed.is_empty() {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(1)
            })
        }
        Err(e) => {
            eprintln!("error: {}", redact_userinfo(&e.to_string()));
            Ok(ExitCode::from(2))
        }
    }
}

/// What `stampede cleanup` found and did, one sandbox a line.
fn print_cleanup(
    req: &CleanupRequest,
    s: &CleanupSummary,
    out: &mut impl std::io::Write,
) -> std::io::Result<()> {
    let verb = if req.dry_run { "would delete" } else { "found" };
    for (id, tag) in &s.found {
        writeln!(out, "{verb} {id} (stampede-run={tag})")?;
    }
    for (id, why) in &s.failed {
        writeln!(out, "could not delete {id}: {}", redact_userinfo(why))?;
    }
    if req.dry_run {
        writeln!(
            out,
            "dry run: {} sandboxes on {}, none deleted",
            s.found.len(),
            redact_userinfo(&req.api)
        )
    } else {
        writeln!(
            out,
            "deleted {} of {} sandboxes on {} ({} already gone, {} could not be deleted)",
            s.deleted,
            s.found.len(),
            redact_userinfo(&req.api),
            s.already_gone,
            s.failed.len()
        )?;
        // A killed run's ledger is gone with it: how many of its creates were still
        // unanswered is not known here.
        writeln!(
            out,
            "creates still unanswered when a run was killed may never have been recorded by \
             the API, so no listing finds them: the API's orphan sweep removes them"
        )
    }
}

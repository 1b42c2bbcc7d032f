//! GitHub Actions' job summary: when `GITHUB_STEP_SUMMARY` names a file, the report's
//! Markdown is appended to it (the runner renders that file on the run's page).

use std::fs::OpenOptions;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use super::markdown::write_markdown;
use super::model::Report;

/// Environment variable GitHub Actions sets to the job summary file of a step.
pub const STEP_SUMMARY_ENV: &str = "GITHUB_STEP_SUMMARY";

/// The job summary file, when the environment names one.
pub fn step_summary_path() -> Option<PathBuf> {
    std::env::var_os(STEP_SUMMARY_ENV)
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
}

/// Append `report`'s Markdown to `path` (created if missing), after a blank line so
/// that several reports of one step stay apart.
pub fn append_step_summary(report: &Report, path: &Path) -> io::Result<()> {
    let mut md = Vec::new();
    write_markdown(report, &mut md)?;
    append_markdown(&md, path)
}

/// Append `md` to `path` (created if missing), after a blank line.
fn append_markdown(md: &[u8], path: &Path) -> io::Result<()> {
    let mut f = OpenOptions::new().create(true).append(true).open(path)?;
    f.write_all(b"\n")?;
    f.write_all(md)?;
    f.flush()
}

/// [`append_step_summary`] to the file the environment names, if any; a failure is a
/// warning on stderr (the report is written already: the verdict must not change).
pub fn append_to_step_summary(report: &Report) {
    if let Some(path) = step_summary_path() {
        if let Err(e) = append_step_summary(report, &path) {
            warn_unappended("summary", &path, &e);
        }
    }
}

fn warn_unappended(what: &str, path: &Path, e: &io::Error) {
    eprintln!(
        "warning: cannot append the {what} to {STEP_SUMMARY_ENV} ({}): {e}",
        path.display()
    );
}

/// Appends `md` (a verb's Markdown, named `what` in a warning) to the file the
/// environment names, if any, after a blank line; a failure is a warning on stderr.
pub fn append_markdown_to_step_summary(what: &str, md: &[u8]) {
    if let Some(path) = step_summary_path() {
        if let Err(e) = append_markdown(md, &path) {
            warn_unappended(what, &path, &e);
        }
    }
}

//! Running a profile written inline by a test: a private temp dir (removed on drop) holds
//! the YAML and the report; the run is quiet and bounded in time.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::time::Duration;

use stampede::run::{run_profile, RunOptions, RunOutcome};

/// A directory removed when dropped.
pub struct TempDir(pub PathBuf);

impl TempDir {
    /// A fresh, empty `stampede-<tag>-<pid>-<n>` under the system temp dir.
    pub fn new(tag: &str) -> TempDir {
        let dir = std::env::temp_dir().join(format!("stampede-{tag}-{}", super::unique()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("temp dir");
        TempDir(dir)
    }

    /// The directory.
    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Writes `yaml` as `<tag>.yaml` in a fresh temp dir and runs it quietly (report under
/// the same dir), failing the test past `limit` or when no report comes out.
pub async fn run_inline(tag: &str, yaml: &str, limit: Duration) -> (TempDir, RunOutcome) {
    run_inline_with(tag, yaml, limit, |_, _| {}).await
}

/// [`run_inline`], with `adjust` changing the run's options (given the temp dir).
pub async fn run_inline_with(
    tag: &str,
    yaml: &str,
    limit: Duration,
    adjust: impl FnOnce(&Path, &mut RunOptions),
) -> (TempDir, RunOutcome) {
    let dir = TempDir::new(tag);
    let path = dir.path().join(format!("{tag}.yaml"));
    std::fs::write(&path, yaml).expect("profile written");
    let mut opts = RunOptions {
        report_dir: Some(dir.path().join("reports")),
        quiet: true,
        ..Default::default()
    };
    adjust(dir.path(), &mut opts);
    let out = tokio::time::timeout(limit, run_profile(&path, opts))
        .await
        .unwrap_or_else(|_| panic!("the run ends within {limit:?}"))
        .expect("the run produces a report");
    (dir, out)
}

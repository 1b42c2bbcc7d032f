//! goose's scratch directory (`.goose-<pid>/` in the report parent): goose writes its HTML
//! reports there until the run's report directory exists. Removed on every way out of a
//! run: moved into the report, dropped on error, removed by an abort.

use std::path::{Path, PathBuf};

use crate::run::AbortState;

/// The scratch directory of one run; dropping it removes the directory.
#[derive(Debug)]
pub(crate) struct GooseScratch {
    dir: PathBuf,
    abort: AbortState,
}

impl GooseScratch {
    /// The scratch directory of this process under report parent `parent`.
    pub(crate) fn dir_under(parent: &Path) -> PathBuf {
        parent.join(format!(".goose-{}", std::process::id()))
    }

    /// Scratch under `parent` for this process, registered with `abort`. The scratch
    /// directories that runs killed without a chance to clean up (SIGKILL) left under
    /// `parent` are removed first.
    pub(crate) fn new(parent: &Path, abort: &AbortState) -> Self {
        remove_stale(parent);
        let dir = Self::dir_under(parent);
        abort.add_scratch(dir.clone());
        Self {
            dir,
            abort: abort.clone(),
        }
    }

    /// Moves what goose wrote into `report_dir`.
    pub(crate) fn move_into(&self, report_dir: &Path) -> std::io::Result<()> {
        let entries = match std::fs::read_dir(&self.dir) {
            Ok(e) => e,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
            Err(e) => return Err(e),
        };
        for e in entries {
            let e = e?;
            std::fs::rename(e.path(), report_dir.join(e.file_name()))?;
        }
        Ok(())
    }
}

/// Removes every `.goose-<pid>/` under `parent` whose process is gone. A directory
/// whose pid is alive (another run, or a process that reused the pid) is left alone.
fn remove_stale(parent: &Path) {
    let Ok(entries) = std::fs::read_dir(parent) else {
        return; // no report parent yet: nothing stale
    };
    for e in entries.flatten() {
        let name = e.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|n| n.strip_prefix(".goose-"))
            .and_then(|p| p.parse::<u32>().ok())
        else {
            continue;
        };
        if pid == std::process::id() || process_alive(pid) {
            continue;
        }
        match std::fs::remove_dir_all(e.path()) {
            Ok(()) => {
                tracing::info!(dir = %e.path().display(), "removed a dead run's goose scratch directory")
            }
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => {}
            Err(err) => {
                tracing::warn!(dir = %e.path().display(), error = %err, "cannot remove a dead run's goose scratch directory");
            }
        }
    }
}

/// Whether a process with this pid exists (signal 0 is sent to nobody; only ESRCH
/// means it is gone, EPERM means it exists under another user).
fn process_alive(pid: u32) -> bool {
    #[cfg(unix)]
    {
        let Ok(pid) = libc::pid_t::try_from(pid) else {
            return true;
        };
        if pid <= 0 {
            return true;
        }
        // SAFETY: kill with signal 0 only checks that the process exists.
        let r = unsafe { libc::kill(pid, 0) };
        r == 0 || std::io::Error::last_os_error().raw_os_error() != Some(libc::ESRCH)
    }
    #[cfg(not(unix))]
    {
        let _ = pid;
        true
    }
}

impl Drop for GooseScratch {
    fn drop(&mut self) {
        match std::fs::remove_dir_all(&self.dir) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => {
                tracing::warn!(dir = %self.dir.display(), error = %e, "cannot remove goose's scratch directory");
            }
        }
        self.abort.remove_scratch(&self.dir);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn staging_is_moved_then_removed_even_when_nothing_was_staged() {
        let root = std::env::temp_dir().join(format!("stampede-staging-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        let report = root.join("report");
        std::fs::create_dir_all(&report).unwrap();
        let abort = AbortState::default();
        let staged = GooseScratch::dir_under(&root);
        {
            let s = GooseScratch::new(&root, &abort);
            std::fs::create_dir_all(&staged).unwrap();
            std::fs::write(staged.join("goose-x.html"), "x").unwrap();
            s.move_into(&report).unwrap();
        }
        assert!(report.join("goose-x.html").exists());
        {
            let _s = GooseScratch::new(&root, &abort);
            std::fs::create_dir_all(&staged).unwrap();
            // dropped without moving (a failed report write): still removed
        }
        assert!(!staged.exists());
        {
            let s = GooseScratch::new(&root, &abort);
            s.move_into(&report).unwrap(); // nothing staged
        }
        let _ = std::fs::remove_dir_all(&root);
    }
}

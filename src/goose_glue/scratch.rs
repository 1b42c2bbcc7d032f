//! goose's scratch directory (`.goose-<pid>/` in the report parent): goose writes its HTML
//! reports there until the run's report directory exists. Removed on every way out of a
//! run: moved into the report, dropped on error, removed by an abort.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

/// The scratch directories of this process that exist or may be created: what an
/// abort removes when a run cannot. Cheap to clone; clones share the list.
#[derive(Debug, Clone, Default)]
pub(crate) struct ScratchDirs {
    dirs: Arc<Mutex<BTreeSet<PathBuf>>>,
}

impl ScratchDirs {
    /// Registers a scratch directory.
    pub(crate) fn add(&self, dir: PathBuf) {
        self.lock().insert(dir);
    }

    /// Forgets a scratch directory (it was removed).
    pub(crate) fn remove(&self, dir: &Path) {
        self.lock().remove(dir);
    }

    /// The registered directories, in order.
    pub(crate) fn listed(&self) -> BTreeSet<PathBuf> {
        self.lock().clone()
    }

    fn lock(&self) -> MutexGuard<'_, BTreeSet<PathBuf>> {
        self.dirs
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// The scratch directory of one run; dropping it removes the directory.
#[derive(Debug)]
pub(crate) struct GooseScratch {
    dir: PathBuf,
    registry: ScratchDirs,
}

impl GooseScratch {
    /// The scratch directory of this process under report parent `parent`.
    pub(crate) fn dir_under(parent: &Path) -> PathBuf {
        parent.join(format!(".goose-{}", std::process::id()))
    }

    /// Scratch under `parent` for this process, registered in `registry` (what an
    /// abort removes). The scratch directories that runs killed without a chance to
    /// clean up (SIGKILL) left under `parent` are removed first.
    pub(crate) fn new(parent: &Path, registry: &ScratchDirs) -> Self {
        remove_stale(parent);
        let dir = Self::dir_under(parent);
        registry.add(dir.clone());
        Self {
            dir,
            registry: registry.clone(),
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
        self.registry.remove(&self.dir);
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
        let abort = ScratchDirs::default();
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

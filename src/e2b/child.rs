//! The processes a stack runs (PostgreSQL, Redis, mock-node, the API): each in its own
//! process group, killed by the kernel if the harness dies (`PR_SET_PDEATHSIG`), and
//! listed in the run folder's `stack.json` so that a later `stampede e2b` reaps what a
//! SIGKILLed harness left (a grandchild the kernel signal does not reach, the folder).

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tokio::process::{Child, Command};

/// Every process a stack starts carries its run folder in this env var, so that a
/// test (or a user) can find what belongs to a run in `/proc/*/environ`.
pub const SESSION_VAR: &str = "STAMPEDE_E2B_RUN_DIR";

/// The registry file in a run folder.
pub const REGISTRY: &str = "stack.json";

/// A process the registry lists.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Listed {
    /// What it is (`postgres`, `redis`, `mock-node`, `api`).
    pub role: String,
    /// Its pid, also its process group.
    pub pid: u32,
    /// Its start time in clock ticks since boot (`/proc/PID/stat` field 22), so that a
    /// reused pid is never killed.
    pub start: u64,
}

/// A run folder's registry: the harness that owns it and the processes it started.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Registry {
    /// The harness's pid.
    pub owner: u32,
    /// The harness's start time (as [`Listed::start`]).
    pub owner_start: u64,
    /// The processes, in start order.
    pub children: Vec<Listed>,
    /// Folders outside the run folder that belong to it (PostgreSQL's data, when it
    /// runs as another user), removed with it.
    #[serde(default)]
    pub dirs: Vec<PathBuf>,
}

/// Errors of starting or stopping a process.
#[derive(Debug, thiserror::Error)]
pub enum ChildError {
    /// The program cannot be started.
    #[error("cannot start {role} ({program})")]
    Spawn {
        /// The role.
        role: String,
        /// The program.
        program: String,
        /// Cause.
        #[source]
        source: std::io::Error,
    },
    /// The registry cannot be written.
    #[error("cannot write {}", path.display())]
    Registry {
        /// The file.
        path: PathBuf,
        /// Cause.
        #[source]
        source: std::io::Error,
    },
}

/// A started process.
#[derive(Debug)]
pub struct Proc {
    /// Its role.
    pub role: String,
    /// The process.
    pub child: Child,
    /// Its pid (and process group).
    pub pid: u32,
    /// How it is asked to stop (SIGTERM; SIGINT for PostgreSQL's fast shutdown).
    pub stop_signal: i32,
    /// How long it may take to stop before SIGKILL.
    pub grace: Duration,
}

/// The processes of one run folder, stopped in reverse start order.
#[derive(Debug)]
pub struct Procs {
    dir: PathBuf,
    registry: Registry,
    procs: Vec<Proc>,
}

impl Procs {
    /// An empty set whose registry lives in `dir`.
    pub fn new(dir: &Path) -> Result<Self, ChildError> {
        let me = std::process::id();
        let p = Procs {
            dir: dir.to_path_buf(),
            registry: Registry {
                owner: me,
                owner_start: start_time(me).unwrap_or(0),
                children: Vec::new(),
                dirs: Vec::new(),
            },
            procs: Vec::new(),
        };
        p.save()?;
        Ok(p)
    }

    /// Starts `cmd` as `role`; stdout and stderr as the caller set them (default: null).
    pub fn spawn(
        &mut self,
        role: &str,
        cmd: Command,
        stop_signal: i32,
        grace: Duration,
    ) -> Result<&mut Proc, ChildError> {
        let (child, pid) = self.start(role, cmd)?;
        self.procs.push(Proc {
            role: role.to_string(),
            child,
            pid,
            stop_signal,
            grace,
        });
        Ok(self.procs.last_mut().expect("just pushed"))
    }

    /// Starts `cmd` as `role` like [`spawn`](Self::spawn) (its own group, killed with
    /// the harness, listed in the registry) but hands the child to the caller, who
    /// waits on it and then calls [`forget`](Self::forget). For a process the caller
    /// watches itself (the workload) while [`exited`](Self::exited) watches the stack.
    pub fn spawn_watched(&mut self, role: &str, cmd: Command) -> Result<Child, ChildError> {
        Ok(self.start(role, cmd)?.0)
    }

    /// Drops the process `pid` from the registry once its caller saw it exit.
    pub fn forget(&mut self, pid: u32) -> Result<(), ChildError> {
        self.registry.children.retain(|c| c.pid != pid);
        self.save()
    }

    fn start(&mut self, role: &str, mut cmd: Command) -> Result<(Child, u32), ChildError> {
        let program = format!("{:?}", cmd.as_std().get_program());
        cmd.stdin(Stdio::null())
            .process_group(0)
            .kill_on_drop(true)
            .env(SESSION_VAR, &self.dir);
        // SAFETY: prctl(PR_SET_PDEATHSIG) is async-signal-safe and touches only the
        // child's own attributes; nothing else runs between fork and exec here.
        unsafe {
            cmd.pre_exec(|| {
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let child = cmd.spawn().map_err(|source| ChildError::Spawn {
            role: role.to_string(),
            program,
            source,
        })?;
        let pid = child.id().unwrap_or(0);
        self.registry.children.push(Listed {
            role: role.to_string(),
            pid,
            start: start_time(pid).unwrap_or(0),
        });
        self.save()?;
        Ok((child, pid))
    }

    /// Registers a folder outside the run folder, removed when the stack stops.
    pub fn own_dir(&mut self, dir: &Path) -> Result<(), ChildError> {
        self.registry.dirs.push(dir.to_path_buf());
        self.save()
    }

    /// A role whose process has exited, with its status.
    pub fn exited(&mut self) -> Option<(String, std::process::ExitStatus)> {
        for p in &mut self.procs {
            if let Ok(Some(status)) = p.child.try_wait() {
                return Some((p.role.clone(), status));
            }
        }
        None
    }

    /// Stops every process, newest first (signal, wait its grace, then SIGKILL the
    /// group), and removes the registry; returns one line per process stopped.
    pub async fn stop_all(&mut self) -> Vec<String> {
        let mut lines = Vec::new();
        while let Some(mut p) = self.procs.pop() {
            lines.push(stop(&mut p).await);
            self.registry.children.retain(|c| c.pid != p.pid);
            let _ = self.save();
        }
        for d in std::mem::take(&mut self.registry.dirs) {
            let _ = std::fs::remove_dir_all(d);
        }
        let _ = std::fs::remove_file(self.dir.join(REGISTRY));
        lines
    }

    fn save(&self) -> Result<(), ChildError> {
        let path = self.dir.join(REGISTRY);
        let tmp = self.dir.join(format!("{REGISTRY}.tmp"));
        let text = serde_json::to_vec_pretty(&self.registry).expect("plain data");
        std::fs::write(&tmp, text)
            .and_then(|()| std::fs::rename(&tmp, &path))
            .map_err(|source| ChildError::Registry { path, source })
    }
}

async fn stop(p: &mut Proc) -> String {
    if let Ok(Some(status)) = p.child.try_wait() {
        return format!("{} (pid {}) had already exited: {status}", p.role, p.pid);
    }
    signal_group(p.pid, p.stop_signal);
    let how = match tokio::time::timeout(p.grace, p.child.wait()).await {
        Ok(_) => "stopped",
        Err(_) => {
            signal_group(p.pid, libc::SIGKILL);
            let _ = tokio::time::timeout(Duration::from_secs(5), p.child.wait()).await;
            "killed after its grace"
        }
    };
    // Whatever of its group is left (a postmaster's backends, a `go run` child).
    signal_group(p.pid, libc::SIGKILL);
    format!("{} (pid {}) {how}", p.role, p.pid)
}

/// Sends `sig` to the process group `pgid`.
fn signal_group(pgid: u32, sig: i32) {
    if pgid == 0 {
        return;
    }
    // SAFETY: kill(2) with a negative pid signals a process group; no memory is shared.
    unsafe {
        libc::kill(-(pgid as i32), sig);
    }
}

/// A process's start time in clock ticks since boot, if it is alive.
pub fn start_time(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Field 2 (comm) may hold spaces and parentheses: count from the last ')'.
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace().nth(19)?.parse().ok()
}

/// Whether `listed` is the very process it names (alive, same start time).
fn alive(pid: u32, start: u64) -> bool {
    pid != 0 && start_time(pid) == Some(start)
}

/// Whether process `pid` was started for the run folder `dir`: its environment holds
/// `SESSION_VAR=dir`, set on every child at spawn (unreadable: not ours).
fn of_run(pid: u32, dir: &Path) -> bool {
    let Ok(environ) = std::fs::read(format!("/proc/{pid}/environ")) else {
        return false;
    };
    let key = format!("{SESSION_VAR}=").into_bytes();
    let real = dir.canonicalize().ok();
    environ.split(|&b| b == 0).any(|kv| {
        let Some(value) = kv.strip_prefix(key.as_slice()) else {
            return false;
        };
        let Ok(value) = std::str::from_utf8(value) else {
            return false;
        };
        let named = Path::new(value);
        named == dir || (real.is_some() && named.canonicalize().ok() == real)
    })
}

/// Reaps the run folders under `runs` whose harness is gone: kills the process groups
/// their registries list (when the pid is still the same process) and removes the
/// folder. Returns one line per folder reaped.
pub fn reap(runs: &Path) -> Vec<String> {
    let mut lines = Vec::new();
    let Ok(entries) = std::fs::read_dir(runs) else {
        return lines;
    };
    for e in entries.flatten() {
        let dir = e.path();
        if !dir.is_dir() {
            continue;
        }
        let reg: Option<Registry> = std::fs::read(dir.join(REGISTRY))
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok());
        if let Some(reg) = &reg {
            if alive(reg.owner, reg.owner_start) {
                continue;
            }
        } else if !stale(&dir) {
            // A folder being set up right now has no registry for a moment.
            continue;
        }
        let mut killed = Vec::new();
        for c in reg.iter().flat_map(|r| r.children.iter()) {
            // stack.json is not trusted: a live pid is signalled only when the process
            // carries this run folder in its environment, as every child started here does.
            if alive(c.pid, c.start) && of_run(c.pid, &dir) {
                signal_group(c.pid, libc::SIGKILL);
                killed.push(format!("{} (pid {})", c.role, c.pid));
            }
        }
        for d in reg.iter().flat_map(|r| r.dirs.iter()) {
            // stack.json is not trusted: only a folder inside the cache is removed.
            if let Some(inside) = inside_cache(runs, d) {
                let _ = std::fs::remove_dir_all(inside);
            }
        }
        let _ = std::fs::remove_dir_all(&dir);
        lines.push(if killed.is_empty() {
            format!("removed the leftover folder {}", dir.display())
        } else {
            format!(
                "killed {} left by a harness that is gone, removed {}",
                killed.join(", "),
                dir.display()
            )
        });
    }
    lines
}

/// The prefix of the PostgreSQL folders a stack makes in the system's temp folder.
pub(crate) const PG_TEMP_PREFIX: &str = "stampede-e2b-pg-";

/// `d` canonicalised (symlinks resolved) when it is a folder the harness makes: strictly
/// inside the cache that holds `runs` (its parent folder), or a PostgreSQL folder of its
/// own right in the system's temp folder; else `None`.
fn inside_cache(runs: &Path, d: &Path) -> Option<std::path::PathBuf> {
    let real = d.canonicalize().ok()?;
    let root = runs.parent()?.canonicalize().ok()?;
    if real != root && real.starts_with(&root) {
        return Some(real);
    }
    let temp = std::env::temp_dir().canonicalize().ok()?;
    let ours = real.parent() == Some(temp.as_path())
        && real
            .file_name()
            .and_then(|n| n.to_str())
            .is_some_and(|n| n.starts_with(PG_TEMP_PREFIX));
    ours.then_some(real)
}

/// A folder with no registry older than a minute.
fn stale(dir: &Path) -> bool {
    std::fs::metadata(dir)
        .and_then(|m| m.modified())
        .ok()
        .and_then(|t| t.elapsed().ok())
        .is_some_and(|age| age > Duration::from_secs(60))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `e2b cleanup` removed a stack.json's `dirs` wherever they pointed (a folder outside
    /// the cache was deleted): only folders inside the cache, symlinks resolved, or the
    /// stack's own PostgreSQL folder in the temp folder are taken.
    #[test]
    fn cleanup_removes_only_folders_inside_the_cache() {
        let base = std::env::temp_dir().join(format!("stampede-reap-test-{}", std::process::id()));
        let cache = base.join("cache");
        let runs = cache.join("runs");
        let inside = cache.join("pg");
        let outside = base.join("elsewhere");
        for d in [&runs, &inside, &outside] {
            std::fs::create_dir_all(d).unwrap();
        }
        let link = cache.join("escape");
        std::os::unix::fs::symlink(&outside, &link).unwrap();
        assert!(inside_cache(&runs, &inside).is_some());
        assert_eq!(inside_cache(&runs, &outside), None);
        assert_eq!(
            inside_cache(&runs, &link),
            None,
            "a symlink out of the cache"
        );
        assert_eq!(inside_cache(&runs, &cache), None, "the cache itself");
        assert_eq!(inside_cache(&runs, &cache.join("runs/../..")), None);
        let _ = std::fs::remove_dir_all(&base);
    }

    /// An entry naming a live process's pid and start time got its group SIGKILLed: a
    /// process not started for the run (this test's own) is never taken as the run's.
    #[test]
    fn cleanup_signals_only_processes_started_for_the_run() {
        let me = std::process::id();
        assert!(alive(me, start_time(me).expect("own start time")));
        assert!(!of_run(me, Path::new("/nonexistent/run")));
    }
}

//! What a second signal does before `stampede run` exits without its report: remove
//! goose's scratch directories and name every fault it leaves in force, and where.
//!
//! The run registers what an abort must know as it goes ([`AbortState`] rides in
//! [`RunOptions`](super::RunOptions)); the signal handler calls [`AbortState::abort`].

use std::collections::BTreeSet;
use std::fmt;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use crate::chaos::ChaosClient;
use crate::goose_glue::ScratchDirs;

/// Deadline of reading one fleet's faults, before the run starts and on abort.
const LIST_TIMEOUT: Duration = Duration::from_secs(2);

/// What an abort must clean up or report. Cheap to clone; clones share state.
#[derive(Debug, Clone, Default)]
pub struct AbortState {
    inner: Arc<Mutex<Inner>>,
    /// goose scratch directories that exist or may be created.
    scratch: ScratchDirs,
}

#[derive(Debug, Default)]
struct Inner {
    /// Fleets this run applies faults to that outlive the process.
    faults: Option<FaultWatch>,
    /// Sandboxes on an external API this run may leave running.
    sandboxes: Option<SandboxesLeft>,
}

/// Sandboxes an abort leaves running on an external API.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SandboxesLeft {
    /// API base URL.
    pub api: String,
    /// The run's `stampede-run` metadata tag (lists them all).
    pub tag: String,
    /// Ids still to kill, once cleanup has listed them; `None` before cleanup started.
    pub ids: Option<BTreeSet<String>>,
}

#[derive(Debug, Clone)]
struct FaultWatch {
    client: ChaosClient,
    /// `(fleet, id)` of every fault the fleets had before this run applied any.
    before: BTreeSet<(usize, u64)>,
}

/// A fault an abort leaves in force.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeftActive {
    /// Admin base URL of the fleet holding it.
    pub admin_url: String,
    /// Its id there (`DELETE {admin_url}/faults/{id}` heals it).
    pub id: u64,
    /// Kind, e.g. `kill`.
    pub kind: String,
    /// Node ids it targets.
    pub nodes: Vec<String>,
}

/// What an abort did and could not do.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AbortSummary {
    /// Faults this run applied that are still in force.
    pub left_active: Vec<LeftActive>,
    /// Drains and commands this run applied that are still in force, each with what
    /// heals it (no fleet lists them).
    pub outside_active: Vec<String>,
    /// Fleets whose faults could not be read (admin URL, why): faults may be in force there.
    pub unreadable: Vec<(String, String)>,
    /// Whether the run was applying faults to a fleet that outlives it at all.
    pub watched: bool,
    /// goose scratch directories that could not be removed (path, why).
    pub scratch_left: Vec<(PathBuf, String)>,
    /// Sandboxes left running on an external API (cleanup not run or cut short).
    pub sandboxes_left: Option<SandboxesLeft>,
}

fn lock(m: &Mutex<Inner>) -> MutexGuard<'_, Inner> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl AbortState {
    /// The goose scratch directories an abort removes (a run registers its own there).
    pub(crate) fn scratch_dirs(&self) -> &ScratchDirs {
        &self.scratch
    }

    /// Watches the fleets of `client` (whose faults outlive this process): the faults
    /// they hold now are not this run's.
    pub(crate) async fn watch_faults(&self, client: &ChaosClient) {
        let before = match tokio::time::timeout(LIST_TIMEOUT, client.list()).await {
            Ok(Ok(all)) => all.into_iter().map(|(k, f)| (k, f.id)).collect(),
            _ => BTreeSet::new(),
        };
        lock(&self.inner).faults = Some(FaultWatch {
            client: client.clone(),
            before,
        });
    }

    /// Stops watching (every fault this run applied was healed).
    pub(crate) fn unwatch_faults(&self) {
        lock(&self.inner).faults = None;
    }

    /// The run creates sandboxes tagged `tag` on `api` that an abort would leave.
    pub(crate) fn watch_sandboxes(&self, api: &str, tag: &str) {
        lock(&self.inner).sandboxes = Some(SandboxesLeft {
            api: api.to_string(),
            tag: tag.to_string(),
            ids: None,
        });
    }

    /// Cleanup knows which ids are left to kill.
    pub(crate) fn set_sandboxes_left(&self, api: &str, ids: BTreeSet<String>) {
        let mut inner = lock(&self.inner);
        let tag = inner
            .sandboxes
            .as_ref()
            .map(|s| s.tag.clone())
            .unwrap_or_default();
        inner.sandboxes = Some(SandboxesLeft {
            api: api.to_string(),
            tag,
            ids: Some(ids),
        });
    }

    /// Cleanup killed `id`.
    pub(crate) fn sandbox_cleaned(&self, id: &str) {
        if let Some(ids) = lock(&self.inner)
            .sandboxes
            .as_mut()
            .and_then(|s| s.ids.as_mut())
        {
            ids.remove(id);
        }
    }

    /// Cleanup is over (or `--keep`): an abort no longer has sandboxes to name.
    pub(crate) fn cleanup_finished(&self) {
        lock(&self.inner).sandboxes = None;
    }

    /// Removes every registered scratch directory, then reads which faults this run
    /// leaves in force. Never waits longer than a couple of seconds per fleet.
    pub async fn abort(&self) -> AbortSummary {
        let (scratch, watch, sandboxes) = {
            let inner = lock(&self.inner);
            (
                self.scratch.listed(),
                inner.faults.clone(),
                inner.sandboxes.clone(),
            )
        };
        let mut out = AbortSummary {
            sandboxes_left: sandboxes,
            ..AbortSummary::default()
        };
        for dir in scratch {
            match std::fs::remove_dir_all(&dir) {
                Ok(()) => self.scratch.remove(&dir),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => self.scratch.remove(&dir),
                Err(e) => out.scratch_left.push((dir, e.to_string())),
            }
        }
        let Some(watch) = watch else {
            return out;
        };
        out.watched = true;
        out.outside_active = watch.client.outside_active();
        let fleets = watch.client.fleets().to_vec();
        match tokio::time::timeout(LIST_TIMEOUT, watch.client.list()).await {
            Ok(Ok(all)) => {
                out.left_active = all
                    .into_iter()
                    .filter(|(k, f)| f.active && !watch.before.contains(&(*k, f.id)))
                    .map(|(k, f)| LeftActive {
                        admin_url: fleets.get(k).cloned().unwrap_or_default(),
                        id: f.id,
                        kind: f.kind.as_str().to_string(),
                        nodes: f.nodes,
                    })
                    .collect();
            }
            Ok(Err(e)) => {
                out.unreadable = fleets.iter().map(|u| (u.clone(), e.to_string())).collect()
            }
            Err(_) => {
                out.unreadable = fleets
                    .iter()
                    .map(|u| (u.clone(), format!("no answer within {LIST_TIMEOUT:?}")))
                    .collect();
            }
        }
        out
    }
}

impl fmt::Display for AbortSummary {
    /// The lines printed on stderr when the run aborts.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "aborted: no report written")?;
        for a in &self.left_active {
            writeln!(
                f,
                "aborted: fault {} ({} on {}) left active at {}; heal it with DELETE {}/faults/{}",
                a.id,
                a.kind,
                a.nodes.join(","),
                a.admin_url,
                a.admin_url,
                a.id
            )?;
        }
        for what in &self.outside_active {
            writeln!(f, "aborted: {what} left active")?;
        }
        for (url, why) in &self.unreadable {
            writeln!(
                f,
                "aborted: cannot read the faults of {url} ({why}): faults this run applied may still be active there"
            )?;
        }
        if self.watched
            && self.left_active.is_empty()
            && self.outside_active.is_empty()
            && self.unreadable.is_empty()
        {
            writeln!(f, "aborted: no fault left active")?;
        }
        for (dir, why) in &self.scratch_left {
            writeln!(f, "aborted: cannot remove {}: {why}", dir.display())?;
        }
        if let Some(s) = &self.sandboxes_left {
            match &s.ids {
                Some(ids) => {
                    writeln!(
                        f,
                        "aborted: cleanup cut short: {} sandboxes left running on {}{}",
                        ids.len(),
                        s.api,
                        if ids.is_empty() { "" } else { ":" }
                    )?;
                    for id in ids {
                        writeln!(
                            f,
                            "aborted: left running: {id} (DELETE {}/sandboxes/{id})",
                            s.api
                        )?;
                    }
                }
                None => writeln!(
                    f,
                    "aborted: cleanup did not run: this run's sandboxes are left running on {}; \
                     list them with GET {}/sandboxes?metadata=stampede-run%3D{}, \
                     delete them with `stampede cleanup --api {} --tag {}`",
                    s.api, s.api, s.tag, s.api, s.tag
                )?,
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_summary_names_each_fault_and_where_to_heal_it() {
        let s = AbortSummary {
            left_active: vec![LeftActive {
                admin_url: "http://127.0.0.1:9100".into(),
                id: 7,
                kind: "kill".into(),
                nodes: vec!["node-01".into()],
            }],
            watched: true,
            ..AbortSummary::default()
        };
        let text = s.to_string();
        assert!(text.contains("fault 7 (kill on node-01) left active at http://127.0.0.1:9100"));
        assert!(text.contains("DELETE http://127.0.0.1:9100/faults/7"));
        assert!(!text.contains("no fault left active"));
    }

    #[test]
    fn the_summary_names_each_drain_or_command_left_with_its_heal() {
        let s = AbortSummary {
            outside_active: vec![
                "command on n1 (heal it with: nomad node drain -disable n1)".into()
            ],
            watched: true,
            ..AbortSummary::default()
        };
        let text = s.to_string();
        assert!(text.contains(
            "aborted: command on n1 (heal it with: nomad node drain -disable n1) left active"
        ));
        assert!(!text.contains("no fault left active"));
    }

    #[test]
    fn the_summary_names_each_sandbox_cleanup_left_or_how_to_find_them() {
        let mut s = AbortSummary {
            sandboxes_left: Some(SandboxesLeft {
                api: "http://127.0.0.1:3000".into(),
                tag: "nightly-1-2".into(),
                ids: Some(BTreeSet::from(["sb-1".to_string(), "sb-2".to_string()])),
            }),
            ..AbortSummary::default()
        };
        let text = s.to_string();
        assert!(
            text.contains("2 sandboxes left running on http://127.0.0.1:3000"),
            "{text}"
        );
        assert!(
            text.contains("DELETE http://127.0.0.1:3000/sandboxes/sb-2"),
            "{text}"
        );
        if let Some(l) = s.sandboxes_left.as_mut() {
            l.ids = None;
        }
        let text = s.to_string();
        assert!(
            text.contains(
                "GET http://127.0.0.1:3000/sandboxes?metadata=stampede-run%3Dnightly-1-2"
            ),
            "{text}"
        );
    }

    #[tokio::test]
    async fn abort_removes_goose_scratch_directories() {
        let dir = std::env::temp_dir().join(format!("stampede-abort-{}", std::process::id()));
        let staging = dir.join(".goose-1");
        std::fs::create_dir_all(&staging).unwrap();
        std::fs::write(staging.join("goose-x.html"), "x").unwrap();
        let state = AbortState::default();
        state.scratch_dirs().add(staging.clone());
        state.scratch_dirs().add(dir.join(".goose-never-created"));
        let summary = state.abort().await;
        assert!(!staging.exists());
        assert!(summary.scratch_left.is_empty(), "{summary:?}");
        assert!(!summary.watched);
        let _ = std::fs::remove_dir_all(&dir);
    }
}

//! Builds E2B's API (`packages/api`) from a local e2b-dev/infra checkout at a revision,
//! in a git worktree under stampede's cache (the user's work tree is never touched),
//! with a variant's edits and any stand-in modules; cached by (revision, variant,
//! stand-ins).

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use tokio::process::Command;

use crate::placement::AccountingMode;

use super::probe_edits;
use super::standin::StandIn;
use super::variant::{self, ScoreFacts, Variant, VariantError};

/// Errors of a build.
#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    /// `--infra` is not a git checkout of e2b-dev/infra.
    #[error("{}: not a git repository with packages/api (give --infra the path of an e2b-dev/infra checkout)", dir.display())]
    NotInfra {
        /// The folder given.
        dir: PathBuf,
    },
    /// The revision does not resolve.
    #[error("revision `{rev}` not found in {}: {detail}", infra.display())]
    Revision {
        /// The checkout.
        infra: PathBuf,
        /// The revision asked.
        rev: String,
        /// git's words.
        detail: String,
    },
    /// The variant does not apply at this revision.
    #[error("at {rev}: {source}")]
    Variant {
        /// The revision.
        rev: String,
        /// What was found.
        #[source]
        source: VariantError,
    },
    /// stampede's own edit (the probe, a fix variant) does not apply at this revision.
    #[error("at {rev}: stampede's edit does not apply: {source}")]
    Edit {
        /// The revision.
        rev: String,
        /// What was looked for.
        #[source]
        source: super::go_edit::EditError,
    },
    /// A tool could not run or failed.
    #[error("{what} failed{}: see {}", hint.as_deref().map(|h| format!(" ({h})")).unwrap_or_default(), log.display())]
    Tool {
        /// What was run.
        what: String,
        /// A hint from its output.
        hint: Option<String>,
        /// Its output.
        log: PathBuf,
    },
    /// A file or process operation failed.
    #[error("{what}")]
    Io {
        /// What was being done.
        what: String,
        /// Cause.
        #[source]
        source: std::io::Error,
    },
}

/// What to build.
#[derive(Debug, Clone)]
pub struct BuildRequest {
    /// The e2b-dev/infra checkout.
    pub infra: PathBuf,
    /// The revision (anything `git rev-parse` takes).
    pub rev: String,
    /// The variant.
    pub variant: Variant,
    /// Modules replaced by stampede's stand-ins.
    pub stand_ins: Vec<StandIn>,
    /// With stampede's timing probe.
    pub probe: bool,
    /// stampede's E2B cache folder.
    pub cache: PathBuf,
}

/// A built API.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Built {
    /// The revision as asked.
    pub rev: String,
    /// Its commit.
    pub commit: String,
    /// The variant's name.
    pub variant: String,
    /// What the score counted as committed.
    pub committed: String,
    /// What the built score counts.
    pub built: String,
    /// The stampede accounting mode the build behaves as.
    pub mode: AccountingMode,
    /// Stand-in modules used.
    pub stand_ins: Vec<String>,
    /// Built with stampede's timing probe.
    #[serde(default)]
    pub probe: bool,
    /// A decision's score read and its in-progress mark are taken under one lock
    /// (`locked-choice`): the twin takes no commit lag.
    #[serde(default)]
    pub choice_locked: bool,
    /// The source tree (migrations and the local-dev seed are read from it).
    pub tree: PathBuf,
    /// The API binary.
    pub binary: PathBuf,
    /// Whether this came from the cache.
    #[serde(skip)]
    pub cached: bool,
}

impl Built {
    /// `REV:VARIANT` as the output names it (`+probe` when probed).
    pub fn label(&self) -> String {
        let probe = if self.probe { "+probe" } else { "" };
        format!("{}:{}{probe}", self.rev, self.variant)
    }
}

fn io(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> BuildError {
    let what = what.into();
    move |source| BuildError::Io { what, source }
}

async fn git(infra: &Path, args: &[&str]) -> Result<std::process::Output, BuildError> {
    Command::new("git")
        .arg("-C")
        .arg(infra)
        .args(args)
        .stdin(std::process::Stdio::null())
        .output()
        .await
        .map_err(io("running git"))
}

/// The commit `rev` names in `infra`.
pub async fn resolve(infra: &Path, rev: &str) -> Result<String, BuildError> {
    let out = git(
        infra,
        &[
            "rev-parse",
            "--verify",
            "--quiet",
            &format!("{rev}^{{commit}}"),
        ],
    )
    .await?;
    if !out.status.success() {
        let check = git(infra, &["rev-parse", "--git-dir"]).await?;
        if !check.status.success() {
            return Err(BuildError::NotInfra {
                dir: infra.to_path_buf(),
            });
        }
        return Err(BuildError::Revision {
            infra: infra.to_path_buf(),
            rev: rev.to_string(),
            detail: "no such commit".into(),
        });
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

/// Builds (or finds in the cache) the API for `req`; progress lines go to `log`.
pub async fn build(req: &BuildRequest, log: &mut dyn FnMut(&str)) -> Result<Built, BuildError> {
    let commit = resolve(&req.infra, &req.rev).await?;
    let mut key = format!("{}-{}", &commit[..12], req.variant);
    for s in &req.stand_ins {
        key.push_str(&format!("-standin-{s}"));
    }
    if req.probe {
        key.push_str("-probe");
    }
    if req.probe || matches!(req.variant, Variant::LockedChoice | Variant::Reconciled) {
        key.push_str(&format!("-edits-{}", probe_edits::fingerprint()));
    }
    let tree = req.cache.join("trees").join(&key);
    let out_dir = req.cache.join("bin").join(&key);
    let stamp = out_dir.join("build.json");
    if let Some(mut b) = std::fs::read(&stamp)
        .ok()
        .and_then(|t| serde_json::from_slice::<Built>(&t).ok())
        .filter(|b| b.binary.is_file() && b.tree.join("packages/api").is_dir())
    {
        b.cached = true;
        b.rev = req.rev.clone();
        log(&format!(
            "build {}: cached ({})",
            b.label(),
            b.binary.display()
        ));
        return Ok(b);
    }
    std::fs::create_dir_all(&out_dir).map_err(io("creating the build folder"))?;
    if tree.exists() {
        let _ = git(
            &req.infra,
            &["worktree", "remove", "--force", &tree.to_string_lossy()],
        )
        .await;
        let _ = std::fs::remove_dir_all(&tree);
        let _ = git(&req.infra, &["worktree", "prune"]).await;
    }
    log(&format!(
        "build {}:{}: worktree at {}",
        req.rev,
        req.variant,
        tree.display()
    ));
    let out = git(
        &req.infra,
        &[
            "worktree",
            "add",
            "--detach",
            "--force",
            &tree.to_string_lossy(),
            &commit,
        ],
    )
    .await?;
    if !out.status.success() {
        let log_path = out_dir.join("worktree.log");
        let _ = std::fs::write(&log_path, [out.stdout, out.stderr].concat());
        return Err(BuildError::Tool {
            what: "git worktree add".into(),
            hint: None,
            log: log_path,
        });
    }
    let api = tree.join("packages/api");
    if !api.is_dir() {
        return Err(BuildError::NotInfra {
            dir: req.infra.clone(),
        });
    }
    let committed: ScoreFacts = variant::inspect(&tree).map_err(|source| BuildError::Variant {
        rev: req.rev.clone(),
        source,
    })?;
    let built = variant::apply(&tree, req.variant).map_err(|source| BuildError::Variant {
        rev: req.rev.clone(),
        source,
    })?;
    let edit = |source| BuildError::Edit {
        rev: req.rev.clone(),
        source,
    };
    let choice_locked = req.variant == Variant::LockedChoice;
    if choice_locked {
        probe_edits::apply_locked_choice(&tree).map_err(edit)?;
        log(&format!(
            "build {}:{}: a decision's score read and its in-progress mark under one lock",
            req.rev, req.variant
        ));
    }
    if req.variant == Variant::Reconciled {
        probe_edits::apply_reconciled(&tree).map_err(edit)?;
        log(&format!(
            "build {}:{}: optimistic add/remove kept per sandbox id until a sync's ids confirm it",
            req.rev, req.variant
        ));
    }
    if req.probe {
        probe_edits::apply_probe(&tree).map_err(edit)?;
        log(&format!(
            "build {}:{}: with stampede's timing probe",
            req.rev, req.variant
        ));
    }
    // The variant's own mode where it names one (`reconciled` changes what the
    // optimistic add/remove keep, which the score facts do not see).
    let mode = req.variant.mode().unwrap_or_else(|| built.mode());
    log(&format!(
        "build {}:{}: as committed: {}; built: {} (stampede mode `{mode}`)",
        req.rev,
        req.variant,
        committed.describe(),
        built.describe(),
    ));
    for s in &req.stand_ins {
        let dir = s
            .write(&req.cache.join("standins"))
            .map_err(io("writing a stand-in module"))?;
        go(
            &api,
            &[
                "mod",
                "edit",
                &format!("-replace={}={}", s.module(), dir.display()),
            ],
            &out_dir.join("standin.log"),
            "go mod edit",
        )
        .await?;
        log(&format!(
            "build {}:{}: stand-in for {} (stampede's, not the real module: {})",
            req.rev,
            req.variant,
            s.module(),
            dir.display()
        ));
    }
    let binary = out_dir.join("api");
    log(&format!(
        "build {}:{}: go build packages/api ...",
        req.rev, req.variant
    ));
    go(
        &api,
        &["build", "-o", &binary.to_string_lossy(), "."],
        &out_dir.join("build.log"),
        "go build packages/api",
    )
    .await?;
    let b = Built {
        rev: req.rev.clone(),
        commit,
        variant: req.variant.to_string(),
        committed: committed.describe(),
        built: built.describe(),
        mode,
        stand_ins: req.stand_ins.iter().map(|s| s.to_string()).collect(),
        probe: req.probe,
        choice_locked,
        tree,
        binary,
        cached: false,
    };
    std::fs::write(&stamp, serde_json::to_vec_pretty(&b).expect("plain data"))
        .map_err(io("writing build.json"))?;
    log(&format!(
        "build {}: done ({})",
        b.label(),
        b.binary.display()
    ));
    Ok(b)
}

/// Runs `go ARGS` in `dir` as E2B's API builds outside Docker (`GOWORK=off
/// CGO_ENABLED=0 GOFLAGS=-mod=mod`); output in `log`.
pub async fn go(dir: &Path, args: &[&str], log: &Path, what: &str) -> Result<(), BuildError> {
    let out = go_command(dir)
        .args(args)
        .output()
        .await
        .map_err(io("running go (is the Go toolchain on PATH?)"))?;
    let text = [out.stdout, out.stderr].concat();
    let _ = std::fs::write(log, &text);
    if out.status.success() {
        return Ok(());
    }
    let text = String::from_utf8_lossy(&text);
    let hint = refused_module(&text).map(|m| {
        if m.starts_with("github.com/grafana/loki/v3@") {
            format!("the module proxy refuses {m}: add --stand-in loki")
        } else {
            format!("the module proxy refuses {m}")
        }
    });
    Err(BuildError::Tool {
        what: what.to_string(),
        hint,
        log: log.to_path_buf(),
    })
}

/// A `go` command in `dir` with the build environment.
pub fn go_command(dir: &Path) -> Command {
    let mut cmd = Command::new("go");
    cmd.current_dir(dir)
        .env("GOWORK", "off")
        .env("CGO_ENABLED", "0")
        .env("GOFLAGS", "-mod=mod")
        .stdin(std::process::Stdio::null())
        .kill_on_drop(true);
    cmd
}

/// `module@version` of the first module the proxy refused (403) in go's output.
fn refused_module(text: &str) -> Option<String> {
    let line = text.lines().find(|l| l.contains("403 Forbidden"))?;
    let at = line
        .find("github.com/")
        .or_else(|| line.find("golang.org/"))?;
    let m = line[at..].split(':').next()?;
    Some(m.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refused_module_is_named_with_the_stand_in_hint() {
        let out = "../shared/pkg/logs/loki/provider.go:10:2: github.com/grafana/loki/v3@v3.6.11: reading https://proxy.golang.org/github.com/grafana/loki/v3/@v/v3.6.11.zip: 403 Forbidden";
        assert_eq!(
            refused_module(out).as_deref(),
            Some("github.com/grafana/loki/v3@v3.6.11")
        );
        assert_eq!(refused_module("all good"), None);
    }
}

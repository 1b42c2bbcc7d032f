//! `stampede e2b`: E2B's own API, built from a local e2b-dev/infra checkout at a
//! revision (optionally in a named variant of its Best-of-K score), run with a profile's
//! workload on mock-node's virtual fleet, one fresh stack per run (PostgreSQL, Redis,
//! E2B's migrations and seed, the fleet, the API), the twin (`stampede sim`) matched to
//! each run beside it; `ab` compares two builds on the same phases.
//!
//! Nothing of E2B's code is part of stampede: the checkout is the user's, the builds
//! happen in worktrees under stampede's cache, and the variants and stand-ins are
//! stampede's own edits and modules.

mod apilog;
pub mod args;
mod arrivals;
mod build;
mod child;
mod database;
mod go_edit;
mod probe_edits;
mod probe_log;
mod provision;
mod standin;
mod summary;
#[cfg(test)]
mod test_dir;
mod trial;
mod twin;
mod variant;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use tokio_util::sync::CancellationToken;

pub use args::E2bArgs;
pub use build::{BuildError, BuildRequest, Built};
pub use summary::{AbVerdict, BuildSummary, E2bSummary, MatchedRun, Spread};
pub use trial::{ApiKind, TrialError, TrialPlan, TrialResult};
pub use variant::{Variant, VariantError};

use args::{AbArgs, BuildArgs, E2bVerb, RunArgs, SourceArgs, StackArgs};
use database::Stores;

/// Errors of `stampede e2b`.
#[derive(Debug, thiserror::Error)]
pub enum E2bError {
    /// The profile is invalid.
    #[error("{0}")]
    Profile(#[from] crate::profile::ProfileErrors),
    /// A build failed.
    #[error(transparent)]
    Build(#[from] BuildError),
    /// A run failed.
    #[error(transparent)]
    Trial(#[from] TrialError),
    /// The twin could not run.
    #[error("the twin: {0}")]
    Twin(#[from] twin::TwinError),
    /// The arguments do not fit together.
    #[error("{0}")]
    Usage(String),
    /// The report could not be written.
    #[error("writing the report in {}", dir.display())]
    Report {
        /// The folder.
        dir: PathBuf,
        /// Cause.
        #[source]
        source: std::io::Error,
    },
}

/// Runs `stampede e2b`; `cancel` fires on SIGINT / SIGTERM.
pub async fn run(args: E2bArgs, cancel: CancellationToken) -> Result<ExitCode, E2bError> {
    match args.verb {
        E2bVerb::Cleanup(c) => {
            let lines = child::reap(&c.dir().join("runs"));
            if lines.is_empty() {
                println!("nothing left by an earlier stampede e2b");
            }
            for l in lines {
                println!("{l}");
            }
            Ok(ExitCode::SUCCESS)
        }
        E2bVerb::Build(b) => build_verb(b).await,
        E2bVerb::Run(r) => run_verb(r, cancel).await,
        E2bVerb::Ab(a) => ab_verb(a, cancel).await,
    }
}

fn say(line: &str) {
    eprintln!("e2b: {line}");
}

fn reap_first(cache: &Path) {
    for l in child::reap(&cache.join("runs")) {
        say(&l);
    }
}

async fn build_one(source: &SourceArgs, rev: &str, variant: Variant) -> Result<Built, E2bError> {
    let infra = source.infra.clone().ok_or_else(|| {
        E2bError::Usage(
            "--infra DIR (an e2b-dev/infra checkout) is required to build E2B's API".into(),
        )
    })?;
    let req = BuildRequest {
        infra,
        rev: rev.to_string(),
        variant,
        stand_ins: source.stand_ins.clone(),
        probe: source.probe,
        cache: source.cache.dir(),
    };
    Ok(build::build(&req, &mut |l| say(l)).await?)
}

async fn build_verb(b: BuildArgs) -> Result<ExitCode, E2bError> {
    for v in &b.builds.variants {
        let built = build_one(&b.source, &b.builds.rev, *v).await?;
        println!(
            "{} {} ({})",
            built.label(),
            built.binary.display(),
            built.built
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// The API of one build: E2B's, or the `--api-cmd` command in the variant's mode.
async fn api_of(
    source: &SourceArgs,
    stack: &StackArgs,
    rev: &str,
    variant: Variant,
) -> Result<ApiKind, E2bError> {
    match &stack.api_cmd {
        None => Ok(ApiKind::E2b(build_one(source, rev, variant).await?)),
        Some(cmd) => {
            let mode = variant.mode().ok_or_else(|| {
                E2bError::Usage("with --api-cmd, name a variant (reported, in-flight, optimistic): it sets {mode}".into())
            })?;
            let exe = std::env::current_exe()
                .map_err(|e| E2bError::Usage(format!("cannot find the stampede binary: {e}")))?;
            let argv: Vec<String> = cmd
                .split_whitespace()
                .map(|w| {
                    w.replace("{mode}", mode.as_str())
                        .replace("{stampede}", &exe.to_string_lossy())
                })
                .collect();
            if argv.is_empty() {
                return Err(E2bError::Usage("--api-cmd is empty".into()));
            }
            Ok(ApiKind::Command {
                argv,
                sync_line: stack.api_sync_line.clone(),
                mode,
            })
        }
    }
}

fn label_of(api: &ApiKind) -> String {
    match api {
        ApiKind::E2b(b) => b.label(),
        ApiKind::Command { mode, .. } => format!("api-cmd:{mode}"),
    }
}

/// The runs of every build, interleaved (run i of each build at the same phase), each
/// with its twin; then the per-build summaries.
async fn measure(
    profile_path: &Path,
    apis: &[ApiKind],
    stack: &StackArgs,
    cache: &Path,
    cancel: &CancellationToken,
) -> Result<E2bSummary, E2bError> {
    let profile = crate::profile::load_and_validate(profile_path)?;
    let crate::profile::PlacementSection::Embedded(_) = &profile.placement else {
        return Err(E2bError::Usage(format!(
            "{}: an external profile names its own API; stampede e2b runs embedded profiles (their cluster is the fleet)",
            profile_path.display()
        )));
    };
    if stack.runs == 0 {
        return Err(E2bError::Usage("--runs must be at least 1".into()));
    }
    let exe = std::env::current_exe()
        .map_err(|e| E2bError::Usage(format!("cannot find the stampede binary: {e}")))?;
    let stores = match (&stack.postgres, &stack.redis) {
        (Some(p), Some(r)) => Some(Stores {
            postgres: p.clone(),
            redis: r.clone(),
        }),
        _ => None,
    };
    let session = format!(
        "{}-{}",
        crate::report::compact_utc(&crate::report::now_rfc3339()).unwrap_or_default(),
        std::process::id()
    );
    let started_at = crate::report::now_rfc3339();
    // The twin of a build whose choice counts at once (`locked-choice`) takes no commit
    // lag: its mark is taken under the lock of its read.
    let twin_profile = |api: &ApiKind| match api {
        ApiKind::E2b(b) if b.choice_locked => twin::without_commit_lag(&profile),
        _ => profile.clone(),
    };
    let mut runs = Vec::new();
    for i in 0..stack.runs {
        for (b, api) in apis.iter().enumerate() {
            let label = label_of(api);
            let phase = twin::spread_phase(i, stack.runs, *stack.sync_cycle);
            say(&format!(
                "run {}/{} of {label}: phase {:.1} s",
                i + 1,
                stack.runs,
                phase.as_secs_f64()
            ));
            let plan = TrialPlan {
                profile: profile_path.to_path_buf(),
                nodes: profile.cluster.nodes,
                sandbox: profile.workload.sandbox.clone(),
                api: api.clone(),
                target_phase: phase,
                stores: stores.clone(),
                pg_bin: stack.pg_bin.clone(),
                dir: cache.join("runs").join(format!("{session}-{b}-{i}")),
                exe: exe.clone(),
                cycle: *stack.sync_cycle,
            };
            let mut real = trial::run_trial(&plan, cancel, &say).await?;
            say(&format!("stopped: {}", real.stopped.join("; ")));
            let met = real
                .phase_s
                .map(std::time::Duration::from_secs_f64)
                .unwrap_or(phase);
            let twin = twin::twin(&twin_profile(api), api.mode(), met, *stack.sync_cycle)?;
            let kept = stack.report_dir.join("e2b-runs").join(format!("{b}-{i}"));
            keep_artifacts(&plan.dir, &kept);
            // The stack is stopped; its folder's logs were copied beside the report, and
            // the run's report is named where it was kept.
            if real.report_dir.is_some() {
                real.report_dir = Some(kept.clone());
            }
            let _ = std::fs::remove_dir_all(&plan.dir);
            let run = MatchedRun::new(label, i, real, Some(twin));
            say(&run.one_line());
            runs.push(run);
        }
    }
    let mut summaries = Vec::new();
    for api in apis {
        let label = label_of(api);
        let mine: Vec<&MatchedRun> = runs.iter().filter(|r| r.label == label).collect();
        let phases = twin::over_phases(
            &twin_profile(api),
            api.mode(),
            stack.twin_phases,
            *stack.sync_cycle,
        )?;
        summaries.push(BuildSummary::new(
            &label,
            api.mode().as_str(),
            &mine,
            &phases,
        ));
    }
    Ok(E2bSummary {
        profile: profile.name.clone(),
        fleet_seed: fleet_seed(&profile),
        started_at,
        builds: apis
            .iter()
            .filter_map(|a| match a {
                ApiKind::E2b(b) => Some(b.clone()),
                ApiKind::Command { .. } => None,
            })
            .collect(),
        runs,
        summaries,
        verdict: None,
    })
}

/// The seed mock-node's fleet is built from for `profile` (the one rule mock-node,
/// the simulator and the embedded run share).
fn fleet_seed(profile: &crate::profile::Profile) -> u64 {
    profile.cluster.fleet_seed(profile.seed)
}

/// Copies a finished run's logs and workload report out of its (removed) stack folder.
fn keep_artifacts(from: &Path, to: &Path) {
    let _ = std::fs::create_dir_all(to);
    for name in [
        "api-log.json",
        "run.err",
        "run.log",
        "mock-node.err",
        "migrate.log",
        "seed.log",
        // A probed build's timings and Go profiles.
        "probe.log",
        "mutex.txt",
        "block.txt",
        "mutex.pb.gz",
        "block.pb.gz",
        "trace.out",
    ] {
        let _ = std::fs::copy(from.join(name), to.join(name));
    }
    if let Ok(entries) = std::fs::read_dir(from.join("report")) {
        for e in entries.flatten() {
            for f in ["report.json", "report.md"] {
                let _ = std::fs::copy(e.path().join(f), to.join(f));
            }
        }
    }
}

fn write_summary(s: &E2bSummary, parent: &Path, junit: bool) -> Result<PathBuf, E2bError> {
    let stamp = crate::report::compact_utc(&s.started_at).unwrap_or_default();
    let dir = parent.join(format!("e2b-{}-{stamp}", s.profile));
    let io = |source| E2bError::Report {
        dir: dir.clone(),
        source,
    };
    std::fs::create_dir_all(&dir).map_err(io)?;
    // Each run's kept copy moves beside the summary (below): name it there.
    let kept = parent.join("e2b-runs");
    let mut s = s.clone();
    for r in &mut s.runs {
        if let Some(rel) = r
            .real
            .report_dir
            .as_ref()
            .and_then(|d| d.strip_prefix(&kept).ok())
        {
            r.real.report_dir = Some(dir.join("runs").join(rel));
        }
    }
    let s = &s;
    std::fs::write(
        dir.join("e2b.json"),
        serde_json::to_vec_pretty(s).expect("plain data"),
    )
    .map_err(io)?;
    let mut md = Vec::new();
    summary::write_markdown(s, &mut md).map_err(io)?;
    std::fs::write(dir.join("e2b.md"), &md).map_err(io)?;
    if let (true, Some(v)) = (junit, &s.verdict) {
        let mut x = Vec::new();
        summary::write_junit(v, &mut x).map_err(io)?;
        std::fs::write(dir.join("junit.xml"), x).map_err(io)?;
    }
    // Runs' artifacts beside the summary.
    let runs = parent.join("e2b-runs");
    if runs.is_dir() {
        let _ = std::fs::rename(&runs, dir.join("runs"));
    }
    let mut out = std::io::stdout().lock();
    let _ = out.write_all(&md);
    Ok(dir)
}

async fn run_verb(r: RunArgs, cancel: CancellationToken) -> Result<ExitCode, E2bError> {
    let cache = r.source.cache.dir();
    reap_first(&cache);
    let mut apis = Vec::new();
    for v in &r.builds.variants {
        apis.push(api_of(&r.source, &r.stack, &r.builds.rev, *v).await?);
    }
    let s = measure(&r.profile, &apis, &r.stack, &cache, &cancel).await?;
    let dir = write_summary(&s, &r.stack.report_dir, false)?;
    say(&format!("report: {}", dir.display()));
    Ok(ExitCode::SUCCESS)
}

async fn ab_verb(a: AbArgs, cancel: CancellationToken) -> Result<ExitCode, E2bError> {
    let cache = a.source.cache.dir();
    reap_first(&cache);
    let base = api_of(&a.source, &a.stack, &a.base.rev, a.base.variant).await?;
    let head = api_of(&a.source, &a.stack, &a.head.rev, a.head.variant).await?;
    if label_of(&base) == label_of(&head) {
        return Err(E2bError::Usage(
            "--base and --head name the same build".into(),
        ));
    }
    let mut s = measure(&a.profile, &[base, head], &a.stack, &cache, &cancel).await?;
    let v = AbVerdict::judge(&s.summaries[0], &s.summaries[1]);
    let regressed = v.regressed;
    s.verdict = Some(v);
    let dir = write_summary(&s, &a.stack.report_dir, true)?;
    say(&format!("report: {}", dir.display()));
    Ok(if regressed {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

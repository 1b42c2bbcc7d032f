//! `stampede e2b`'s command line: one `clap::Args` struct per verb.

use std::path::PathBuf;

use super::standin::StandIn;
use super::variant::Variant;

/// `stampede e2b`: E2B's own API built from a checkout, run on mock-node's fleet with
/// the twin beside it.
#[derive(Debug, clap::Args)]
pub struct E2bArgs {
    /// What to do.
    #[command(subcommand)]
    pub verb: E2bVerb,
}

/// The verbs of `stampede e2b`.
#[derive(Debug, clap::Subcommand)]
pub enum E2bVerb {
    /// Build E2B's API at a revision in each variant (cached).
    Build(BuildArgs),
    /// Run a profile against E2B's API on a fresh stack per run, the twin beside each
    /// run. Exit 0 = every run completed, 2 = a step failed or the run was interrupted.
    Run(RunArgs),
    /// A/B two builds on the same phases, interleaved. Exit 0 = head no worse than base,
    /// 1 = head regressed beyond base's own spread, 2 = a step failed.
    Ab(AbArgs),
    /// Stop what a killed `stampede e2b` left (PostgreSQL, Redis, API, mock-node) and
    /// remove its folders.
    Cleanup(CacheArgs),
}

/// Where stampede keeps E2B builds and run folders.
#[derive(Debug, Clone, clap::Args)]
pub struct CacheArgs {
    /// Cache folder (default: $XDG_CACHE_HOME/stampede/e2b or ~/.cache/stampede/e2b).
    #[arg(long, value_name = "DIR", env = "STAMPEDE_E2B_CACHE")]
    pub cache: Option<PathBuf>,
}

impl CacheArgs {
    /// The cache folder.
    pub fn dir(&self) -> PathBuf {
        if let Some(d) = &self.cache {
            return d.clone();
        }
        let base = std::env::var_os("XDG_CACHE_HOME")
            .map(PathBuf::from)
            .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
            .unwrap_or_else(std::env::temp_dir);
        base.join("stampede").join("e2b")
    }
}

/// Which source to build.
#[derive(Debug, Clone, clap::Args)]
pub struct SourceArgs {
    /// A local e2b-dev/infra checkout (never modified: builds happen in git worktrees
    /// under the cache).
    #[arg(long, value_name = "DIR")]
    pub infra: Option<PathBuf>,
    /// Replace a module the Go proxy refuses with stampede's stand-in (`loki`).
    #[arg(long = "stand-in", value_name = "MODULE")]
    pub stand_ins: Vec<StandIn>,
    /// Build with stampede's timing probe (cached as a build of its own): each run
    /// records when every decision read its scores, made its choice visible and saw its
    /// Create return, every optimistic add/remove and every sync (`probe.log` in the
    /// run folder, summed up in `e2b.json` and `e2b.md`), and keeps the API's mutex and
    /// block profiles and an execution trace of the workload's first seconds.
    #[arg(long)]
    pub probe: bool,
    /// The cache.
    #[command(flatten)]
    pub cache: CacheArgs,
}

/// `stampede e2b build`.
#[derive(Debug, clap::Args)]
pub struct BuildArgs {
    /// The source.
    #[command(flatten)]
    pub source: SourceArgs,
    /// The revision and its variants.
    #[command(flatten)]
    pub builds: BuildsArgs,
}

/// A revision of E2B's API and the variants built from it (a run runs each, its runs
/// interleaved).
#[derive(Debug, Clone, clap::Args)]
pub struct BuildsArgs {
    /// Revision to build.
    #[arg(long, default_value = "HEAD")]
    pub rev: String,
    /// Variant(s), one build each: as-committed, reported, in-flight, optimistic,
    /// locked-choice (the revision's score, a decision's read and its in-progress mark
    /// under one lock), reconciled (optimistic add/remove kept per sandbox id until a
    /// sync's ids confirm it).
    #[arg(long = "variant", default_value = "as-committed")]
    pub variants: Vec<Variant>,
}

/// What the runs need beside the API.
#[derive(Debug, Clone, clap::Args)]
pub struct StackArgs {
    /// Runs per build: a fresh stack each, their starts spread evenly over E2B's 20 s
    /// sync cycle.
    #[arg(long, default_value_t = 1)]
    pub runs: usize,
    /// Use this PostgreSQL instead of starting one per run (it must be empty or
    /// already migrated by this revision).
    #[arg(long, value_name = "URL", requires = "redis")]
    pub postgres: Option<String>,
    /// Use this Redis (host:port) instead of starting one per run.
    #[arg(long, value_name = "HOST:PORT", requires = "postgres")]
    pub redis: Option<String>,
    /// PostgreSQL's server binaries (default: /usr/lib/postgresql/*/bin).
    #[arg(long, value_name = "DIR")]
    pub pg_bin: Option<PathBuf>,
    /// Instead of E2B's API, run this command as the API (words split on spaces;
    /// `{stampede}`, `{port}`, `{nomad}`, `{mock_admin}`, `{postgres}`, `{redis}` and
    /// `{mode}` are replaced; `{mode}` is the variant's accounting mode). It reads
    /// the API key from STAMPEDE_API_KEY and the admin token from STAMPEDE_ADMIN_TOKEN.
    #[arg(long, value_name = "CMD")]
    pub api_cmd: Option<String>,
    /// With --api-cmd: text of the line it prints at its first node sync (the phase's
    /// reference).
    #[arg(long, value_name = "TEXT", default_value = "placement service ready")]
    pub api_sync_line: String,
    /// The API's node sync period: E2B's is 20 s (`cacheSyncTime`,
    /// `orchestrator/cache.go`); set it only for an `--api-cmd` API that syncs at
    /// another period. Run starts are spread over it and the twin syncs at it.
    #[arg(long, default_value_t = crate::placement::SYNC_INTERVAL.into(), value_name = "DURATION")]
    pub sync_cycle: humantime::Duration,
    /// Twin runs spread over the sync cycle for each build's distribution.
    #[arg(long, default_value_t = 20, value_name = "N")]
    pub twin_phases: usize,
    /// Parent folder of the report.
    #[arg(long, default_value = "reports", value_name = "DIR")]
    pub report_dir: PathBuf,
}

/// `stampede e2b run`.
#[derive(Debug, clap::Args)]
pub struct RunArgs {
    /// Profile to run (embedded: its cluster is mock-node's fleet, its placement the twin).
    pub profile: PathBuf,
    /// The source.
    #[command(flatten)]
    pub source: SourceArgs,
    /// The revision and its variants.
    #[command(flatten)]
    pub builds: BuildsArgs,
    /// The stack.
    #[command(flatten)]
    pub stack: StackArgs,
}

/// `REV[:VARIANT]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RevVariant {
    /// The revision.
    pub rev: String,
    /// The variant (default as-committed).
    pub variant: Variant,
}

impl std::str::FromStr for RevVariant {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        // A revision may hold ':' only in forms this verb does not take (`:/text`).
        match s.rsplit_once(':') {
            Some((rev, v)) if !rev.is_empty() => Ok(RevVariant {
                rev: rev.to_string(),
                variant: v.parse()?,
            }),
            _ => Ok(RevVariant {
                rev: s.to_string(),
                variant: Variant::AsCommitted,
            }),
        }
    }
}

/// `stampede e2b ab`.
#[derive(Debug, clap::Args)]
pub struct AbArgs {
    /// Profile to run.
    pub profile: PathBuf,
    /// The source.
    #[command(flatten)]
    pub source: SourceArgs,
    /// Base build, `REV[:VARIANT]`.
    #[arg(long, value_name = "REV[:VARIANT]")]
    pub base: RevVariant,
    /// Head build, `REV[:VARIANT]`.
    #[arg(long, value_name = "REV[:VARIANT]")]
    pub head: RevVariant,
    /// The stack.
    #[command(flatten)]
    pub stack: StackArgs,
}

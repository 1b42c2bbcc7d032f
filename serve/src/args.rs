//! `stampede serve` flags and the CLI entry point.

use std::net::SocketAddr;

use super::config::{
    NodeTarget, ServeConfig, DEFAULT_API_KEY, DEFAULT_BODY_READ_TIMEOUT,
    DEFAULT_HEADER_READ_TIMEOUT, DEFAULT_IDLE_TIMEOUT, DEFAULT_MAX_CONNECTIONS,
    DEFAULT_RETRY_BACKOFF,
};
use super::error::ServeError;
use super::service::start_replicas;
use stampede_http_kit::Secret;
use stampede_placement::{
    AccountingMode, FailureAnswers, PlacementConfig, MIN_SYNC_INTERVAL, REQUEST_TIMEOUT,
    SYNC_INTERVAL,
};

/// Flags of `stampede serve`.
#[derive(Debug, Clone, clap::Args)]
pub struct ServeArgs {
    /// Address of the REST API (the first replica's; others take the next ports).
    #[arg(long, default_value = "127.0.0.1:3000")]
    pub listen: SocketAddr,
    /// Orchestrator gRPC address, `host:port` or `id=host:port`; repeatable.
    #[arg(long = "node", value_name = "ADDR")]
    pub nodes: Vec<String>,
    /// Accounting mode: reported, in-flight, optimistic or reconciled.
    #[arg(long, default_value_t = PlacementConfig::default().mode)]
    pub accounting: AccountingMode,
    /// Candidates sampled per placement.
    #[arg(long, default_value_t = PlacementConfig::default().k)]
    pub k: usize,
    /// Over-commit ratio in the score's denominator.
    #[arg(long, default_value_t = PlacementConfig::default().r)]
    pub r: f64,
    /// Weight of CPU usage in the score.
    #[arg(long, default_value_t = PlacementConfig::default().alpha)]
    pub alpha: f64,
    /// Failed (non-ResourceExhausted) creates tolerated per request.
    #[arg(long, default_value_t = PlacementConfig::default().max_retries)]
    pub max_retries: u32,
    /// Skip sampled nodes with more than N creates of this instance in flight.
    #[arg(long, value_name = "N")]
    pub max_starting_per_node: Option<u32>,
    /// Node sync period (at least 1ms).
    #[arg(long, default_value_t = SYNC_INTERVAL.into(), value_parser = sync_interval)]
    pub sync_interval: humantime::Duration,
    /// Deadline of a whole create request (504 past it).
    #[arg(long, default_value_t = REQUEST_TIMEOUT.into())]
    pub request_timeout: humantime::Duration,
    /// Pause before retrying a create a node refused with ResourceExhausted (e.g.
    /// `50ms`). Default: none, at once until the deadline, as E2B.
    #[arg(long, value_name = "DURATION", value_parser = humantime::parse_duration)]
    pub retry_backoff: Option<std::time::Duration>,
    /// API key clients send in X-API-Key.
    #[arg(long, env = "STAMPEDE_API_KEY", default_value = DEFAULT_API_KEY, hide_env_values = true)]
    pub api_key: String,
    /// Token admin clients must send in X-Admin-Token for /nodes (none: /nodes answers 401).
    #[arg(long, env = "STAMPEDE_ADMIN_TOKEN", hide_env_values = true)]
    pub admin_token: Option<String>,
    /// Seed of sampling and sandbox ids (replica i uses seed + i).
    #[arg(long, default_value_t = ServeConfig::default().seed)]
    pub seed: u64,
    /// Independent instances, each with its own state, on consecutive ports.
    #[arg(long, default_value_t = 1)]
    pub replicas: usize,
    /// With --replicas above 1, kill sandboxes found on nodes that this instance does
    /// not know anyway (a single instance always does, as E2B: replicas do not share
    /// their state, so each takes the others' sandboxes for orphans).
    #[arg(long)]
    pub kill_orphans: bool,
    /// vCPU of a sandbox whose create body has no cpuCount.
    #[arg(long, default_value_t = ServeConfig::default().default_vcpu)]
    pub default_vcpu: u32,
    /// MiB of a sandbox whose create body has no memoryMB.
    #[arg(long, default_value_t = ServeConfig::default().default_memory_mb)]
    pub default_memory_mb: u32,
    /// A template a create may name besides `base` and snapshots (repeatable); any
    /// other is answered 404, as E2B does.
    #[arg(long = "template")]
    pub templates: Vec<String>,
    /// Close a connection that has not sent a complete request head this soon after it
    /// opened (HTTP/1: or after the previous answer, which bounds keep-alive idling too).
    #[arg(long, default_value_t = DEFAULT_HEADER_READ_TIMEOUT.into())]
    pub header_read_timeout: humantime::Duration,
    /// Close a connection with no request in progress that moved no byte for this long.
    #[arg(long, default_value_t = DEFAULT_IDLE_TIMEOUT.into())]
    pub idle_timeout: humantime::Duration,
    /// A request body must be whole this soon after its head (408 and the connection
    /// closed otherwise). Leave it above 60 s for stampede's own gated bursts.
    #[arg(long, default_value_t = DEFAULT_BODY_READ_TIMEOUT.into())]
    pub body_read_timeout: humantime::Duration,
    /// Connections open at once (when full, the connection waiting longest on its client
    /// is closed to admit a new one); lowered to the descriptor limit.
    #[arg(long, default_value_t = DEFAULT_MAX_CONNECTIONS)]
    pub max_connections: usize,
    /// How placement failures are answered: `e2b` (503/504/500 with `error_code`) or
    /// `legacy` (every one a 500 "Failed to place sandbox", E2B before 2026-08-13).
    #[arg(long, default_value = FailureAnswers::default().as_str(), value_parser = failure_answers())]
    pub failure_answers: FailureAnswers,
    /// Record every placement input and output to this file (JSON lines; replica `i` of
    /// several writes `<file>.<i>`), for `stampede replay`.
    #[arg(long, value_name = "FILE")]
    pub placement_trace: Option<std::path::PathBuf>,
    /// Run without the evictor: sandboxes stay on their nodes past their end time
    /// until deleted (E2B's API always evicts; this shows what is left without it).
    #[arg(long)]
    pub no_evictor: bool,
    /// After a resume that timed out, resume that sandbox next on the first node that
    /// tried it (E2B's feature flag `resume-origin-node-remap`, off by default).
    #[arg(long)]
    pub resume_origin_remap: bool,
}

impl ServeArgs {
    /// The instance settings these flags describe.
    pub fn config(&self) -> ServeConfig {
        ServeConfig {
            placement: PlacementConfig {
                k: self.k,
                r: self.r,
                alpha: self.alpha,
                max_retries: self.max_retries,
                mode: self.accounting,
                max_starting_per_node: self.max_starting_per_node,
                failure_answers: self.failure_answers,
                ..PlacementConfig::default()
            },
            sync_interval: self.sync_interval.into(),
            request_timeout: self.request_timeout.into(),
            retry_backoff: self.retry_backoff.or(DEFAULT_RETRY_BACKOFF),
            api_key: Secret::new(self.api_key.clone()),
            admin_token: self.admin_token.clone().map(Secret::new),
            seed: self.seed,
            default_vcpu: self.default_vcpu,
            default_memory_mb: self.default_memory_mb,
            templates: self.templates.clone(),
            kill_orphans: self.kill_orphans || self.replicas <= 1,
            header_read_timeout: self.header_read_timeout.into(),
            idle_timeout: self.idle_timeout.into(),
            body_read_timeout: self.body_read_timeout.into(),
            max_connections: self.max_connections,
            placement_trace: self.placement_trace.clone(),
            evictor: !self.no_evictor,
            resume_origin_remap: self.resume_origin_remap,
            ..ServeConfig::default()
        }
    }

    /// `--node` values as targets (`id=addr` names the node).
    pub fn node_targets(&self) -> Vec<NodeTarget> {
        self.nodes
            .iter()
            .map(|s| match s.split_once('=') {
                Some((id, addr)) => NodeTarget {
                    id: Some(id.to_string()),
                    addr: addr.to_string(),
                },
                None => NodeTarget::addr(s.clone()),
            })
            .collect()
    }
}

/// `stampede serve`: start the replicas and serve until Ctrl-C, placing on the `--node`
/// targets and on `discovered` (nodes the caller found, e.g. through a mock fleet's
/// admin API: the service itself does not link the fake fleet).
pub async fn run(args: ServeArgs, discovered: Vec<NodeTarget>) -> Result<(), ServeError> {
    let mut nodes = args.node_targets();
    nodes.extend(discovered);
    if nodes.is_empty() {
        return Err(ServeError::Config(
            "no nodes: give --node ADDR or --mock-admin URL".into(),
        ));
    }
    if args.replicas == 0 {
        return Err(ServeError::Config("--replicas must be at least 1".into()));
    }
    // Descriptors bound the connections the service can hold (a gated burst keeps one
    // per create open); take what the hard limit allows, as Go's runtime does for E2B.
    stampede_http_kit::raise_fd_limit();
    let handles = start_replicas(args.config(), nodes, args.listen, args.replicas).await?;
    for h in &handles {
        use std::io::Write as _;
        // A closed stdout must not stop the service (nor panic it).
        let _ = writeln!(
            std::io::stdout().lock(),
            "stampede serve: {} ({} accounting, {} nodes)",
            h.url(),
            h.config().placement.mode,
            h.nodes().len()
        );
    }
    // Freed memory goes back to the OS after a flood, as Go's runtime does for E2B.
    let trimming = tokio_util::sync::CancellationToken::new();
    let trimmer = stampede_http_kit::spawn_trimmer(trimming.clone());
    tokio::signal::ctrl_c().await.map_err(ServeError::Server)?;
    trimming.cancel();
    let _ = trimmer.await;
    for h in handles {
        h.shutdown().await;
    }
    Ok(())
}

/// `--failure-answers`: one of [`FailureAnswers::ALL`] by name (the core has no CLI
/// dependency, so the flag's parser is here).
/// A sync period, refused below [`MIN_SYNC_INTERVAL`] (the core would raise it).
fn sync_interval(text: &str) -> Result<humantime::Duration, String> {
    let d: humantime::Duration = text.parse().map_err(|e| format!("{e}"))?;
    if *d < MIN_SYNC_INTERVAL {
        return Err(format!(
            "must be at least {}",
            humantime::format_duration(MIN_SYNC_INTERVAL)
        ));
    }
    Ok(d)
}

fn failure_answers() -> impl clap::builder::TypedValueParser<Value = FailureAnswers> {
    use clap::builder::TypedValueParser;
    clap::builder::PossibleValuesParser::new(FailureAnswers::ALL.map(FailureAnswers::as_str)).map(
        |name| {
            FailureAnswers::ALL
                .into_iter()
                .find(|f| f.as_str() == name)
                .unwrap_or_default()
        },
    )
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::{ServeArgs, ServeConfig, MIN_SYNC_INTERVAL};

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        serve: ServeArgs,
    }

    /// Every flag falls back to the one default its setting has (E2B's, in
    /// `placement::config` and `ServeConfig::default`): no second copy of a number here.
    #[test]
    fn flags_default_to_the_config_defaults() {
        let cli = Cli::try_parse_from(["serve", "--node", "127.0.0.1:1"]).expect("parses");
        let mut got = cli.serve.config();
        // The two secrets may come from the environment; they are not defaults here.
        let want = ServeConfig::default();
        got.api_key.clone_from(&want.api_key);
        got.admin_token.clone_from(&want.admin_token);
        assert_eq!(got, want);
    }

    #[test]
    fn a_sync_interval_below_a_millisecond_is_refused() {
        let Err(err) =
            Cli::try_parse_from(["serve", "--node", "127.0.0.1:1", "--sync-interval", "0s"])
        else {
            panic!("a zero sync interval parsed");
        };
        assert!(err.to_string().contains("at least 1ms"), "{err}");
        let cli = Cli::try_parse_from(["serve", "--node", "127.0.0.1:1", "--sync-interval", "1ms"])
            .expect("parses");
        assert_eq!(cli.serve.config().sync_interval, MIN_SYNC_INTERVAL);
    }
}

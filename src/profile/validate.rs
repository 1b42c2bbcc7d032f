//! Semantic checks of a parsed profile: limits serde's types cannot express, and every
//! bound of [`limits`](super::limits).
//!
//! This is the one gate: `stampede validate`, `run`, `sim` and each `--sweep`
//! combination call [`validate`], so a profile that validates is one they accept.

use std::time::Duration;

use stampede_node_model::config::{ClusterConfig, LatencyDist, NodeSpec};

use super::check_table::{SetBound, CHECKS};
use super::issue::ProfileIssue;
use super::limits::*;
use super::load::Source;
use super::locate::Locator;
use super::test_plan::parse_test_plan;
use super::types::*;
use super::{ChaosFault, ChaosStep, LifecycleStep};

/// Why `placement.embedded.create_rpc_timeout` is refused: the field was removed.
pub const REMOVED_CREATE_RPC_TIMEOUT: &str = "create_rpc_timeout was removed: E2B puts no \
     deadline on a single Create RPC, only the request's (request_timeout, E2B 70 s), so a \
     hung node holds the request until then; delete the field (shorten request_timeout \
     for a faster drill)";

/// Every semantic problem of `profile`, located in `source` (the text it was parsed
/// from). Empty means the profile is runnable. At most [`MAX_ISSUES`] are listed, the
/// last one then saying how many more there are.
pub fn validate(profile: &Profile, source: &Source) -> Vec<ProfileIssue> {
    let mut v = Problems::default();
    names(&mut v, profile);
    let embedded = match &profile.placement {
        PlacementSection::Embedded(e) => Some(e),
        PlacementSection::External(_) => None,
    };
    // Another fleet's nodes are not known before the run.
    let fleet = embedded.map(|_| &profile.cluster);
    if let Some(c) = fleet {
        cluster(&mut v, c);
    }
    match &profile.placement {
        PlacementSection::Embedded(e) => embedded_placement(&mut v, e, profile.cluster.nodes),
        PlacementSection::External(e) => external(&mut v, e),
    }
    workload(&mut v, &profile.workload, fleet);
    interval(&mut v, "collect.interval", profile.collect.interval);
    if let Some(e) = embedded {
        timeline(&mut v, profile, e);
    }
    let ks = match &profile.placement {
        PlacementSection::Embedded(e) => Some(e.best_of_k.k.to_vec()),
        PlacementSection::External(_) => None,
    };
    checks(&mut v, "checks", &profile.checks, Level::Top, ks.as_deref());
    if profile.report.dir.is_empty() {
        v.add("report.dir", "must not be empty");
    }
    if profile.chaos.len() > MAX_CHAOS_STEPS {
        v.add(
            "chaos",
            &format!(
                "{} steps; at most {MAX_CHAOS_STEPS} are allowed",
                profile.chaos.len()
            ),
        );
    }
    // Node ids are only checked against a node count that is itself valid.
    let ids_of = fleet.filter(|c| (1..=MAX_NODES).contains(&c.nodes));
    for (i, step) in profile.chaos.iter().enumerate().take(MAX_CHAOS_STEPS) {
        chaos_step(&mut v, i, step, ids_of);
    }
    let locator = Locator::new(&source.text);
    let total = v.0.len();
    let mut issues: Vec<ProfileIssue> =
        v.0.into_iter()
            .take(MAX_ISSUES)
            .map(|(field, msg)| source.issue_at(&locator, &field, msg))
            .collect();
    if total > MAX_ISSUES {
        issues.push(ProfileIssue {
            file: source.file.clone(),
            line: 0,
            col: 0,
            field: String::new(),
            message: format!(
                "... and {} more problems (only the first {MAX_ISSUES} are listed)",
                total - MAX_ISSUES
            ),
        });
    }
    issues
}

/// Problems collected as (field path, message), located at the end.
#[derive(Default)]
struct Problems(Vec<(String, String)>);

impl Problems {
    fn add(&mut self, field: &str, message: &str) {
        self.0.push((field.to_string(), message.to_string()));
    }

    /// Whether a problem is already listed at `field` or under it.
    fn has_under(&self, field: &str) -> bool {
        self.0.iter().any(|(f, _)| {
            f.strip_prefix(field)
                .is_some_and(|rest| rest.is_empty() || rest.starts_with(['.', '[']))
        })
    }
}

fn positive(v: &mut Problems, field: &str, d: Duration) {
    if d.is_zero() {
        v.add(field, "must be > 0");
    }
}

/// `d` within `[lo, hi]`.
fn within(v: &mut Problems, field: &str, d: Duration, lo: Duration, hi: Duration) {
    if d < lo || d > hi {
        v.add(field, &format!("must be {}", span_text(lo, hi)));
    }
}

/// A sync or sampling period: [`MIN_INTERVAL`]..[`MAX_INTERVAL`].
fn interval(v: &mut Problems, field: &str, d: Duration) {
    within(v, field, d, MIN_INTERVAL, MAX_INTERVAL);
}

/// An integer setting in `[lo, hi]`: `must be >= lo` or `must be <= hi (why)`.
fn count(v: &mut Problems, field: &str, x: u64, lo: u64, hi: u64, why: &str) {
    if x < lo {
        v.add(field, &format!("must be >= {lo}"));
    } else if x > hi {
        v.add(field, &format!("must be <= {hi} ({why})"));
    }
}

fn names(v: &mut Problems, profile: &Profile) {
    let name = &profile.name;
    if name.is_empty()
        || !name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "._-".contains(c))
    {
        v.add("name", "must be non-empty and use only letters, digits, `.`, `_` and `-` (it names the report directory)");
    } else if name.len() > MAX_NAME_CHARS {
        v.add(
            "name",
            &format!("must be at most {MAX_NAME_CHARS} characters (it names the report directory)"),
        );
    }
    if profile.description.chars().count() > MAX_DESCRIPTION_CHARS {
        v.add(
            "description",
            &format!("must be at most {MAX_DESCRIPTION_CHARS} characters"),
        );
    }
    if profile.allow_targets.len() > MAX_TARGETS {
        v.add(
            "allow_targets",
            &format!("lists more than {MAX_TARGETS} hosts"),
        );
    }
}

/// Whether `id` is the id of one of the `c.nodes` nodes, without listing them all.
pub(crate) fn is_node_id(c: &ClusterConfig, id: &str) -> bool {
    let Some(digits) = id.strip_prefix("node-") else {
        return false;
    };
    if digits.is_empty() || digits.len() > 20 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return false;
    }
    match digits.parse::<usize>() {
        Ok(k) if k < c.nodes => c.node_id(k) == id,
        _ => false,
    }
}

/// The embedded fleet: node count, every node model (shared and overridden), override
/// ids. Cheap for any node count: no list of ids is built.
fn cluster(v: &mut Problems, c: &ClusterConfig) {
    if c.nodes == 0 {
        v.add("cluster.nodes", "must be at least 1");
    } else if c.nodes > MAX_NODES {
        v.add(
            "cluster.nodes",
            &format!("must be <= {MAX_NODES} (the largest fleet stampede models)"),
        );
    }
    let count_ok = (1..=MAX_NODES).contains(&c.nodes);
    for id in c.overrides.keys() {
        if count_ok && !is_node_id(c, id) {
            v.add(
                &format!("cluster.overrides.{id}"),
                "no such node in this cluster",
            );
        }
    }
    node_spec(v, "cluster.node", &c.node);
    for (id, o) in &c.overrides {
        node_spec(v, &format!("cluster.overrides.{id}"), &o.apply(&c.node));
    }
}

/// One node model at `path`: mock-node's own checks, then the limits.
fn node_spec(v: &mut Problems, path: &str, spec: &NodeSpec) {
    // mock-node's checks of a spec, on a one-node cluster so that they cost nothing.
    let one = ClusterConfig {
        nodes: 1,
        seed: None,
        node: spec.clone(),
        overrides: Default::default(),
    };
    for e in one.validate("") {
        let field = e.field.strip_prefix("node.").unwrap_or(&e.field);
        v.add(&format!("{path}.{field}"), &e.message);
    }
    if spec.cpu_count > MAX_NODE_CPUS {
        v.add(
            &format!("{path}.cpu_count"),
            &format!("must be <= {MAX_NODE_CPUS}"),
        );
    }
    if spec.failures.len() > MAX_FAILURE_RULES {
        v.add(
            &format!("{path}.failures"),
            &format!("at most {MAX_FAILURE_RULES} rules"),
        );
    }
    latency(v, &format!("{path}.create_latency"), &spec.create_latency);
    latency(v, &format!("{path}.delete_latency"), &spec.delete_latency);
    if spec.metrics_lag > MAX_LATENCY {
        v.add(
            &format!("{path}.metrics_lag"),
            &format!(
                "must be at most {}",
                humantime::format_duration(MAX_LATENCY)
            ),
        );
    }
}

/// A latency distribution's scale at most `max`, its sigma at most [`MAX_SIGMA`].
fn dist_within(v: &mut Problems, path: &str, d: &LatencyDist, max: Duration) {
    let (name, scale) = match d {
        LatencyDist::Constant { value } => ("value", *value),
        LatencyDist::Uniform { max, .. } => ("max", *max),
        LatencyDist::Exponential { mean } => ("mean", *mean),
        LatencyDist::Lognormal { median, .. } => ("median", *median),
        LatencyDist::Quantiles { .. } => ("points", d.max().unwrap_or_default()),
    };
    if scale > max {
        v.add(
            &format!("{path}.{name}"),
            &format!("must be at most {}", humantime::format_duration(max)),
        );
    }
    if let LatencyDist::Lognormal { sigma, .. } = d {
        if sigma.is_finite() && *sigma > MAX_SIGMA {
            v.add(
                &format!("{path}.sigma"),
                &format!("must be at most {MAX_SIGMA}"),
            );
        }
    }
}

fn latency(v: &mut Problems, path: &str, d: &LatencyDist) {
    dist_within(v, path, d, MAX_LATENCY);
}

fn embedded_placement(v: &mut Problems, e: &EmbeddedPlacement, nodes: usize) {
    let p = "placement.embedded";
    let modes = e.accounting.to_vec();
    if modes.is_empty() {
        v.add(&format!("{p}.accounting"), "must name at least one mode");
    }
    for (i, m) in modes.iter().enumerate() {
        if modes[..i].contains(m) {
            v.add(
                &format!("{p}.accounting[{i}]"),
                &format!("mode `{m}` is listed twice"),
            );
        }
    }
    let ks = e.best_of_k.k.to_vec();
    for (i, &k) in ks.iter().enumerate() {
        let field = match e.best_of_k.k {
            OneOrMany::One(_) => format!("{p}.best_of_k.k"),
            OneOrMany::Many(_) => format!("{p}.best_of_k.k[{i}]"),
        };
        if k < 1 {
            v.add(&field, "must be >= 1");
        } else if nodes > 0 && k > nodes {
            v.add(&field, &format!("must be <= the number of nodes ({nodes})"));
        } else if ks[..i].contains(&k) {
            v.add(&field, &format!("k = {k} is listed twice"));
        }
    }
    if ks.is_empty() {
        v.add(&format!("{p}.best_of_k.k"), "must list at least one value");
    }
    let r = e.best_of_k.r;
    if !(r.is_finite() && (MIN_R..=MAX_R).contains(&r)) {
        v.add(
            &format!("{p}.best_of_k.r"),
            &format!("must be a number between {MIN_R} and {MAX_R} (E2B: 4)"),
        );
    }
    let alpha = e.best_of_k.alpha;
    if !(alpha.is_finite() && (0.0..=MAX_ALPHA).contains(&alpha)) {
        v.add(
            &format!("{p}.best_of_k.alpha"),
            &format!("must be a number between 0 and {MAX_ALPHA} (E2B: 0.5)"),
        );
    }
    count(
        v,
        &format!("{p}.max_retries"),
        u64::from(e.max_retries),
        1,
        u64::from(MAX_RETRIES),
        "E2B: 3",
    );
    count(
        v,
        &format!("{p}.replicas"),
        u64::from(e.replicas),
        1,
        u64::from(MAX_REPLICAS),
        "placement instances",
    );
    let views = u64::from(e.replicas).saturating_mul(nodes as u64);
    if e.replicas <= MAX_REPLICAS && nodes <= MAX_NODES && views > MAX_NODE_VIEWS {
        v.add(
            &format!("{p}.replicas"),
            &format!(
                "replicas x nodes = {views} node views; at most {MAX_NODE_VIEWS} (each replica \
                 tracks every node): lower replicas or cluster.nodes"
            ),
        );
    }
    interval(v, &format!("{p}.sync_interval"), e.sync_interval);
    if let Some(phase) = e.sync_phase {
        within(
            v,
            &format!("{p}.sync_phase"),
            phase,
            Duration::from_nanos(1),
            e.sync_interval,
        );
    }
    within(
        v,
        &format!("{p}.request_timeout"),
        e.request_timeout,
        MIN_TIMEOUT,
        MAX_TIMEOUT,
    );
    if e.create_rpc_timeout.is_some() {
        v.add(
            &format!("{p}.create_rpc_timeout"),
            REMOVED_CREATE_RPC_TIMEOUT,
        );
    }
    for (field, message) in e.api_stage.validate() {
        v.add(&format!("{p}.api_stage.{field}"), &message);
    }
    within(
        v,
        &format!("{p}.rpc_round_trip"),
        e.rpc_round_trip,
        Duration::from_micros(1),
        MAX_TIMEOUT,
    );
    if let Some(b) = e.retry_backoff {
        within(
            v,
            &format!("{p}.retry_backoff"),
            b,
            Duration::ZERO,
            MAX_TIMEOUT,
        );
    }
}

fn external(v: &mut Problems, e: &ExternalPlacement) {
    let p = "placement.external";
    if let Err(m) = http_url(&e.url) {
        v.add(&format!("{p}.url"), &m);
    }
    if e.api_key_env.is_empty() {
        v.add(
            &format!("{p}.api_key_env"),
            "must name an environment variable",
        );
    }
    if e.admin_token_env.as_deref() == Some("") {
        v.add(
            &format!("{p}.admin_token_env"),
            "must name an environment variable",
        );
    }
    for (name, list) in [
        ("orchestrators", &e.orchestrators),
        ("mock_admin", &e.mock_admin),
    ] {
        if list.len() > MAX_TARGETS {
            v.add(
                &format!("{p}.{name}"),
                &format!("lists more than {MAX_TARGETS} addresses"),
            );
        }
    }
    for (i, o) in e.orchestrators.iter().enumerate().take(MAX_TARGETS) {
        if super::targets::host_of_address(o).is_none() {
            v.add(
                &format!("{p}.orchestrators[{i}]"),
                "must be `host:port` or a URL",
            );
        }
    }
    for (i, u) in e.mock_admin.iter().enumerate().take(MAX_TARGETS) {
        if let Err(m) = http_url(u) {
            v.add(&format!("{p}.mock_admin[{i}]"), &m);
        }
    }
}

/// Whether `s` is an absolute http(s) URL with a host.
fn http_url(s: &str) -> Result<(), String> {
    let url = reqwest::Url::parse(s).map_err(|e| format!("not a URL ({e})"))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(format!(
            "scheme must be http or https, not `{}`",
            url.scheme()
        ));
    }
    if url.host_str().is_none_or(str::is_empty) {
        return Err("URL has no host".into());
    }
    Ok(())
}

fn workload(v: &mut Problems, w: &WorkloadSpec, fleet: Option<&ClusterConfig>) {
    match &w.shape {
        Shape::Burst { count: n } => count(
            v,
            "workload.shape.burst.count",
            *n as u64,
            1,
            MAX_BURST as u64,
            "all in flight at once",
        ),
        Shape::Rate {
            per_second,
            duration,
        } => rate(v, *per_second, *duration),
        Shape::Plan { steps } => {
            if let Err(m) = plan(steps) {
                v.add("workload.shape.plan.steps", &m);
            }
        }
    }
    let s = &w.sandbox;
    if s.template.is_empty() {
        v.add("workload.sandbox.template", "must not be empty");
    } else if s.template.chars().count() > MAX_ID_CHARS {
        v.add(
            "workload.sandbox.template",
            &format!("must be at most {MAX_ID_CHARS} characters"),
        );
    }
    count(
        v,
        "workload.sandbox.vcpu",
        u64::from(s.vcpu),
        1,
        u64::from(MAX_SANDBOX_VCPU),
        "vCPUs per sandbox",
    );
    count(
        v,
        "workload.sandbox.ram_mb",
        u64::from(s.ram_mb),
        1,
        u64::from(MAX_SANDBOX_RAM_MB),
        "MiB per sandbox",
    );
    if let Some(c) = fleet {
        fits_a_node(v, s, c);
    }
    within(
        v,
        "workload.sandbox.timeout",
        s.timeout,
        MIN_SANDBOX_TIMEOUT,
        MAX_SANDBOX_TIMEOUT,
    );
    if let Some(l) = &w.lifetime {
        if let Err(m) = l.check() {
            v.add("workload.lifetime", &m);
        }
        dist_within(v, "workload.lifetime", l, MAX_SANDBOX_TIMEOUT);
    }
    if let Some(l) = &w.lifecycle {
        for (field, message) in l.problems() {
            v.add(&format!("workload.lifecycle.{field}"), &message);
        }
        for (i, s) in l.steps.iter().enumerate() {
            if let LifecycleStep::Hold(d) = s {
                let p = format!("workload.lifecycle.steps[{i}].hold");
                dist_within(v, &p, d, MAX_SANDBOX_TIMEOUT);
            }
        }
    }
    count(
        v,
        "workload.max_in_flight",
        w.max_in_flight as u64,
        1,
        MAX_IN_FLIGHT as u64,
        "concurrent requests",
    );
}

fn rate(v: &mut Problems, per_second: f64, duration: Duration) {
    let p = "workload.shape.rate";
    let rate_ok = per_second > 0.0 && per_second.is_finite();
    if !rate_ok {
        v.add(&format!("{p}.per_second"), "must be a finite number > 0");
    } else if per_second > MAX_RATE_PER_SECOND {
        v.add(
            &format!("{p}.per_second"),
            &format!("must be <= {MAX_RATE_PER_SECOND} requests per second"),
        );
    }
    let duration_ok = !duration.is_zero() && duration <= MAX_WORKLOAD_DURATION;
    if duration.is_zero() {
        v.add(&format!("{p}.duration"), "must be > 0");
    } else if duration > MAX_WORKLOAD_DURATION {
        v.add(
            &format!("{p}.duration"),
            &format!(
                "must be at most {}",
                humantime::format_duration(MAX_WORKLOAD_DURATION)
            ),
        );
    }
    if rate_ok && duration_ok {
        // As the workload counts them: floor(per_second * duration).
        let total = (per_second * duration.as_secs_f64()).floor();
        if total < 1.0 {
            v.add(
                &format!("{p}.per_second"),
                &format!(
                    "sends no request: per_second x duration = {:.3e} < 1",
                    per_second * duration.as_secs_f64()
                ),
            );
        } else if total > MAX_REQUESTS as f64 {
            v.add(
                p,
                &format!("per_second x duration = {total:.0} requests; at most {MAX_REQUESTS}"),
            );
        }
    }
}

/// goose test-plan syntax (`users,timespan;...`, timespans in whole seconds or
/// `30s`/`2m`/`1h30m`), read as goose reads it, then the plan limits.
fn plan(steps: &str) -> Result<(), String> {
    let parsed = parse_test_plan(steps)?;
    if parsed.len() > MAX_PLAN_STEPS {
        return Err(format!("{} steps; at most {MAX_PLAN_STEPS}", parsed.len()));
    }
    let mut started: u64 = 0;
    let mut previous = 0usize;
    let mut total = Duration::ZERO;
    for s in &parsed {
        if s.users > MAX_PLAN_USERS {
            return Err(format!(
                "step `{},{}s`: {} users; at most {MAX_PLAN_USERS} at once",
                s.users,
                s.ramp.as_secs(),
                s.users
            ));
        }
        started = started.saturating_add(s.users.saturating_sub(previous) as u64);
        previous = s.users;
        total = total.saturating_add(s.ramp);
    }
    if started > MAX_PLAN_STARTED_USERS {
        return Err(format!(
            "starts {started} users in all; at most {MAX_PLAN_STARTED_USERS}"
        ));
    }
    if total > MAX_WORKLOAD_DURATION {
        return Err(format!(
            "lasts {}; at most {}",
            humantime::format_duration(total),
            humantime::format_duration(MAX_WORKLOAD_DURATION)
        ));
    }
    Ok(())
}

/// The workload's span for sampling: how long it sends (a burst: until its requests
/// time out at the latest).
fn workload_span(w: &WorkloadSpec, e: &EmbeddedPlacement) -> Duration {
    match &w.shape {
        Shape::Burst { .. } => e.request_timeout,
        Shape::Rate { duration, .. } => *duration,
        Shape::Plan { steps } => parse_test_plan(steps)
            .map(|s| {
                s.iter()
                    .fold(Duration::ZERO, |t, s| t.saturating_add(s.ramp))
            })
            .unwrap_or_default(),
    }
}

/// The timeline of per-node counts (`samples x nodes`) within [`MAX_TIMELINE_CELLS`].
fn timeline(v: &mut Problems, profile: &Profile, e: &EmbeddedPlacement) {
    let every = profile.collect.interval;
    if every < MIN_INTERVAL || profile.cluster.nodes > MAX_NODES {
        return; // reported already
    }
    let span = workload_span(&profile.workload, e).min(MAX_WORKLOAD_DURATION);
    let samples = (span.as_nanos() / every.as_nanos()) as u64 + 1;
    let cells = samples.saturating_mul(profile.cluster.nodes as u64);
    if cells > MAX_TIMELINE_CELLS {
        v.add(
            "collect.interval",
            &format!(
                "the timeline would hold {samples} samples x {} nodes = {cells} counts; at most \
                 {MAX_TIMELINE_CELLS}: raise collect.interval or shorten the workload",
                profile.cluster.nodes
            ),
        );
    }
}

/// The largest sandbox, in vCPU, a node model admits: never more than its CPUs (a larger
/// one is InvalidArgument), and within `overcommit x cpu_count - baseline_vcpu.min` when
/// the overcommit rule is on.
fn vcpu_capacity(spec: &NodeSpec) -> f64 {
    let cpus = f64::from(spec.cpu_count);
    if spec.overcommit > 0.0 {
        cpus.min(spec.overcommit * cpus - f64::from(spec.baseline_vcpu.min))
    } else {
        cpus
    }
}

/// The sandbox must fit on at least one node of the fleet (in vCPU and in memory), or
/// every create is refused and retried until its deadline.
fn fits_a_node(v: &mut Problems, s: &SandboxSpec, c: &ClusterConfig) {
    if c.nodes == 0 || c.nodes > MAX_NODES {
        return;
    }
    let known: Vec<NodeSpec> = c
        .overrides
        .iter()
        .filter(|(id, _)| is_node_id(c, id))
        .map(|(_, o)| o.apply(&c.node))
        .collect();
    let mut specs: Vec<&NodeSpec> = known.iter().collect();
    if known.len() < c.nodes {
        specs.push(&c.node);
    }
    // A model refused already (no CPU, a bad overcommit) says nothing more here.
    specs.retain(|n| n.cpu_count > 0 && n.overcommit.is_finite() && n.overcommit >= 0.0);
    if specs.is_empty() {
        return;
    }
    let vcpu = f64::from(s.vcpu);
    if !specs.iter().any(|n| vcpu <= vcpu_capacity(n)) {
        let best = specs
            .iter()
            .map(|n| vcpu_capacity(n))
            .fold(f64::NEG_INFINITY, f64::max);
        v.add(
            "workload.sandbox.vcpu",
            &format!(
                "no node can hold a sandbox of {} vCPU (the largest takes {best} vCPU: \
                 cpu_count, and overcommit x cpu_count - baseline_vcpu.min when set)",
                s.vcpu
            ),
        );
    }
    let ram = u64::from(s.ram_mb);
    if !specs.iter().any(|n| ram <= n.memory_mib) {
        let best = specs.iter().map(|n| n.memory_mib).max().unwrap_or(0);
        v.add(
            "workload.sandbox.ram_mb",
            &format!("no node can hold a sandbox of {ram} MiB (the largest has memory_mib {best})"),
        );
    }
}

/// Where a `checks` section sits: `checks:`, `per_mode.<mode>`, or `per_k.<k>`.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Level {
    Top,
    Mode,
    K,
}

/// `ks` are the profile's Best-of-K `k` values (`None` for an external placement,
/// which runs no `k` of ours).
fn checks(v: &mut Problems, p: &str, c: &Checks, level: Level, ks: Option<&[usize]>) {
    for def in &CHECKS {
        match (def.get)(c) {
            Some(SetBound::Figure(b)) => bound(v, &format!("{p}.{}", def.name), &b, def.at_most),
            Some(SetBound::Latency(l)) => positive(v, &format!("{p}.{}.max", def.name), l.max),
            None => {}
        }
    }
    if level != Level::Top && !c.per_mode.is_empty() {
        v.add(&format!("{p}.per_mode"), "per_mode cannot be nested");
    }
    if level == Level::K && !c.per_k.is_empty() {
        v.add(&format!("{p}.per_k"), "per_k cannot be nested");
    }
    if level == Level::Top {
        for (mode, inner) in &c.per_mode {
            checks(v, &format!("{p}.per_mode.{mode}"), inner, Level::Mode, ks);
        }
    }
    if level != Level::K {
        for (k, inner) in &c.per_k {
            let field = format!("{p}.per_k.{k}");
            match ks {
                Some(ks) if !ks.contains(k) => v.add(
                    &field,
                    &format!("the profile runs no k = {k} (best_of_k.k is {ks:?})"),
                ),
                None => v.add(&field, "an external placement runs no k of ours"),
                Some(_) => {}
            }
            checks(v, &field, inner, Level::K, ks);
        }
    }
}

/// A bound on a non-negative figure (at most `hi` when given): each side finite and
/// in range, at least one side set, min <= max.
fn bound(v: &mut Problems, p: &str, b: &Bound, hi: Option<f64>) {
    if b.min.is_none() && b.max.is_none() {
        v.add(p, "needs `min` or `max`");
    }
    for (side, x) in [("min", b.min), ("max", b.max)] {
        if let Some(x) = x {
            let in_range = x.is_finite() && x >= 0.0 && hi.is_none_or(|h| x <= h);
            if !in_range {
                let range = match hi {
                    Some(h) => format!("in [0, {h}]"),
                    None => "a finite number >= 0".into(),
                };
                v.add(&format!("{p}.{side}"), &format!("must be {range}"));
            }
        }
    }
    if let (Some(lo), Some(hi)) = (b.min, b.max) {
        if lo > hi {
            v.add(p, "min must be <= max");
        }
    }
}

/// Why the program `prog` of a `command` step cannot be run from here: a path that is
/// not an executable file, or a bare name found on no `PATH` entry.
fn program_missing(prog: &str) -> Option<String> {
    use std::os::unix::fs::PermissionsExt;
    let runnable = |p: &std::path::Path| {
        p.metadata()
            .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    };
    if prog.contains('/') {
        return (!runnable(std::path::Path::new(prog)))
            .then(|| format!("`{prog}` is not an executable file"));
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    (!std::env::split_paths(&path).any(|d| runnable(&d.join(prog))))
        .then(|| format!("`{prog}` is not found on PATH"))
}

/// One chaos step: its times and its nodes against the embedded `fleet` (unknown for an
/// external placement). Its fault and parameters were checked as it was parsed.
fn chaos_step(v: &mut Problems, i: usize, s: &ChaosStep, fleet: Option<&ClusterConfig>) {
    let p = format!("chaos[{i}]");
    if let ChaosFault::Command(c) = &s.fault {
        for (key, argv) in [("run", &c.run), ("heal", &c.heal)] {
            if let Some(why) = argv.first().and_then(|prog| program_missing(prog)) {
                v.add(&format!("{p}.params.{key}[0]"), &why);
            }
        }
    }
    if s.fault.node_kind().is_some_and(|k| k.is_instant()) && s.duration.is_some() {
        v.add(
            &format!("{p}.duration"),
            "`restart` is instantaneous and has no duration; remove it",
        );
    }
    if s.at > MAX_WORKLOAD_DURATION {
        v.add(
            &format!("{p}.at"),
            &format!(
                "must be at most {}",
                humantime::format_duration(MAX_WORKLOAD_DURATION)
            ),
        );
    }
    if let Some(d) = s.duration {
        if !v.has_under(&format!("{p}.duration")) {
            if d.is_zero() {
                v.add(&format!("{p}.duration"), "must be > 0");
            } else if d > MAX_WORKLOAD_DURATION {
                v.add(
                    &format!("{p}.duration"),
                    &format!(
                        "must be at most {}",
                        humantime::format_duration(MAX_WORKLOAD_DURATION)
                    ),
                );
            }
        }
    }
    let total = fleet.map(|c| c.nodes);
    match &s.nodes {
        NodeSelector::Ids(ids) => {
            if ids.is_empty() {
                v.add(&format!("{p}.nodes"), "must name at least one node");
            } else if ids.len() > MAX_CHAOS_NODE_IDS {
                v.add(
                    &format!("{p}.nodes"),
                    &format!(
                        "names {} nodes; at most {MAX_CHAOS_NODE_IDS} by id (use `{{random: N}}` \
                         or `{{fraction: f}}` for more)",
                        ids.len()
                    ),
                );
            }
            for (j, id) in ids.iter().enumerate() {
                if fleet.is_some_and(|c| !is_node_id(c, id)) {
                    v.add(
                        &format!("{p}.nodes[{j}]"),
                        &format!("no node `{id}` in this cluster"),
                    );
                }
            }
        }
        NodeSelector::Random { random } => {
            if *random < 1 || total.is_some_and(|n| *random > n) {
                let n = total.map_or(String::new(), |n| format!(" and <= {n}"));
                v.add(&format!("{p}.nodes.random"), &format!("must be >= 1{n}"));
            }
        }
        NodeSelector::Fraction { fraction } => {
            if !(*fraction > 0.0 && *fraction <= 1.0) {
                v.add(&format!("{p}.nodes.fraction"), "must be in (0, 1]");
            }
        }
    }
}

//! Semantic checks of a parsed profile: limits serde's types cannot express.

use std::time::Duration;

use super::issue::ProfileIssue;
use super::load::Source;
use super::locate::Locator;
use super::types::*;

/// Fault kinds the mock-node admin API knows (design.md 2.1).
pub const FAULT_KINDS: [&str; 8] = [
    "kill",
    "hang",
    "slow",
    "errors",
    "exhaust",
    "freeze-metrics",
    "status",
    "restart",
];

/// Every semantic problem of `profile`, located in `source` (the text it was parsed
/// from). Empty means the profile is runnable.
pub fn validate(profile: &Profile, source: &Source) -> Vec<ProfileIssue> {
    let mut v = Problems::default();
    if profile.name.is_empty()
        || !profile
            .name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "._-".contains(c))
    {
        v.add("name", "must be non-empty and use only letters, digits, `.`, `_` and `-` (it names the report directory)");
    }
    for e in profile.cluster.validate("cluster") {
        v.add(&e.field, &e.message);
    }
    match &profile.placement {
        PlacementSection::Embedded(e) => embedded(&mut v, e, profile.cluster.nodes),
        PlacementSection::External(e) => external(&mut v, e),
    }
    workload(&mut v, &profile.workload);
    positive(&mut v, "collect.interval", profile.collect.interval);
    checks(&mut v, "checks", &profile.checks, true);
    if profile.report.dir.is_empty() {
        v.add("report.dir", "must not be empty");
    }
    let node_ids = match profile.placement {
        PlacementSection::Embedded(_) => Some(
            (0..profile.cluster.nodes)
                .map(|k| profile.cluster.node_id(k))
                .collect::<Vec<_>>(),
        ),
        // Another fleet's ids are not known before the run.
        PlacementSection::External(_) => None,
    };
    for (i, step) in profile.chaos.iter().enumerate() {
        chaos_step(&mut v, &format!("chaos[{i}]"), step, node_ids.as_deref());
    }
    let locator = Locator::new(&source.text);
    v.0.into_iter()
        .map(|(field, msg)| source.issue_at(&locator, &field, msg))
        .collect()
}

/// Problems collected as (field path, message), located at the end.
#[derive(Default)]
struct Problems(Vec<(String, String)>);

impl Problems {
    fn add(&mut self, field: &str, message: &str) {
        self.0.push((field.to_string(), message.to_string()));
    }
}

fn positive(v: &mut Problems, field: &str, d: Duration) {
    if d.is_zero() {
        v.add(field, "must be > 0");
    }
}

fn embedded(v: &mut Problems, e: &EmbeddedPlacement, nodes: usize) {
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
    let k = e.best_of_k.k;
    if k < 1 {
        v.add(&format!("{p}.best_of_k.k"), "must be >= 1");
    } else if nodes > 0 && k > nodes {
        v.add(
            &format!("{p}.best_of_k.k"),
            &format!("must be <= the number of nodes ({nodes})"),
        );
    }
    if !(e.best_of_k.r > 0.0 && e.best_of_k.r.is_finite()) {
        v.add(&format!("{p}.best_of_k.r"), "must be a finite number > 0");
    }
    if !(e.best_of_k.alpha >= 0.0 && e.best_of_k.alpha.is_finite()) {
        v.add(
            &format!("{p}.best_of_k.alpha"),
            "must be a finite number >= 0",
        );
    }
    if e.max_retries < 1 {
        v.add(&format!("{p}.max_retries"), "must be >= 1");
    }
    if e.replicas < 1 {
        v.add(&format!("{p}.replicas"), "must be >= 1");
    }
    positive(v, &format!("{p}.sync_interval"), e.sync_interval);
    positive(v, &format!("{p}.request_timeout"), e.request_timeout);
    positive(v, &format!("{p}.create_rpc_timeout"), e.create_rpc_timeout);
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
    for (i, o) in e.orchestrators.iter().enumerate() {
        if super::targets::host_of_address(o).is_none() {
            v.add(
                &format!("{p}.orchestrators[{i}]"),
                "must be `host:port` or a URL",
            );
        }
    }
    for (i, u) in e.mock_admin.iter().enumerate() {
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

fn workload(v: &mut Problems, w: &WorkloadSpec) {
    match &w.shape {
        Shape::Burst { count } => {
            if *count < 1 {
                v.add("workload.shape.burst.count", "must be >= 1");
            }
        }
        Shape::Rate {
            per_second,
            duration,
        } => {
            if !(*per_second > 0.0 && per_second.is_finite()) {
                v.add(
                    "workload.shape.rate.per_second",
                    "must be a finite number > 0",
                );
            }
            positive(v, "workload.shape.rate.duration", *duration);
        }
        Shape::Plan { steps } => {
            if let Err(m) = plan_steps(steps) {
                v.add("workload.shape.plan.steps", &m);
            }
        }
    }
    let s = &w.sandbox;
    if s.template.is_empty() {
        v.add("workload.sandbox.template", "must not be empty");
    }
    if s.vcpu < 1 {
        v.add("workload.sandbox.vcpu", "must be >= 1");
    }
    if s.ram_mb < 1 {
        v.add("workload.sandbox.ram_mb", "must be >= 1");
    }
    positive(v, "workload.sandbox.timeout", s.timeout);
    if let Some(l) = &w.lifetime {
        if let Err(m) = l.check() {
            v.add("workload.lifetime", &m);
        }
    }
    if w.max_in_flight < 1 {
        v.add("workload.max_in_flight", "must be >= 1");
    }
}

/// goose test-plan syntax (`users,timespan;...`, timespans in whole seconds or
/// `30s`/`2m`/`1h30m`), checked by goose's own parser so that what validates also runs.
fn plan_steps(steps: &str) -> Result<(), String> {
    steps
        .parse::<goose::test_plan::TestPlan>()
        .map(|_| ())
        .map_err(|e| match e {
            goose::GooseError::InvalidOption { value, detail, .. } => {
                format!("`{value}`: {detail}")
            }
            other => other.to_string(),
        })
}

fn checks(v: &mut Problems, p: &str, c: &Checks, top: bool) {
    let fraction = |v: &mut Problems, name: &str, b: &Option<Bound>, hi: Option<f64>| {
        if let Some(b) = b {
            bound(v, &format!("{p}.{name}"), b, hi);
        }
    };
    fraction(v, "cv", &c.cv, None);
    fraction(v, "max_over_mean", &c.max_over_mean, None);
    fraction(v, "jain", &c.jain, Some(1.0));
    fraction(v, "error_rate", &c.error_rate, Some(1.0));
    fraction(v, "lost", &c.lost, None);
    fraction(v, "duplicated", &c.duplicated, None);
    if let Some(l) = &c.p99_latency {
        positive(v, &format!("{p}.p99_latency.max"), l.max);
    }
    if !top && !c.per_mode.is_empty() {
        v.add(&format!("{p}.per_mode"), "per_mode cannot be nested");
    }
    for (mode, inner) in &c.per_mode {
        checks(v, &format!("{p}.per_mode.{mode}"), inner, false);
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

fn chaos_step(v: &mut Problems, p: &str, s: &ChaosStep, node_ids: Option<&[String]>) {
    if !FAULT_KINDS.contains(&s.fault.as_str()) {
        v.add(
            &format!("{p}.fault"),
            &format!(
                "unknown fault `{}` (expected one of {})",
                s.fault,
                FAULT_KINDS.join(", ")
            ),
        );
    }
    if let Some(d) = s.duration {
        positive(v, &format!("{p}.duration"), d);
    }
    let total = node_ids.map(<[String]>::len);
    match &s.nodes {
        NodeSelector::Ids(ids) => {
            if ids.is_empty() {
                v.add(&format!("{p}.nodes"), "must name at least one node");
            }
            for (i, id) in ids.iter().enumerate() {
                if node_ids.is_some_and(|all| !all.contains(id)) {
                    v.add(
                        &format!("{p}.nodes[{i}]"),
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
    for (key, val) in &s.params {
        let f = format!("{p}.params.{key}");
        let problem = match key.as_str() {
            "probability" if !val.as_f64().is_some_and(|x| (0.0..=1.0).contains(&x)) => {
                Some("must be a number in [0, 1]")
            }
            "latency" | "delay"
                if val
                    .as_str()
                    .is_none_or(|t| humantime::parse_duration(t).is_err()) =>
            {
                Some("must be a duration such as `200ms`")
            }
            _ => None,
        };
        if let Some(m) = problem {
            v.add(&f, m);
        }
    }
}

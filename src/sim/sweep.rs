//! Parameter sweeps: `--sweep key=v1,v2,...` axes, their cartesian product, `--repeat`
//! seeds per combination, and the spread of the figures over those seeds.

use std::collections::BTreeMap;
use std::time::Duration;

use stampede_node_model::config::LatencyDist;

use super::budget::SimBudget;
use super::error::SimError;
use super::setup::{profile_modes, validate_profile, SimSetup};
use super::simulate_setup;
use crate::placement::AccountingMode;
use crate::profile::RunSettings;
use crate::profile::{EmbeddedPlacement, OneOrMany, PlacementSection, Profile, RunVariant, Shape};
use crate::report::RunResult;
pub use crate::report::Spread;

/// One setting a sweep can vary: how its values parse and where one goes in a profile.
#[derive(Clone, Copy)]
pub struct SweepKey {
    /// The key of `--sweep KEY=...`.
    pub name: &'static str,
    parse: fn(&str, &str) -> Result<Value, String>,
    apply: fn(&mut Profile, Value) -> Result<Option<AccountingMode>, String>,
}

impl std::fmt::Debug for SweepKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name)
    }
}

/// The settings a sweep can vary, each once: its name, its value type and where it goes.
pub const SWEEP_KEYS: [SweepKey; 12] = [
    SweepKey {
        name: "accounting",
        parse: |_, v| v.parse().map(Value::Mode),
        apply: |_, v| v.mode().map(Some),
    },
    SweepKey {
        name: "k",
        parse: |k, v| count(k, v, 1),
        apply: |p, v| {
            embedded(p)?.best_of_k.k = OneOrMany::One(v.count()?);
            Ok(None)
        },
    },
    SweepKey {
        name: "r",
        parse: float,
        apply: |p, v| {
            embedded(p)?.best_of_k.r = v.float()?;
            Ok(None)
        },
    },
    SweepKey {
        name: "alpha",
        parse: float,
        apply: |p, v| {
            embedded(p)?.best_of_k.alpha = v.float()?;
            Ok(None)
        },
    },
    SweepKey {
        name: "sync_interval",
        parse: |k, v| time(k, v).map(Value::Time),
        apply: |p, v| {
            embedded(p)?.sync_interval = v.time()?;
            Ok(None)
        },
    },
    SweepKey {
        name: "sync_phase",
        parse: |k, v| time(k, v).map(Value::Time),
        apply: |p, v| {
            embedded(p)?.sync_phase = Some(v.time()?);
            Ok(None)
        },
    },
    SweepKey {
        name: "replicas",
        parse: |k, v| count(k, v, 1),
        apply: |p, v| {
            embedded(p)?.replicas =
                u32::try_from(v.count()?).map_err(|_| "too many replicas".to_string())?;
            Ok(None)
        },
    },
    SweepKey {
        name: "rate",
        parse: float,
        apply: |p, v| {
            match &mut p.workload.shape {
                Shape::Rate { per_second, .. } => *per_second = v.float()?,
                _ => return Err("`rate` needs a profile with a rate shape".into()),
            }
            Ok(None)
        },
    },
    SweepKey {
        name: "nodes",
        parse: |k, v| count(k, v, 1),
        apply: |p, v| {
            p.cluster.nodes = v.count()?;
            Ok(None)
        },
    },
    SweepKey {
        name: "create_latency",
        parse: |k, v| match v.split_once('-') {
            Some((lo, hi)) => Ok(Value::Latency(LatencyDist::Uniform {
                min: time(k, lo)?,
                max: time(k, hi)?,
            })),
            None => Ok(Value::Latency(LatencyDist::Constant { value: time(k, v)? })),
        },
        apply: |p, v| {
            p.cluster.node.create_latency = v.latency()?;
            Ok(None)
        },
    },
    SweepKey {
        name: "max_starting",
        parse: |k, v| count(k, v, 0),
        apply: |p, v| {
            p.cluster.node.max_starting =
                u32::try_from(v.count()?).map_err(|_| "too large".to_string())?;
            Ok(None)
        },
    },
    SweepKey {
        name: "burst",
        parse: |k, v| count(k, v, 1),
        apply: |p, v| {
            p.workload.shape = Shape::Burst { count: v.count()? };
            Ok(None)
        },
    },
];

/// The sweep key called `name`.
fn sweep_key(name: &str) -> Option<&'static SweepKey> {
    SWEEP_KEYS.iter().find(|k| k.name == name)
}

/// Every key, comma-separated (for messages).
pub fn sweep_key_names() -> String {
    SWEEP_KEYS.map(|k| k.name).join(", ")
}

/// One `--sweep` argument: a key and the values it takes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SweepAxis {
    /// The name of one of [`SWEEP_KEYS`].
    pub key: String,
    /// Values in the order given.
    pub values: Vec<String>,
}

impl std::str::FromStr for SweepAxis {
    type Err = SimError;

    /// Parse `key=v1,v2,...`: a known key and values of its type. Each combination is
    /// validated as a profile when the sweep runs ([`run_sweep_within`]), before any
    /// simulation starts.
    fn from_str(arg: &str) -> Result<Self, SimError> {
        let bad = |message: String| SimError::Sweep {
            arg: arg.to_string(),
            message,
        };
        let (key, values) = arg
            .split_once('=')
            .ok_or_else(|| bad("expected key=v1,v2,...".into()))?;
        let key = key.trim().replace('-', "_");
        let Some(def) = sweep_key(&key) else {
            return Err(bad(format!(
                "unknown key `{key}` (expected one of {})",
                sweep_key_names()
            )));
        };
        let values: Vec<String> = values
            .split(',')
            .map(|v| v.trim().to_string())
            .filter(|v| !v.is_empty())
            .collect();
        if values.is_empty() {
            return Err(bad("no values".into()));
        }
        for v in &values {
            (def.parse)(&key, v).map_err(bad)?;
        }
        Ok(SweepAxis { key, values })
    }
}

/// A parsed sweep value; each key's `apply` takes the variant its `parse` gives.
#[derive(Clone)]
enum Value {
    Mode(AccountingMode),
    Count(usize),
    Float(f64),
    Time(Duration),
    Latency(LatencyDist),
}

/// What `apply` says when a value is not the type its key parses (never, for values
/// that came from the key's own parser).
const MISFIT: &str = "value does not fit the key";

impl Value {
    fn mode(self) -> Result<AccountingMode, String> {
        match self {
            Value::Mode(m) => Ok(m),
            _ => Err(MISFIT.into()),
        }
    }
    fn count(self) -> Result<usize, String> {
        match self {
            Value::Count(n) => Ok(n),
            _ => Err(MISFIT.into()),
        }
    }
    fn float(self) -> Result<f64, String> {
        match self {
            Value::Float(x) => Ok(x),
            _ => Err(MISFIT.into()),
        }
    }
    fn time(self) -> Result<Duration, String> {
        match self {
            Value::Time(t) => Ok(t),
            _ => Err(MISFIT.into()),
        }
    }
    fn latency(self) -> Result<LatencyDist, String> {
        match self {
            Value::Latency(d) => Ok(d),
            _ => Err(MISFIT.into()),
        }
    }
}

fn count(key: &str, v: &str, min: usize) -> Result<Value, String> {
    v.parse::<usize>()
        .ok()
        .filter(|n| *n >= min)
        .map(Value::Count)
        .ok_or_else(|| format!("{key}: `{v}` is not an integer >= {min}"))
}

fn float(key: &str, v: &str) -> Result<Value, String> {
    v.parse::<f64>()
        .ok()
        .filter(|x| x.is_finite() && *x >= 0.0)
        .map(Value::Float)
        .ok_or_else(|| format!("{key}: `{v}` is not a finite number >= 0"))
}

fn time(key: &str, s: &str) -> Result<Duration, String> {
    humantime::parse_duration(s).map_err(|e| format!("{key}: `{s}`: {e}"))
}

/// The embedded placement a sweep varies.
fn embedded(profile: &mut Profile) -> Result<&mut EmbeddedPlacement, String> {
    match &mut profile.placement {
        PlacementSection::Embedded(p) => Ok(p),
        PlacementSection::External(_) => Err(EXTERNAL.into()),
    }
}

/// Marks [`embedded`]'s refusal, which [`apply`] reports as its own error.
const EXTERNAL: &str = "external placement";

/// Apply `key=value` to `profile`; an `accounting` value is returned instead.
fn apply(
    profile: &mut Profile,
    key: &str,
    value: &str,
) -> Result<Option<AccountingMode>, SimError> {
    let bad = |message: String| SimError::Sweep {
        arg: format!("{key}={value}"),
        message,
    };
    let def = sweep_key(key).ok_or_else(|| bad(format!("unknown key `{key}`")))?;
    let parsed = (def.parse)(key, value).map_err(bad)?;
    if !matches!(profile.placement, PlacementSection::Embedded(_)) {
        return Err(SimError::ExternalPlacement);
    }
    (def.apply)(profile, parsed).map_err(|m| {
        if m == EXTERNAL {
            SimError::ExternalPlacement
        } else {
            bad(m)
        }
    })
}

/// One combination of a sweep, run once per seed.
#[derive(Debug, Clone)]
pub struct SweepPoint {
    /// The value of every axis, in axis order.
    pub values: Vec<String>,
    /// One run per seed, in seed order.
    pub runs: Vec<RunResult>,
    /// CV of the final per-node counts over seeds.
    pub cv: Spread,
    /// max/mean over seeds.
    pub max_over_mean: Spread,
    /// Error rate over seeds.
    pub error_rate: Spread,
}

/// A finished sweep.
#[derive(Debug, Clone)]
pub struct Sweep {
    /// Axis keys, in column order (`accounting` first).
    pub keys: Vec<String>,
    /// Seeds used for every combination.
    pub seeds: Vec<u64>,
    /// Every combination, in cartesian order (last axis fastest).
    pub points: Vec<SweepPoint>,
}

/// Most runs of one sweep (combinations x seeds): 10,000. Each run's result, timeline
/// included, is kept for the table; a sweep that large is already hours of reading.
pub const MAX_SWEEP_RUNS: u64 = 10_000;

/// Run the cartesian product of `axes` over `profile`, `repeat` seeds each (the
/// profile's seed, seed+1, ...), within the default [`SimBudget`]. Without an
/// `accounting` axis the profile's modes are one.
pub fn run_sweep(profile: &Profile, axes: &[SweepAxis], repeat: u32) -> Result<Sweep, SimError> {
    run_sweep_within(profile, axes, repeat, &SimBudget::default())
}

/// [`run_sweep`] within `budget`. Every combination is validated as a profile (the same
/// [`validate`](crate::profile::validate) as a file, its problems reported under
/// `--sweep key=value ...`) and the estimates of all runs are checked against the budget
/// before the first run starts.
pub fn run_sweep_within(
    profile: &Profile,
    axes: &[SweepAxis],
    repeat: u32,
    budget: &SimBudget,
) -> Result<Sweep, SimError> {
    let mut axes: Vec<SweepAxis> = axes.to_vec();
    if !axes.iter().any(|a| a.key == "accounting") {
        let values = profile_modes(profile)?
            .iter()
            .map(|m| m.as_str().to_string())
            .collect();
        axes.insert(
            0,
            SweepAxis {
                key: "accounting".into(),
                values,
            },
        );
    }
    // A profile comparing several `k` is swept over them too, as `run` would run them.
    if let PlacementSection::Embedded(e) = &profile.placement {
        let ks = e.best_of_k.k.to_vec();
        if ks.len() > 1 && !axes.iter().any(|a| a.key == "k") {
            axes.insert(
                1,
                SweepAxis {
                    key: "k".into(),
                    values: ks.iter().map(usize::to_string).collect(),
                },
            );
        }
    }
    let repeat = repeat.max(1);
    let runs = axes
        .iter()
        .try_fold(u64::from(repeat), |n, a| {
            n.checked_mul(a.values.len() as u64)
        })
        .filter(|n| *n <= MAX_SWEEP_RUNS);
    if runs.is_none() {
        return Err(SimError::Sweep {
            arg: axes
                .iter()
                .map(|a| format!("{}={}", a.key, a.values.join(",")))
                .collect::<Vec<_>>()
                .join(" "),
            message: format!("combinations x --repeat {repeat} is more than {MAX_SWEEP_RUNS} runs"),
        });
    }
    let seeds: Vec<u64> = (0..u64::from(repeat))
        .map(|j| profile.seed.wrapping_add(j))
        .collect();
    // Every combination resolved and validated before anything runs.
    let mut plans = Vec::new();
    for values in cartesian(&axes) {
        let mut base = profile.clone();
        let mut mode = None;
        for (axis, v) in axes.iter().zip(&values) {
            if let Some(m) = apply(&mut base, &axis.key, v)? {
                mode = Some(m);
            }
        }
        let mode = mode.unwrap_or(AccountingMode::Optimistic);
        let label = axes
            .iter()
            .zip(&values)
            .map(|(a, v)| format!("{}={v}", a.key))
            .collect::<Vec<_>>()
            .join(" ");
        validate_profile(&base, &format!("--sweep {label}"))?;
        let mut setups = Vec::with_capacity(seeds.len());
        for &seed in &seeds {
            let mut p = base.clone();
            p.seed = seed;
            let k = match &p.placement {
                PlacementSection::Embedded(e) => e.best_of_k.k.to_vec().first().copied(),
                PlacementSection::External(_) => None,
            };
            let run = RunVariant {
                mode,
                k: k.unwrap_or_default(),
                k_varies: false,
            };
            setups.push((SimSetup::from_run(&p, run)?, run));
        }
        plans.push((values, label, setups));
    }
    let estimates: Vec<_> = plans
        .iter()
        .flat_map(|(_, _, setups)| setups.iter().map(|(s, _)| s.estimate()))
        .collect();
    budget.admit(&estimates)?;
    let mut left = *budget;
    let mut points = Vec::new();
    for (values, label, setups) in plans {
        let swept: BTreeMap<String, String> = axes
            .iter()
            .zip(&values)
            .filter(|(a, _)| a.key != "accounting" && a.key != "k")
            .map(|(a, v)| (a.key.clone(), v.clone()))
            .collect();
        let mut runs = Vec::with_capacity(setups.len());
        for (setup, variant) in &setups {
            let settings = RunSettings {
                swept: swept.clone(),
                ..variant.settings()
            };
            let run = simulate_setup(setup, label.clone(), settings, &left)?;
            left.max_events = left.max_events.saturating_sub(run.events);
            runs.push(run.result);
        }
        let figure = |f: fn(&RunResult) -> f64| Spread::of(&runs.iter().map(f).collect::<Vec<_>>());
        points.push(SweepPoint {
            cv: figure(|r| r.skew.cv),
            max_over_mean: figure(|r| r.skew.max_over_mean),
            error_rate: figure(|r| r.error_rate),
            values,
            runs,
        });
    }
    Ok(Sweep {
        keys: axes.into_iter().map(|a| a.key).collect(),
        seeds,
        points,
    })
}

/// Every combination of the axes' values, last axis varying fastest.
fn cartesian(axes: &[SweepAxis]) -> Vec<Vec<String>> {
    let mut out: Vec<Vec<String>> = vec![Vec::new()];
    for axis in axes {
        out = out
            .into_iter()
            .flat_map(|prefix| {
                axis.values.iter().map(move |v| {
                    let mut row = prefix.clone();
                    row.push(v.clone());
                    row
                })
            })
            .collect();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `stampede sim --help` lists the keys in its own words; it must name each one.
    #[test]
    fn the_sweep_flags_help_names_every_key() {
        let cmd = <crate::sim::SimArgs as clap::Args>::augment_args(clap::Command::new("sim"));
        let help = cmd
            .get_arguments()
            .find(|a| a.get_id() == "sweep")
            .and_then(|a| a.get_help())
            .map(|h| h.to_string())
            .unwrap_or_default();
        for key in &SWEEP_KEYS {
            assert!(
                help.contains(key.name),
                "--sweep help lacks {}: {help}",
                key.name
            );
        }
    }

    #[test]
    fn every_key_parses_a_value_and_applies_it() {
        let text = std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/profiles/seed-000-five-node.yaml"
        ))
        .unwrap();
        let values = [
            ("accounting", "reconciled"),
            ("k", "2"),
            ("r", "2"),
            ("alpha", "0.25"),
            ("sync_interval", "5s"),
            ("sync_phase", "1s"),
            ("replicas", "2"),
            ("nodes", "7"),
            ("create_latency", "1ms-2ms"),
            ("max_starting", "4"),
            ("burst", "9"),
        ];
        for key in &SWEEP_KEYS {
            let Some((_, v)) = values.iter().find(|(k, _)| *k == key.name) else {
                assert_eq!(key.name, "rate", "no value for {} above", key.name);
                continue;
            };
            let mut p =
                crate::profile::parse(&crate::profile::Source::inline("p.yaml", &text)).unwrap();
            let before = format!("{p:?}");
            let mode = apply(&mut p, key.name, v).unwrap();
            assert!(
                mode.is_some() || format!("{p:?}") != before,
                "{} changed nothing",
                key.name
            );
        }
    }
}

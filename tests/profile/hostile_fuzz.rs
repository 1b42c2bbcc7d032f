//! Fuzzing the profile loader: mutations of the shipped profiles (random
//! keys, values, types and nesting, huge numbers, odd durations, repeated lines,
//! truncations) go through the whole path a profile takes: parse, validate, the chaos
//! plan `run` resolves, and for a simulable profile the simulator's setup, estimate and
//! a run under a small budget. Per input: no panic, a bounded time, and `validate`
//! accepting only what the run accepts.
//!
//! 48 cases by default (a few seconds); `PROPTEST_CASES=100000` for a long run, with
//! `FUZZ_SECONDS=600` to stop it after ten minutes. The test prints how many inputs ran
//! and what became of them.

use std::sync::{mpsc, Mutex};
use std::time::{Duration, Instant};

use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};
use serde_yaml_ng::Value;
use stampede::chaos::FaultPlan;
use stampede::profile::{parse, validate, PlacementSection, ProfileError, Source};
use stampede::sim::{profile_modes, simulate_setup, SimBudget, SimError, SimSetup};

/// Longest one input may take, parse to simulated run, in a debug build on a busy
/// machine (they take milliseconds; the slowest, a 100,000-node fleet, about a second).
const PER_INPUT: Duration = Duration::from_secs(20);

/// The budget of the simulated run of a fuzzed profile: enough to start the workload.
const FUZZ_BUDGET: SimBudget = SimBudget {
    max_events: 20_000,
    max_memory_bytes: 256 << 20,
};

/// A YAML tree, emitted in flow style below the top level.
#[derive(Debug, Clone)]
enum Tree {
    /// A scalar written as is (it may be a number, `~`, `.inf`, or break the syntax).
    Scalar(String),
    Map(Vec<(String, Tree)>),
    Seq(Vec<Tree>),
}

impl Tree {
    fn from_value(v: &Value) -> Tree {
        match v {
            Value::Null => Tree::Scalar("null".into()),
            Value::Bool(b) => Tree::Scalar(b.to_string()),
            Value::Number(n) => Tree::Scalar(n.to_string()),
            Value::String(s) => Tree::Scalar(quote(s)),
            Value::Sequence(s) => Tree::Seq(s.iter().map(Tree::from_value).collect()),
            Value::Mapping(m) => Tree::Map(
                m.iter()
                    .map(|(k, v)| {
                        let key = k.as_str().map_or_else(|| "?".to_string(), str::to_string);
                        (key, Tree::from_value(v))
                    })
                    .collect(),
            ),
            Value::Tagged(t) => Tree::from_value(&t.value),
        }
    }

    fn flow(&self, out: &mut String) {
        match self {
            Tree::Scalar(s) => out.push_str(s),
            Tree::Map(m) => {
                out.push('{');
                for (i, (k, v)) in m.iter().enumerate() {
                    if i > 0 {
                        out.push_str(", ");
                    }
                    out.push_str(k);
                    out.push_str(": ");
                    v.flow(out);
                }
                out.push('}');
            }
            Tree::Seq(s) => {
                out.push('[');
                for (i, v) in s.iter().enumerate() {
                    if i > 0 {
                        out.push_str(", ");
                    }
                    v.flow(out);
                }
                out.push(']');
            }
        }
    }

    /// The document: top-level keys one per line, values in flow style.
    fn document(&self) -> String {
        let mut out = String::new();
        match self {
            Tree::Map(m) => {
                for (k, v) in m {
                    out.push_str(k);
                    out.push_str(": ");
                    v.flow(&mut out);
                    out.push('\n');
                }
            }
            other => other.flow(&mut out),
        }
        out
    }

    fn leaves(&self) -> usize {
        match self {
            Tree::Scalar(_) => 1,
            Tree::Map(m) => m.iter().map(|(_, v)| v.leaves()).sum(),
            Tree::Seq(s) => s.iter().map(Tree::leaves).sum(),
        }
    }

    /// The `i`-th leaf (`i < leaves()`).
    fn nth_leaf(&mut self, i: usize) -> &mut Tree {
        let children: Vec<&mut Tree> = match self {
            Tree::Scalar(_) => return self,
            Tree::Map(m) => m.iter_mut().map(|(_, v)| v).collect(),
            Tree::Seq(s) => s.iter_mut().collect(),
        };
        let mut i = i;
        for c in children {
            let n = c.leaves();
            if i < n {
                return c.nth_leaf(i);
            }
            i -= n;
        }
        unreachable!("index within leaves")
    }

    fn count(&self) -> usize {
        1 + match self {
            Tree::Scalar(_) => 0,
            Tree::Map(m) => m.iter().map(|(_, v)| v.count()).sum(),
            Tree::Seq(s) => s.iter().map(Tree::count).sum(),
        }
    }

    /// The node at pre-order index `i` (`i < count()`).
    fn nth(&mut self, i: usize) -> &mut Tree {
        if i == 0 {
            return self;
        }
        let mut i = i - 1;
        let children: Vec<&mut Tree> = match self {
            Tree::Scalar(_) => Vec::new(),
            Tree::Map(m) => m.iter_mut().map(|(_, v)| v).collect(),
            Tree::Seq(s) => s.iter_mut().collect(),
        };
        for c in children {
            let n = c.count();
            if i < n {
                return c.nth(i);
            }
            i -= n;
        }
        unreachable!("index within count")
    }
}

/// A double-quoted YAML string.
fn quote(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            c if c.is_control() => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// One change to the tree; `at` picks a node in pre-order (modulo the node count).
#[derive(Debug, Clone)]
enum Mutation {
    /// Replace the `at`-th leaf with an odd value of the same kind (a number by a huge,
    /// tiny or negative one, a duration by an odd duration, a word by another word):
    /// mostly still well-typed, so the input gets past serde into `validate`.
    Perturb {
        at: usize,
        pick: u64,
    },
    /// Replace the `at`-th leaf (scalar) with anything.
    SetLeaf {
        at: usize,
        value: Tree,
    },
    Set {
        at: usize,
        value: Tree,
    },
    Insert {
        at: usize,
        key: String,
        value: Tree,
    },
    Remove {
        at: usize,
        which: usize,
    },
    Nest {
        at: usize,
        depth: usize,
        seq: bool,
    },
}

/// One change to the text after emitting it.
#[derive(Debug, Clone)]
enum TextMutation {
    /// Repeat line `i`: a duplicate key.
    DuplicateLine(usize),
    /// Cut the text at `i`.
    Truncate(usize),
    /// Insert `s` at `i`.
    Insert(usize, String),
}

const FIELDS: &[&str] = &[
    "name",
    "description",
    "seed",
    "allow_targets",
    "cluster",
    "nodes",
    "node",
    "overrides",
    "node-00",
    "node-03",
    "node-99",
    "cpu_count",
    "memory_mib",
    "overcommit",
    "max_sandboxes",
    "max_starting",
    "create_latency",
    "delete_latency",
    "failures",
    "rpc",
    "probability",
    "code",
    "baseline_vcpu",
    "min",
    "max",
    "busy_fraction",
    "cpu_percent",
    "per_sandbox",
    "idle_cpu_percent",
    "cpu_percent_period",
    "metrics_lag",
    "dist",
    "value",
    "mean",
    "median",
    "sigma",
    "placement",
    "embedded",
    "external",
    "accounting",
    "best_of_k",
    "k",
    "r",
    "alpha",
    "max_retries",
    "sync_interval",
    "sync_phase",
    "replicas",
    "max_starting_per_node",
    "request_timeout",
    "create_rpc_timeout",
    "url",
    "workload",
    "shape",
    "burst",
    "count",
    "rate",
    "per_second",
    "duration",
    "plan",
    "steps",
    "sandbox",
    "template",
    "vcpu",
    "ram_mb",
    "timeout",
    "lifetime",
    "max_in_flight",
    "collect",
    "interval",
    "checks",
    "cv",
    "jain",
    "error_rate",
    "p99_latency",
    "lost",
    "duplicated",
    "per_mode",
    "report",
    "dir",
    "chaos",
    "at",
    "fault",
    "params",
    "latency",
    "delay",
    "status",
    "random",
    "fraction",
];

const SCALARS: &[&str] = &[
    "0",
    "1",
    "-1",
    "3",
    "10",
    "100000",
    "100001",
    "4000000000",
    "4294967295",
    "4294967296",
    "2147483648",
    "9223372036854775807",
    "18446744073709551615",
    "18446744073709551616",
    "1e-310",
    "1e-9",
    "1e308",
    "1e309",
    "-0.0",
    "0.5",
    "1.5",
    ".inf",
    "-.inf",
    ".nan",
    "~",
    "null",
    "true",
    "no",
    "\"\"",
    "0ns",
    "1ns",
    "1ms",
    "1s",
    "0s",
    "-1s",
    "70s",
    "1h",
    "500000years",
    "584942417355years",
    "1e9h",
    "10,5s;0,1s",
    "\"1000000000,1s\"",
    "\"1,200h\"",
    "\"0,1s\"",
    "soon",
    "kill",
    "hang",
    "slow",
    "errors",
    "exhaust",
    "freeze-metrics",
    "status",
    "restart",
    "banana",
    "unavailable",
    "resource_exhausted",
    "reported",
    "in-flight",
    "optimistic",
    "reconciled",
    "uniform",
    "constant",
    "exponential",
    "lognormal",
    "node-00",
    "node-01",
    "node-99",
    "http://127.0.0.1:1",
    "https://example.com",
    "create",
    "any",
    "draining",
    "*a",
    "&a 1",
    "!!str 5",
    "'x'",
    "\"\\u0000\"",
    "[",
    "}",
    "x: y",
    "#",
    "- 1",
    "\"\u{1F600}\"",
];

const NUMBERS: &[&str] = &[
    "0",
    "1",
    "-1",
    "2",
    "3",
    "7",
    "10",
    "64",
    "100",
    "1000",
    "100000",
    "100001",
    "1000000",
    "4000000000",
    "4294967295",
    "4294967296",
    "2147483648",
    "9223372036854775807",
    "18446744073709551615",
    "1e-310",
    "1e-9",
    "0.001",
    "0.01",
    "0.5",
    "0.99",
    "1.0",
    "1.5",
    "1e9",
    "1e308",
    ".inf",
    "-.inf",
    ".nan",
    "-0.0",
];

const DURATIONS: &[&str] = &[
    "0s",
    "0ns",
    "1ns",
    "1us",
    "999us",
    "1ms",
    "100ms",
    "1s",
    "5s",
    "70s",
    "1h",
    "1h1s",
    "25h",
    "7d",
    "8d",
    "30d",
    "31d",
    "500000years",
    "584942417355years",
    "18446744073709551615s",
    "1h30m",
    "2m",
    "-1s",
    "1e9h",
    "soon",
];

const WORDS: &[&str] = &[
    "reported",
    "in-flight",
    "optimistic",
    "reconciled",
    "kill",
    "hang",
    "slow",
    "errors",
    "exhaust",
    "freeze-metrics",
    "status",
    "restart",
    "banana",
    "constant",
    "uniform",
    "exponential",
    "lognormal",
    "unavailable",
    "internal",
    "resource_exhausted",
    "deadline_exceeded",
    "unknown",
    "create",
    "delete",
    "list",
    "service_info",
    "any",
    "draining",
    "unhealthy",
    "standby",
    "healthy",
    "node-00",
    "node-01",
    "node-09",
    "node-99",
    "node-100",
    "base",
    "x",
    "",
    "http://127.0.0.1:3000",
    "10.0.0.7:5008",
];

const PLANS: &[&str] = &[
    "10,5s;10,20s;0,5s",
    "5,1s;5,2s;0,1s",
    "1000000000,1s",
    "100000,1s;0,1s",
    "100001,1s",
    "1,200h",
    "1,168h",
    "0,1s",
    "10,5ms",
    "",
    "1,1s;",
    "3,0",
    "1,1;1,1;1,1",
];

/// An odd value of the kind of `old` (number, duration, plan, word), chosen by `pick`.
fn perturb(old: &str, pick: u64) -> String {
    let bare = old.trim_matches('"');
    let choose = |pool: &[&str]| pool[(pick % pool.len() as u64) as usize].to_string();
    let is_number = bare.parse::<f64>().is_ok();
    let is_duration = !is_number
        && bare.starts_with(|c: char| c.is_ascii_digit())
        && bare.ends_with(|c: char| c.is_ascii_alphabetic());
    match pick % 8 {
        // Now and then a value of another kind, or a fresh random number.
        0 => choose(SCALARS),
        1 if is_number => (pick >> 3).to_string(),
        _ if is_number => choose(NUMBERS),
        _ if is_duration => quote(&choose(DURATIONS)),
        _ if bare.contains(',') => quote(&choose(PLANS)),
        _ => quote(&choose(WORDS)),
    }
}

fn scalar() -> impl Strategy<Value = Tree> {
    prop_oneof![
        4 => proptest::sample::select(SCALARS).prop_map(|s| Tree::Scalar(s.to_string())),
        1 => any::<u64>().prop_map(|n| Tree::Scalar(n.to_string())),
        1 => any::<f64>().prop_map(|x| Tree::Scalar(format!("{x:e}"))),
        1 => (any::<u32>(), proptest::sample::select(&["ns", "us", "ms", "s", "m", "h", "d", "y"][..]))
            .prop_map(|(n, u)| Tree::Scalar(format!("{n}{u}"))),
        1 => "[a-zA-Z0-9_.-]{0,12}".prop_map(Tree::Scalar),
    ]
}

fn key() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => proptest::sample::select(FIELDS).prop_map(str::to_string),
        1 => "[a-z_]{1,10}",
    ]
}

fn tree() -> impl Strategy<Value = Tree> {
    scalar().prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            proptest::collection::vec((key(), inner.clone()), 0..4).prop_map(Tree::Map),
            proptest::collection::vec(inner, 0..4).prop_map(Tree::Seq),
        ]
    })
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        12 => (any::<usize>(), any::<u64>()).prop_map(|(at, pick)| Mutation::Perturb { at, pick }),
        2 => (any::<usize>(), scalar()).prop_map(|(at, value)| Mutation::SetLeaf { at, value }),
        1 => (any::<usize>(), scalar()).prop_map(|(at, value)| Mutation::Set { at, value }),
        1 => (any::<usize>(), tree()).prop_map(|(at, value)| Mutation::Set { at, value }),
        2 => (any::<usize>(), key(), tree())
            .prop_map(|(at, key, value)| Mutation::Insert { at, key, value }),
        2 => (any::<usize>(), any::<usize>()).prop_map(|(at, which)| Mutation::Remove { at, which }),
        1 => (any::<usize>(), prop_oneof![1usize..8, 20usize..200, 1000usize..3000], any::<bool>())
            .prop_map(|(at, depth, seq)| Mutation::Nest { at, depth, seq }),
    ]
}

fn text_mutation() -> impl Strategy<Value = TextMutation> {
    prop_oneof![
        2 => any::<usize>().prop_map(TextMutation::DuplicateLine),
        1 => any::<usize>().prop_map(TextMutation::Truncate),
        1 => (any::<usize>(), prop_oneof![
            Just("\n---\n".to_string()),
            Just("\t".to_string()),
            Just(": ".to_string()),
            Just("\n  ".to_string()),
            Just("\u{FEFF}".to_string()),
            "[ -~]{1,8}",
        ]).prop_map(|(i, s)| TextMutation::Insert(i, s)),
    ]
}

fn seeds() -> Vec<(String, Tree)> {
    let mut out = Vec::new();
    for dir in ["profiles", "tests/fixtures/profiles"] {
        let mut paths: Vec<_> = std::fs::read_dir(dir)
            .unwrap()
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
            .collect();
        paths.sort();
        for p in paths {
            // The fixtures other than these two are broken by design (parse errors).
            let name = p.display().to_string();
            if name.contains("fixtures")
                && !name.ends_with("/valid.yaml")
                && !name.ends_with("/external.yaml")
            {
                continue;
            }
            let text = std::fs::read_to_string(&p).unwrap();
            if let Ok(v) = serde_yaml_ng::from_str::<Value>(&text) {
                out.push((p.display().to_string(), Tree::from_value(&v)));
            }
        }
    }
    assert!(out.len() >= 11, "seed profiles found: {}", out.len());
    out
}

fn apply(mut t: Tree, muts: &[Mutation]) -> Tree {
    for m in muts {
        let n = t.count();
        match m {
            Mutation::Perturb { at, pick } => {
                let leaves = t.leaves();
                if leaves > 0 {
                    let leaf = t.nth_leaf(at % leaves);
                    if let Tree::Scalar(old) = leaf {
                        *leaf = Tree::Scalar(perturb(old, *pick));
                    }
                }
            }
            Mutation::SetLeaf { at, value } => {
                let leaves = t.leaves();
                if leaves > 0 {
                    *t.nth_leaf(at % leaves) = value.clone();
                }
            }
            Mutation::Set { at, value } => *t.nth(at % n) = value.clone(),
            Mutation::Insert { at, key, value } => match t.nth(at % n) {
                Tree::Map(m) => m.push((key.clone(), value.clone())),
                Tree::Seq(s) => s.push(value.clone()),
                node => *node = Tree::Map(vec![(key.clone(), value.clone())]),
            },
            Mutation::Remove { at, which } => match t.nth(at % n) {
                Tree::Map(m) if !m.is_empty() => {
                    let i = which % m.len();
                    m.remove(i);
                }
                Tree::Seq(s) if !s.is_empty() => {
                    let i = which % s.len();
                    s.remove(i);
                }
                _ => {}
            },
            Mutation::Nest { at, depth, seq } => {
                let node = t.nth(at % n);
                let mut inner = std::mem::replace(node, Tree::Scalar(String::new()));
                for _ in 0..*depth {
                    inner = if *seq {
                        Tree::Seq(vec![inner])
                    } else {
                        Tree::Map(vec![("a".into(), inner)])
                    };
                }
                *node = inner;
            }
        }
    }
    t
}

fn char_boundary(s: &str, i: usize) -> usize {
    let mut i = i % (s.len() + 1);
    while !s.is_char_boundary(i) {
        i -= 1;
    }
    i
}

fn apply_text(mut text: String, muts: &[TextMutation]) -> String {
    for m in muts {
        match m {
            TextMutation::DuplicateLine(i) => {
                let lines: Vec<&str> = text.lines().collect();
                if !lines.is_empty() {
                    let k = i % lines.len();
                    let mut out: Vec<&str> = lines.clone();
                    out.insert(k, lines[k]);
                    text = out.join("\n") + "\n";
                }
            }
            TextMutation::Truncate(i) => {
                let at = char_boundary(&text, *i);
                text.truncate(at);
            }
            TextMutation::Insert(i, s) => {
                let at = char_boundary(&text, *i);
                text.insert_str(at, s);
            }
        }
    }
    text
}

/// What became of one input.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fate {
    /// A parse error (syntax, type, shape).
    ParseError,
    /// Parsed, refused by `validate`.
    Invalid,
    /// Valid, not simulable (external placement) or refused by the estimate.
    Valid,
    /// Valid and simulated under the small budget (finished or stopped at it).
    Simulated,
}

/// The whole path of one input; `Err` names a broken promise.
fn check(text: String) -> Result<Fate, String> {
    let src = Source::inline("fuzz.yaml", text);
    let profile = match parse(&src) {
        Ok(p) => p,
        Err(ProfileError::Parse(i)) => {
            if std::env::var_os("FUZZ_SHOW").is_some() {
                eprintln!("parse error: {i}");
            }
            if i.message.is_empty() {
                return Err(format!("parse error without a message: {i:?}"));
            }
            return Ok(Fate::ParseError);
        }
        Err(e) => return Err(format!("unexpected error kind: {e}")),
    };
    let issues = validate(&profile, &src);
    if !issues.is_empty() {
        return Ok(Fate::Invalid);
    }
    let PlacementSection::Embedded(_) = profile.placement else {
        return Ok(Fate::Valid);
    };
    // What validates, the run resolves: the chaos plan...
    let ids: Vec<String> = (0..profile.cluster.nodes)
        .map(|k| profile.cluster.node_id(k))
        .collect();
    if let Err(e) = FaultPlan::resolve(&profile.chaos, &ids, profile.seed) {
        return Err(format!(
            "validated, but the run refuses its chaos plan: {e}"
        ));
    }
    // ...and the simulator (which takes every shape of an embedded profile).
    let modes = profile_modes(&profile).map_err(|e| e.to_string())?;
    let mut fate = Fate::Valid;
    for mode in modes {
        let setup = SimSetup::from_profile(&profile, mode)
            .map_err(|e| format!("validated, but the simulator refuses it: {e}"))?;
        if FUZZ_BUDGET.admit(&[setup.estimate()]).is_err() {
            continue;
        }
        match simulate_setup(&setup, "fuzz".into(), Default::default(), &FUZZ_BUDGET) {
            Ok(_) | Err(SimError::EventBudget { .. }) => fate = Fate::Simulated,
            Err(e) => return Err(format!("validated, but the simulation failed: {e}")),
        }
    }
    Ok(fate)
}

/// `check` on a worker thread, failing past [`PER_INPUT`] or on a panic.
fn check_bounded(text: String) -> Result<(Fate, Duration), String> {
    let (tx, rx) = mpsc::channel();
    let started = Instant::now();
    std::thread::spawn(move || {
        let _ = tx.send(check(text));
    });
    match rx.recv_timeout(PER_INPUT) {
        Ok(r) => r.map(|fate| (fate, started.elapsed())),
        Err(mpsc::RecvTimeoutError::Timeout) => Err(format!("took longer than {PER_INPUT:?}")),
        Err(mpsc::RecvTimeoutError::Disconnected) => Err("panicked (see stderr)".into()),
    }
}

#[derive(Debug, Default)]
struct Tally {
    inputs: u64,
    fates: [u64; 4],
    slowest: Duration,
}

/// The runner on a thread with a large stack: the fuzzer's own trees (cloned, emitted
/// and dropped recursively) nest thousands deep. The code under test runs on worker
/// threads with the default stack.
#[test]
fn profile_loader_survives_mutated_profiles() {
    let runner = std::thread::Builder::new()
        .stack_size(512 << 20)
        .spawn(fuzz)
        .expect("fuzz thread");
    if let Err(e) = runner.join() {
        std::panic::resume_unwind(e);
    }
}

fn fuzz() {
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(48);
    let mut runner = TestRunner::new(Config {
        cases,
        failure_persistence: None,
        max_shrink_iters: 256,
        ..Config::default()
    });
    let corpus = seeds();
    let n = corpus.len();
    let input = (
        0..n,
        proptest::collection::vec(mutation(), 1..4),
        prop_oneof![
            4 => Just(Vec::new()),
            1 => proptest::collection::vec(text_mutation(), 1..3),
        ],
    );
    let tally = Mutex::new(Tally::default());
    let started = Instant::now();
    // `FUZZ_SECONDS` ends a long run on time: later cases are generated but not run.
    let deadline = std::env::var("FUZZ_SECONDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .map(|s| started + Duration::from_secs(s));
    let result = runner.run(&input, |(seed, muts, text_muts)| {
        if deadline.is_some_and(|d| Instant::now() > d) {
            return Ok(());
        }
        let tree = apply(corpus[seed].1.clone(), &muts);
        let text = apply_text(tree.document(), &text_muts);
        let shown: String = text.chars().take(2000).collect();
        let (fate, took) = check_bounded(text).map_err(|e| {
            TestCaseError::fail(format!("{e}\n--- from {}:\n{shown}", corpus[seed].0))
        })?;
        let mut t = tally.lock().unwrap();
        t.inputs += 1;
        t.fates[fate as usize] += 1;
        t.slowest = t.slowest.max(took);
        Ok(())
    });
    let t = tally.lock().unwrap();
    eprintln!(
        "fuzzed {} inputs in {:.1?}: {} parse errors, {} invalid, {} valid, {} simulated; \
         slowest input {:.1?}",
        t.inputs,
        started.elapsed(),
        t.fates[Fate::ParseError as usize],
        t.fates[Fate::Invalid as usize],
        t.fates[Fate::Valid as usize],
        t.fates[Fate::Simulated as usize],
        t.slowest
    );
    if let Err(e) = result {
        panic!("{e}");
    }
}

/// The unmutated seeds all load, validate and simulate.
#[test]
fn the_fuzz_seeds_validate() {
    for (name, tree) in seeds() {
        let fate = check_bounded(tree.document()).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_ne!(fate.0, Fate::ParseError, "{name}");
        assert_ne!(fate.0, Fate::Invalid, "{name}");
    }
}

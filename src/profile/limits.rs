//! Every bound a profile must stay within, in one place.
//!
//! [`validate`](super::validate) checks each of them, and it is the one gate that
//! `stampede validate`, `run`, `sim` and every `--sweep` combination go through: what
//! validates can be run, what would abort, hang or eat the machine does not validate.
//! Each bound is generous for real use (the doc comment says why) and far below what
//! would exhaust memory or time. The simulator's own budget (events, memory) is
//! [`crate::sim::SimBudget`]; it depends on the product of several of these figures.

use std::time::Duration;

const MINUTE: u64 = 60;
const HOUR: u64 = 60 * MINUTE;
const DAY: u64 = 24 * HOUR;

// --- The document -------------------------------------------------------------------

/// Largest profile file: 16 MiB. The shipped profiles are under 3 KiB; a per-node
/// override for each of [`MAX_NODES`] nodes is about 10 MiB.
pub const MAX_PROFILE_BYTES: usize = 16 << 20;

/// Deepest YAML nesting: 32 levels. The profile format is at most 7 deep
/// (`cluster.overrides.<id>.failures[0].rpc`); without a bound a 100,000-deep document
/// makes the YAML scanners work quadratically (one pass over every open level per token).
pub const MAX_YAML_DEPTH: usize = 32;

/// Most problems listed for one profile: 100. A generated profile with a million bad
/// entries would otherwise print a million lines; the first hundred say what is wrong.
pub const MAX_ISSUES: usize = 100;

// --- Names ----------------------------------------------------------------------------

/// Longest profile `name`: 100 characters. It names the report directory
/// (`<name>-<UTC time>`), which must stay within the 255-byte file-name limit.
pub const MAX_NAME_CHARS: usize = 100;

/// Longest `description`: 10,000 characters, a long paragraph; it is copied into every
/// report.
pub const MAX_DESCRIPTION_CHARS: usize = 10_000;

/// Longest template id, node id or other identifier sent to a service: 128 characters.
/// E2B template ids are about 20; ids are copied into every request and ledger entry.
pub const MAX_ID_CHARS: usize = 128;

/// Most entries in one list of addresses or hosts (`allow_targets`, `orchestrators`,
/// `mock_admin`): 1,000, ten times the largest fleet of orchestrators we know of.
pub const MAX_TARGETS: usize = 1_000;

// --- Cluster ----------------------------------------------------------------------------

/// Most nodes in the embedded fleet: 100,000. E2B's largest clusters are a few thousand
/// nodes; a simulation of 100,000 virtual nodes peaks at about 250 MB (measured). Beyond
/// that a typo (`100000000`) is far likelier than a real fleet.
pub const MAX_NODES: usize = 100_000;

/// Most placement replicas: 1,000. Each is a service instance (a loopback listener in a
/// run, a full placement core in a simulation); E2B runs a handful of API replicas.
pub const MAX_REPLICAS: u32 = 1_000;

/// Most `replicas x nodes`: 1,000,000. Every replica keeps a view of every node (about
/// 400 bytes each, measured, plus the sandbox ids it tracks), so this bounds that state
/// to about half a GB.
pub const MAX_NODE_VIEWS: u64 = 1_000_000;

/// Most failure rules per node model: 100. One per RPC kind and code is 25.
pub const MAX_FAILURE_RULES: usize = 100;

/// Largest `cpu_count` of a node: 100,000 vCPUs, a hundred times today's largest hosts.
pub const MAX_NODE_CPUS: u32 = 100_000;

// --- Placement ----------------------------------------------------------------------------

/// Smallest Best-of-K `r` (overcommit ratio in the score): 0.01. E2B uses 4. Far below
/// 0.01, `r * cpu_count` is so small that every score overflows to infinity and no node
/// is ever chosen (`r: 1e-310` answers 503 on an empty cluster).
pub const MIN_R: f64 = 0.01;

/// Largest Best-of-K `r`: 1,000 (250 times E2B's 4); above it every node scores alike.
pub const MAX_R: f64 = 1_000.0;

/// Largest Best-of-K `alpha` (weight of CPU usage): 1,000 (E2B: 0.5). Above it the
/// usage term drowns the allocation term entirely.
pub const MAX_ALPHA: f64 = 1_000.0;

/// Most placement attempts per create (`max_retries`): 100 (E2B: 3).
pub const MAX_RETRIES: u32 = 100;

// --- Workload -----------------------------------------------------------------------------

/// Largest burst: 100,000 creates in flight at once. Each is a goose user with an open
/// connection in a run; the shipped burst is 500.
pub const MAX_BURST: usize = 100_000;

/// Highest request rate: 100,000 creates per second, a hundred times what E2B's API
/// sees at peak and well beyond what one machine can send.
pub const MAX_RATE_PER_SECOND: f64 = 100_000.0;

/// Most requests of a rate shape (`per_second x duration`): 10,000,000. Each leaves a
/// ledger entry (about 200 bytes) and a sandbox; the simulator's scale benchmark is
/// 1,000,000.
pub const MAX_REQUESTS: u64 = 10_000_000;

/// Largest `max_in_flight`: 100,000 concurrent requests (goose users).
pub const MAX_IN_FLIGHT: usize = 100_000;

/// Most users of a goose plan at once: 100,000 (each a goose user, i.e. a task with a
/// connection).
pub const MAX_PLAN_USERS: usize = 100_000;

/// Most users a goose plan starts in all (every ramp-up counts): 1,000,000.
pub const MAX_PLAN_STARTED_USERS: u64 = 1_000_000;

/// Most steps of a goose plan: 1,000.
pub const MAX_PLAN_STEPS: usize = 1_000;

/// Largest request size in vCPUs: 1,024 (E2B sandboxes have at most a few dozen). With
/// an embedded fleet the request must also fit on at least one node.
pub const MAX_SANDBOX_VCPU: u32 = 1_024;

/// Largest request size in MiB: 16 TiB. With an embedded fleet the request must also
/// fit in at least one node's memory.
pub const MAX_SANDBOX_RAM_MB: u32 = 16 << 20;

// --- Durations and intervals ----------------------------------------------------------------

/// Longest workload (`rate.duration`, the sum of a plan's steps, a chaos step's `at` and
/// `duration`): 7 days, a long soak test.
pub const MAX_WORKLOAD_DURATION: Duration = Duration::from_secs(7 * DAY);

/// Shortest `sync_interval` and `collect.interval`: 1 ms. Each tick reads every node;
/// at 1 ns a 20 s simulation takes 3.4 GB and a run would do nothing else.
pub const MIN_INTERVAL: Duration = Duration::from_millis(1);

/// Longest `sync_interval` and `collect.interval`: 1 day (longer means never).
pub const MAX_INTERVAL: Duration = Duration::from_secs(DAY);

/// Shortest `request_timeout`: 1 ms.
pub const MIN_TIMEOUT: Duration = Duration::from_millis(1);

/// Longest `request_timeout`: 1 hour (E2B: 70 s).
pub const MAX_TIMEOUT: Duration = Duration::from_secs(HOUR);

/// Shortest sandbox `timeout`: 1 s. The API takes whole seconds; below a second the
/// sandbox is dead on arrival and a skew check sees an empty fleet.
pub const MIN_SANDBOX_TIMEOUT: Duration = Duration::from_secs(1);

/// Longest sandbox `timeout` and `lifetime`: 30 days (E2B's longest sandboxes live 24 h).
pub const MAX_SANDBOX_TIMEOUT: Duration = Duration::from_secs(30 * DAY);

/// Longest latency of a node model or a fault (`create_latency`, `delete_latency`,
/// `metrics_lag`, `slow` latency): 1 hour. A real create takes milliseconds to seconds.
pub const MAX_LATENCY: Duration = Duration::from_secs(HOUR);

/// Largest lognormal `sigma`: 10. At 10 the 99th percentile is already 10^10 times the
/// median.
pub const MAX_SIGMA: f64 = 10.0;

/// Most chaos steps: 1,000.
pub const MAX_CHAOS_STEPS: usize = 1_000;

/// Most nodes one chaos step names by id: 1,000. Resolving a list of ids is linear in
/// the fleet per id; for more nodes, `{random: N}` or `{fraction: f}` pick them.
pub const MAX_CHAOS_NODE_IDS: usize = 1_000;

/// Most timeline cells (`samples x nodes`, where samples = workload span /
/// `collect.interval`): 50,000,000. Each is one node's count in one sample: 8 bytes in
/// memory and about as much in `report.json`, so 400 MB of each.
pub const MAX_TIMELINE_CELLS: u64 = 50_000_000;

/// `[lo, hi]` as text, for messages.
pub(crate) fn span_text(lo: Duration, hi: Duration) -> String {
    format!(
        "between {} and {}",
        humantime::format_duration(lo),
        humantime::format_duration(hi)
    )
}

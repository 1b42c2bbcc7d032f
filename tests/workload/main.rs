//! The workload: the burst gate (plain and TLS) and its limits.

#[path = "../support/mod.rs"]
mod support;

mod burst_gate;
mod burst_tls;
mod lifecycle;
mod limits;

/// The burst tests check when connections and bytes reach a target against the gate's
/// instant, as the target's accept loop sees them; with the area's other tests burning
/// both cores at once, that loop can be scheduled after the gate although the connection
/// was open before it. The workload's tests therefore run one at a time, as they did when
/// each file was a binary of its own (goose's kill switch is process-wide too).
static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

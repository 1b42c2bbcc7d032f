//! Scaffolding shared by the integration tests: temp dirs and inline runs, a fleet with a
//! service on loopback, bare HTTP targets, report builders, staging doubles.

pub mod api_times;
pub mod bare_target;
pub mod flood;
pub mod inline_run;
pub mod recording_proxy;
pub mod report;
pub mod serve;
pub mod staging;

/// `<pid>-<n>`, `n` new at every call: a suffix for temp paths that no other test of
/// this binary (one process) or of another binary takes.
pub fn unique() -> String {
    use std::sync::atomic::{AtomicUsize, Ordering};
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    format!(
        "{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    )
}

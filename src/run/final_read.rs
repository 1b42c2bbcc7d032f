//! The last read of node truth: from a live source one read; from a lagging one (E2B's
//! `GET /nodes`, refreshed once per node sync) reads until this run's count matches
//! the sandboxes it kept, for at most one sync and a margin.

use std::time::{Duration, Instant};

use crate::collect::{Before, Sample, Sampler};
use crate::report::FinalRead;

/// Time between reads while waiting for a lagging source.
const POLL: Duration = Duration::from_millis(500);
/// Margin past one sync before the read gives up waiting.
const MARGIN: Duration = Duration::from_secs(1);

/// Reads the final sample. `expected` is the number of sandboxes this run kept (201s
/// not deleted); `interrupted` skips the wait.
pub(super) async fn read(
    sampler: &Sampler,
    client: &reqwest::Client,
    start: Instant,
    before: Option<&Before>,
    expected: u64,
    interrupted: bool,
) -> (Option<Sample>, FinalRead) {
    let began = Instant::now();
    let mine = |s: &Sample| -> u64 {
        let truth = match before {
            Some(b) => b.subtract(&s.truth),
            None => s.truth.clone(),
        };
        truth.nodes.iter().map(|n| n.sandboxes).sum()
    };
    let Some(lag) = sampler.source.lag() else {
        let last = sampler.sample(client, start).await;
        let settled = last.as_ref().is_some_and(|s| mine(s) == expected);
        let rule = "live source: one read".to_string();
        return (last, finish(began, settled, rule));
    };
    if interrupted {
        let last = sampler.sample(client, start).await;
        let settled = last.as_ref().is_some_and(|s| mine(s) == expected);
        let rule = "interrupted: one read, no wait for the next sync".to_string();
        return (last, finish(began, settled, rule));
    }
    let bound = lag + MARGIN;
    let rule = format!(
        "polled every {} until this run's count equalled the {expected} sandboxes it kept, at most {}",
        humantime::format_duration(POLL),
        humantime::format_duration(bound)
    );
    let mut last = None;
    loop {
        if let Some(s) = sampler.sample(client, start).await {
            let done = mine(&s) == expected;
            last = Some(s);
            if done {
                return (last, finish(began, true, rule));
            }
        }
        if began.elapsed() >= bound {
            return (last, finish(began, false, rule));
        }
        tokio::time::sleep(POLL).await;
    }
}

fn finish(began: Instant, settled: bool, rule: String) -> FinalRead {
    FinalRead {
        waited_ms: began.elapsed().as_secs_f64() * 1000.0,
        settled,
        rule,
    }
}

//! The live progress line of `stampede run`, on stderr: creates done, CV of the
//! placements so far, errors, ResourceExhausted retries per second, faults in force.
//! On a terminal it is redrawn in place a few times a second (and cleared at the end);
//! otherwise one line is printed every [`LINE_EVERY`] and once when the workload ends.

use std::io::{IsTerminal, Write};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use tokio_util::sync::CancellationToken;

use crate::serve::TelemetryReader;
use crate::workload::OutcomeSnapshot;
use crate::workload::{LiveCounts, Tail};

/// Redraw period on a terminal.
const REDRAW_EVERY: Duration = Duration::from_millis(250);

/// Period of the progress lines when stderr is not a terminal.
pub(crate) const LINE_EVERY: Duration = Duration::from_secs(5);

/// What the progress line reads.
pub(crate) struct ProgressFeed {
    /// Run label (accounting mode, or `external`).
    pub label: String,
    /// Its place among the profile's runs (`(1, 2)`), when it has several.
    pub position: Option<(usize, usize)>,
    /// Creates the workload will send, when known.
    pub total: Option<u64>,
    /// The workload's counts so far (over the run's nodes, in node order).
    pub live: Arc<LiveCounts>,
    /// The embedded replicas' counters (none against an external API).
    pub services: Vec<TelemetryReader>,
    /// Planned fault windows `(from, until)` after the gate; `until` none = to the end.
    pub faults: Vec<(Duration, Option<Duration>)>,
    /// When the workload's gate opened (elapsed time and fault windows run from it).
    pub gate: Arc<OnceLock<Instant>>,
}

/// A running progress line; [`finish`](Self::finish) stops it.
pub(crate) struct Progress {
    stop: CancellationToken,
    task: tokio::task::JoinHandle<()>,
}

impl Progress {
    /// Starts the line on stderr.
    pub(crate) fn start(feed: Arc<ProgressFeed>) -> Self {
        let stop = CancellationToken::new();
        let tty = std::io::stderr().is_terminal();
        let every = if tty { REDRAW_EVERY } else { LINE_EVERY };
        let until = stop.clone();
        let task = tokio::spawn(async move {
            let mut last = (Instant::now(), refusals(&feed.services));
            let mut tick = tokio::time::interval(every);
            tick.tick().await;
            loop {
                let ended = tokio::select! {
                    _ = tick.tick() => false,
                    _ = until.cancelled() => true,
                };
                let now = Instant::now();
                let r = refusals(&feed.services);
                let dt = now.saturating_duration_since(last.0).as_secs_f64();
                let per_s = (dt > 0.0).then(|| r.saturating_sub(last.1) as f64 / dt);
                last = (now, r);
                let line = feed.line(now, per_s);
                let mut err = std::io::stderr().lock();
                // A terminal's line is redrawn in place; its last state stays as the
                // run's one-line result, as a log's last line does.
                let _ = match (tty, ended) {
                    (true, false) => write!(err, "\r\x1b[2K{line}"),
                    (true, true) => writeln!(err, "\r\x1b[2K{line}"),
                    (false, _) => writeln!(err, "{line}"),
                };
                let _ = err.flush();
                if ended {
                    break;
                }
            }
        });
        Self { stop, task }
    }

    /// Stops the line; its last state stays on the screen (or in the log).
    pub(crate) async fn finish(self) {
        self.stop.cancel();
        let _ = self.task.await;
    }
}

fn refusals(services: &[TelemetryReader]) -> u64 {
    services.iter().map(TelemetryReader::refusals).sum()
}

impl ProgressFeed {
    /// The line at `now`; `retries_per_s` is the rate over the last period.
    fn line(&self, now: Instant, retries_per_s: Option<f64>) -> String {
        let since_gate = self.gate.get().map(|g| now.saturating_duration_since(*g));
        let s = self.live.snapshot();
        let faults = since_gate.map_or(0, |t| faults_in_force(&self.faults, t));
        let label = match self.position {
            Some((i, n)) => format!("{} [{i}/{n}]", self.label),
            None => self.label.clone(),
        };
        let line = format_line(
            &label,
            since_gate.unwrap_or_default(),
            self.total,
            &s,
            (!self.services.is_empty()).then_some(retries_per_s.unwrap_or(0.0)),
            faults,
        );
        match self.total {
            Some(t) if s.done >= t => line + &tail_text(self.live.tail(), now),
            _ => line,
        }
    }
}

/// Once every create is answered, what the run still waits for: ` waiting for 412
/// sandbox lifetimes to end (deletes), ETA 14s`.
fn tail_text(t: Tail, now: Instant) -> String {
    if t.pending == 0 {
        return String::new();
    }
    let eta = t.last_due.map_or_else(String::new, |due| {
        format!(
            ", ETA {:.0}s",
            due.saturating_duration_since(now).as_secs_f64()
        )
    });
    format!(
        " waiting for {} sandbox lifetimes to end (deletes){eta}",
        t.pending
    )
}

/// Planned windows holding `t` after the gate.
pub(crate) fn faults_in_force(windows: &[(Duration, Option<Duration>)], t: Duration) -> usize {
    windows
        .iter()
        .filter(|(from, until)| t >= *from && until.is_none_or(|u| t < u))
        .count()
}

/// `optimistic 12.3s creates 480/500 ok 470 errors 10 CV 0.041 retries/s 1520 faults 1
/// ETA 1s` (the ETA from the pace so far, while creates remain).
fn format_line(
    label: &str,
    elapsed: Duration,
    total: Option<u64>,
    s: &OutcomeSnapshot,
    retries_per_s: Option<f64>,
    faults: usize,
) -> String {
    let done = match total {
        Some(t) => format!("{}/{t}", s.done),
        None => s.done.to_string(),
    };
    let cv = s
        .placements_cv()
        .map_or_else(|| "-".to_string(), |cv| format!("{cv:.3}"));
    let retries = retries_per_s.map_or_else(|| "-".to_string(), |r| format!("{r:.0}"));
    let eta = match total {
        Some(t) if s.done > 0 && s.done < t => {
            let left = elapsed.as_secs_f64() * (t - s.done) as f64 / s.done as f64;
            format!(" ETA {left:.0}s")
        }
        _ => String::new(),
    };
    format!(
        "{label} {:.1}s creates {done} ok {} errors {} CV {cv} retries/s {retries} faults {faults}{eta}",
        elapsed.as_secs_f64(),
        s.created,
        s.errors,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_line_names_every_figure() {
        let s = OutcomeSnapshot {
            done: 480,
            created: 470,
            errors: 10,
            placed: vec![100, 100, 270],
        };
        let line = format_line(
            "optimistic",
            Duration::from_millis(12_340),
            Some(500),
            &s,
            Some(1520.4),
            1,
        );
        assert_eq!(
            line,
            "optimistic 12.3s creates 480/500 ok 470 errors 10 CV 0.512 retries/s 1520 faults 1 ETA 1s"
        );
        let none = format_line(
            "external",
            Duration::ZERO,
            None,
            &OutcomeSnapshot::default(),
            None,
            0,
        );
        assert!(none.contains("CV - retries/s -"), "{none}");
    }

    #[test]
    fn the_tail_says_what_it_waits_for_and_when_it_ends() {
        let now = Instant::now();
        assert_eq!(tail_text(Tail::default(), now), "");
        let t = Tail {
            pending: 412,
            last_due: Some(now + Duration::from_millis(14_200)),
        };
        assert_eq!(
            tail_text(t, now),
            " waiting for 412 sandbox lifetimes to end (deletes), ETA 14s"
        );
    }

    #[test]
    fn fault_windows_count_while_they_hold() {
        let w = [
            (Duration::from_secs(1), Some(Duration::from_secs(3))),
            (Duration::from_secs(2), None),
        ];
        let at = |s| faults_in_force(&w, Duration::from_secs(s));
        assert_eq!((at(0), at(1), at(2), at(3), at(60)), (0, 1, 2, 1, 1));
    }
}

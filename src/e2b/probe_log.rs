//! The timing probe's log (`probe.log`, one `UNIX_NS EVENT key=value ...` line per
//! event, written by stampede's probe inside E2B's API) summed up per run: how long a
//! decision took from reading its scores to making its choice visible (the commit lag),
//! how long a create stayed in progress after that (to its Create's return), the
//! commits that went to a node no longer the best of the scores they read (the waves),
//! and each sync that landed during the workload with what it did to the node's figure.

use std::collections::{BTreeMap, HashMap};

use serde::Serialize;

/// A distribution in milliseconds.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct MsSpread {
    /// Samples.
    pub n: usize,
    /// 5th percentile.
    pub p5: f64,
    /// Median.
    pub p50: f64,
    /// 95th percentile.
    pub p95: f64,
    /// Largest.
    pub max: f64,
}

impl MsSpread {
    /// The spread of `ms` (any order; non-finite values dropped).
    pub fn of(mut ms: Vec<f64>) -> Self {
        ms.retain(|v| v.is_finite());
        ms.sort_by(f64::total_cmp);
        let Some(&max) = ms.last() else {
            return MsSpread::default();
        };
        let q = |p: f64| ms[((ms.len() - 1) as f64 * p).round() as usize];
        MsSpread {
            n: ms.len(),
            p5: q(0.05),
            p50: q(0.5),
            p95: q(0.95),
            max,
        }
    }
}

/// Commits to one node that it no longer deserved by the time they landed.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Wave {
    /// The node.
    pub node: String,
    /// Commits whose candidates, re-scored just before the commit, had another best.
    pub stale_commits: usize,
    /// Their commit lags.
    pub lag_ms: MsSpread,
}

/// A sync applied while the workload ran.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SyncLanded {
    /// The node.
    pub node: String,
    /// When it was applied, ms from the first decision's read.
    pub at_ms: f64,
    /// The API's allocated vCPU figure before.
    pub before: u32,
    /// The figure the sync gave.
    pub after: u32,
}

/// One run's probe, summed up.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct ProbeSummary {
    /// Lines read.
    pub lines: usize,
    /// Events the probe could not record (its ring was full).
    pub dropped: u64,
    /// Unix time (ns) of the first decision's score read: when the first create
    /// reached the placement.
    pub first_read_unix_ns: Option<i64>,
    /// From reading the K scores (the last of them) to the in-progress mark
    /// (`StartPlacing`).
    pub commit_lag_ms: MsSpread,
    /// From the decision starting to read its K scores to the mark: the age of the
    /// oldest figure the choice rested on (each score's `Items()` snapshot may wait).
    /// Empty for a log written before the probe recorded the start.
    pub view_age_ms: MsSpread,
    /// Per decision, the mean over its candidates of each score's age at the mark: the
    /// single lag that leaves each figure as many of the others' marks unseen, on
    /// average, as its own read did (the twin's `commit_lag` reads its K at one time).
    /// Empty for a log whose scores carry no time.
    pub figure_age_ms: MsSpread,
    /// From the in-progress mark to the Create's return to the API (successes).
    pub in_progress_ms: MsSpread,
    /// Commits counted.
    pub commits: usize,
    /// Commits whose node was no longer the best of their candidates just before.
    pub stale_commits: usize,
    /// The stale commits per node, most first.
    pub waves: Vec<Wave>,
    /// ServiceInfo round trips seen by the API's syncs, ms.
    pub sync_round_trip_ms: MsSpread,
    /// Syncs applied between the first read and the last Create's return that changed
    /// the node's figure.
    pub syncs_in_workload: Vec<SyncLanded>,
    /// Optimistic adds and removes.
    pub optimistic_adds: usize,
    /// As above.
    pub optimistic_removes: usize,
}

/// Fields of one line: `(unix_ns, event, key=value map)`.
fn fields(line: &str) -> Option<(i64, &str, HashMap<&str, &str>)> {
    let mut words = line.split(' ');
    let t = words.next()?.parse().ok()?;
    let event = words.next()?;
    let kv = words.filter_map(|w| w.split_once('=')).collect();
    Some((t, event, kv))
}

/// What a decision's `read` line said about its timing.
struct Read {
    /// When its scores were all read.
    at: i64,
    /// When it began reading them (absent in older logs).
    begin: Option<i64>,
    /// When each candidate's score was computed (empty in older logs).
    scored: Vec<i64>,
}

/// The times in a `cands` field (`node:score:reported:pending:unix_ns`, comma-separated);
/// empty when any candidate carries none.
fn score_times(cands: &str) -> Vec<i64> {
    let times: Option<Vec<i64>> = cands
        .split(',')
        .filter(|c| !c.is_empty())
        .map(|c| c.split(':').nth(4).and_then(|t| t.parse().ok()))
        .collect();
    times.unwrap_or_default()
}

/// Sums up a probe log.
pub fn summarise(text: &str) -> ProbeSummary {
    let mut s = ProbeSummary::default();
    let mut reads: HashMap<(String, String), Read> = HashMap::new();
    let mut commits: HashMap<(String, String), i64> = HashMap::new();
    let mut lags = Vec::new();
    let mut ages = Vec::new();
    let mut figure_ages = Vec::new();
    let mut in_progress = Vec::new();
    let mut stale: BTreeMap<String, Vec<f64>> = BTreeMap::new();
    let mut round_trips = Vec::new();
    let mut syncs = Vec::new();
    let mut last_return = None::<i64>;
    for line in text.lines() {
        s.lines += 1;
        let Some((t, event, kv)) = fields(line) else {
            continue;
        };
        let get = |k: &str| kv.get(k).copied().unwrap_or_default();
        let key = || (get("sbx").to_string(), get("try").to_string());
        match event {
            "read" => {
                s.first_read_unix_ns.get_or_insert(t);
                reads.insert(
                    key(),
                    Read {
                        at: t,
                        begin: get("begin").parse().ok(),
                        scored: score_times(get("cands")),
                    },
                );
            }
            "commit" => {
                s.commits += 1;
                commits.insert(key(), t);
                let read = reads.get(&key());
                let lag = read.map(|r| (t - r.at) as f64 / 1e6);
                if let Some(lag) = lag {
                    lags.push(lag);
                }
                if let Some(begin) = read.and_then(|r| r.begin) {
                    ages.push((t - begin) as f64 / 1e6);
                }
                if let Some(r) = read.filter(|r| !r.scored.is_empty()) {
                    let sum: f64 = r.scored.iter().map(|&a| (t - a) as f64 / 1e6).sum();
                    figure_ages.push(sum / r.scored.len() as f64);
                }
                let best = get("best_now");
                if !best.is_empty() && best != get("node") {
                    s.stale_commits += 1;
                    stale
                        .entry(get("node").to_string())
                        .or_default()
                        .push(lag.unwrap_or(f64::NAN));
                }
            }
            "returned" if get("ok") == "true" => {
                if let Some(c) = commits.get(&key()) {
                    in_progress.push((t - c) as f64 / 1e6);
                }
                last_return = Some(t);
            }
            "sync_reply" => {
                if let Ok(sent) = get("sent").parse::<i64>() {
                    round_trips.push((t - sent) as f64 / 1e6);
                }
            }
            "sync" => {
                let (Ok(before), Ok(after)) = (get("before").parse(), get("after").parse()) else {
                    continue;
                };
                syncs.push((t, get("node").to_string(), before, after));
            }
            "optimistic" => match get("op") {
                "add" => s.optimistic_adds += 1,
                "remove" => s.optimistic_removes += 1,
                _ => {}
            },
            "dropped" => s.dropped = get("n").parse().unwrap_or(s.dropped),
            _ => {}
        }
    }
    s.commit_lag_ms = MsSpread::of(lags);
    s.view_age_ms = MsSpread::of(ages);
    s.figure_age_ms = MsSpread::of(figure_ages);
    s.in_progress_ms = MsSpread::of(in_progress);
    s.sync_round_trip_ms = MsSpread::of(round_trips);
    let mut waves: Vec<Wave> = stale
        .into_iter()
        .map(|(node, lags)| Wave {
            node,
            stale_commits: lags.len(),
            lag_ms: MsSpread::of(lags),
        })
        .collect();
    waves.sort_by(|a, b| {
        b.stale_commits
            .cmp(&a.stale_commits)
            .then(a.node.cmp(&b.node))
    });
    s.waves = waves;
    if let (Some(first), Some(last)) = (s.first_read_unix_ns, last_return) {
        s.syncs_in_workload = syncs
            .into_iter()
            .filter(|&(t, _, before, after)| (first..=last).contains(&t) && before != after)
            .map(|(t, node, before, after)| SyncLanded {
                node,
                at_ms: (t - first) as f64 / 1e6,
                before,
                after,
            })
            .collect();
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    const LOG: &str = "\
1000000000 start pid=1
1000000000 sync node=n1 before=0 after=4
1001000000 read sbx=a try=1 node=n1 cands=n1:0.1:4:0,n2:0.2:5:0
1001500000 read sbx=b try=1 node=n1 begin=1000500000 cands=n1:0.1:4:0:1000600000,n3:0.3:6:0:1001400000
1003000000 commit sbx=a try=1 node=n1 best_now=n1
1043000000 commit sbx=b try=1 node=n1 best_now=n3
1010000000 returned sbx=a try=1 node=n1 ok=true
1050000000 sync_reply node=n2 sent=1044000000
1050000001 sync node=n2 before=5 after=7
1050000002 sync node=n3 before=6 after=6
1060000000 optimistic node=n1 op=add cpus=1 after=5
1083000000 returned sbx=b try=1 node=n1 ok=true
garbage
";

    #[test]
    fn lags_in_progress_waves_and_syncs_are_read() {
        let s = summarise(LOG);
        assert_eq!(s.lines, 13);
        assert_eq!(s.first_read_unix_ns, Some(1_001_000_000));
        assert_eq!(s.commits, 2);
        assert_eq!(s.commit_lag_ms.n, 2);
        assert!(
            (s.commit_lag_ms.max - 41.5).abs() < 1e-9,
            "{:?}",
            s.commit_lag_ms
        );
        // Only b's read says when it began (a's line is the older format).
        assert_eq!(s.view_age_ms.n, 1);
        assert!(
            (s.view_age_ms.max - 42.5).abs() < 1e-9,
            "{:?}",
            s.view_age_ms
        );
        // b's two scores were 42.4 and 41.6 ms old at its mark.
        assert_eq!(s.figure_age_ms.n, 1);
        assert!(
            (s.figure_age_ms.max - 42.0).abs() < 1e-9,
            "{:?}",
            s.figure_age_ms
        );
        assert_eq!(s.in_progress_ms.n, 2);
        assert!((s.in_progress_ms.max - 40.0).abs() < 1e-9);
        assert_eq!(s.stale_commits, 1);
        assert_eq!(s.waves.len(), 1);
        assert_eq!(s.waves[0].node, "n1");
        assert!((s.sync_round_trip_ms.p50 - 6.0).abs() < 1e-9);
        // The sync before the first read and the one that changed nothing are left out.
        assert_eq!(s.syncs_in_workload.len(), 1);
        assert_eq!(s.syncs_in_workload[0].node, "n2");
        assert_eq!(
            (s.syncs_in_workload[0].before, s.syncs_in_workload[0].after),
            (5, 7)
        );
        assert_eq!(s.optimistic_adds, 1);
    }

    #[test]
    fn an_empty_log_gives_empty_figures() {
        let s = summarise("");
        assert_eq!(s, ProbeSummary::default());
    }
}

//! The client-side ledger: every request the workload made and what came of it, or,
//! for a run that reads no entry after it ([`Ledger::bounded`]), the creates not yet
//! settled and a fold of the settled ones; or, for a run that audits sets
//! ([`Ledger::audited`]), that fold plus the entries the set audit must read in full and
//! a digest of each create it settled.

use std::collections::{BTreeMap, HashMap};

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

use super::lifecycle::StepEntry;
use crate::aggregate::{RequestRecord, RunShape, SettledCreates, SettledIds};
use crate::report::{ResumeCall, ResumeFigures};

/// What the client saw for one create.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind", content = "detail")]
pub enum Outcome {
    /// An HTTP status came back (201 on success).
    Status(u16),
    /// No answer before the client's deadline: the sandbox may or may not exist.
    Timeout,
    /// Connection refused/reset or another transport failure.
    TransportError(String),
    /// The run was stopped (a signal) while this create was in flight and it did not
    /// answer within the grace: the sandbox may or may not exist.
    Cancelled,
    /// A 429: the team's concurrent-sandbox limit or a rate limit. Not a placement
    /// failure: no sandbox was made.
    Limited(Limit),
}

/// Which limit a 429 reports, told apart the way E2B answers them: its rate limiter
/// sets `Retry-After` ("Rate limit exceeded"); the team's concurrency reservation has
/// no `Retry-After` and a message about the maximum number of concurrent sandboxes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LimitKind {
    /// The team's concurrent-sandbox limit.
    TeamConcurrency,
    /// A request-rate limit.
    Rate,
    /// A 429 that says neither.
    Unclassified,
}

/// One 429 answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Limit {
    /// Which limit.
    pub kind: LimitKind,
    /// `Retry-After` in milliseconds, when sent.
    pub retry_after_ms: Option<u64>,
}

impl LimitKind {
    /// Classifies a 429 from its `Retry-After` header and body message.
    pub fn classify(retry_after: bool, message: &str) -> LimitKind {
        let m = message.to_ascii_lowercase();
        if m.contains("concurrent") {
            LimitKind::TeamConcurrency
        } else if retry_after || m.contains("rate limit") {
            LimitKind::Rate
        } else {
            LimitKind::Unclassified
        }
    }
}

impl From<crate::placement::CreateStatus> for Outcome {
    /// The answer a placement service gives as the client sees it.
    fn from(s: crate::placement::CreateStatus) -> Self {
        Outcome::Status(s.code())
    }
}

impl Outcome {
    /// Key used in status breakdowns (`"201"`, `"503"`, `"timeout"`, `"transport_error"`,
    /// `"cancelled"`, `"429_team_limit"`, `"429_rate_limit"`, `"429"`).
    pub fn key(&self) -> String {
        match self {
            Outcome::Status(s) => s.to_string(),
            Outcome::Timeout => "timeout".into(),
            Outcome::TransportError(_) => "transport_error".into(),
            Outcome::Cancelled => "cancelled".into(),
            Outcome::Limited(l) => match l.kind {
                LimitKind::TeamConcurrency => "429_team_limit".into(),
                LimitKind::Rate => "429_rate_limit".into(),
                LimitKind::Unclassified => "429".into(),
            },
        }
    }

    /// Whether the create succeeded (201).
    pub fn is_created(&self) -> bool {
        matches!(self, Outcome::Status(201))
    }

    /// Whether the client cannot know if a sandbox was made (timeout, 5xx, transport,
    /// cancelled).
    pub fn is_uncertain(&self) -> bool {
        match self {
            Outcome::Status(s) => *s >= 500,
            Outcome::Timeout | Outcome::TransportError(_) | Outcome::Cancelled => true,
            Outcome::Limited(_) => false,
        }
    }

    /// Whether this is a 429 (a limit, not a placement failure).
    pub fn is_limited(&self) -> bool {
        matches!(self, Outcome::Limited(_))
    }
}

/// One create request.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LedgerEntry {
    /// Slot index (request number).
    pub index: usize,
    /// Placement replica the request went to.
    pub target: usize,
    /// When it was meant to leave, ms after the workload's start gate.
    pub intended_ms: f64,
    /// When it actually left, ms after the gate.
    pub sent_ms: f64,
    /// Latency from the intended send time (so queueing cannot hide), in microseconds.
    pub latency_us: u64,
    /// What came back.
    pub outcome: Outcome,
    /// The sandbox id on success.
    pub sandbox_id: Option<String>,
    /// Node the service reported placing it on, when it says (`X-Stampede-Node`).
    pub node: Option<String>,
    /// Set when the workload deleted the sandbox: the DELETE's outcome.
    pub deleted: Option<Outcome>,
}

/// Every request of a run, plus an HDR histogram of create latency.
///
/// A bounded ledger ([`Ledger::bounded`]) keeps `entries` empty: it holds a create's
/// entry only until the create is settled (answered, and its lifetime's delete answered
/// when it has one), then folds it into [`SettledCreates`]. Its memory then grows with
/// the sandboxes alive at once, not with the run's length.
///
/// An audited ledger ([`Ledger::audited`]) folds the same way, and keeps in `entries`
/// only what the set audit reads in full: every 201 not settled by a delete that may
/// have landed (a DELETE answered 404 included), every uncertain create and every
/// answer that names an id without a 201, plus a second 201 of an id already settled.
/// A create it settles costs a 16-byte digest in its [`SettledIds`].
#[derive(Debug)]
pub struct Ledger {
    /// Entries in slot order (none in a bounded ledger; those the set audit reads in
    /// full in an audited one).
    pub entries: Vec<LedgerEntry>,
    /// Lifecycle calls (pause, resume, connect) in slot order, then call order.
    pub steps: Vec<StepEntry>,
    /// Create latency in microseconds, measured from the intended send time.
    pub latency_us: Histogram<u64>,
    /// Slot -> position in `entries`, until [`finish`](Self::finish) sorts them.
    positions: HashMap<usize, usize>,
    /// A bounded ledger's unsettled creates and settled fold.
    settling: Option<Settling>,
}

/// What a bounded ledger holds.
#[derive(Debug)]
struct Settling {
    /// 201s whose delete is still to come, by slot. A B-tree: its memory follows the
    /// creates alive (a hash map's capacity settles at twice their peak, in steps).
    pending: BTreeMap<usize, LedgerEntry>,
    /// Whether each 201 gets a delete (the workload gives sandboxes a lifetime).
    deletes: bool,
    fold: SettledCreates,
    /// An audited ledger's digests and request records.
    audit: Option<AuditKeep>,
}

/// What an audited ledger keeps beyond a bounded one's.
#[derive(Debug)]
struct AuditKeep {
    /// Digests of the creates settled by a delete that may have landed.
    settled: SettledIds,
    /// Every create's record for the fault windows, when they are measured.
    requests: Option<Vec<CompactRequest>>,
    /// Node names the records point into.
    nodes: Vec<String>,
    /// Whether some answer named its node.
    names_nodes: bool,
}

/// One create as the fault windows read it, in 24 bytes.
#[derive(Debug, Clone, Copy)]
struct CompactRequest {
    sent_ms: f64,
    done_ms: f64,
    /// Latency from the intended send, microseconds (saturated at about 71 minutes).
    latency_us: u32,
    /// Index into [`AuditKeep::nodes`], or `u16::MAX` when the answer named none.
    node: u16,
    created: bool,
    timed_out: bool,
}

impl AuditKeep {
    fn note_request(&mut self, e: &LedgerEntry) {
        self.names_nodes |= e.node.is_some();
        let Some(requests) = &mut self.requests else {
            return;
        };
        let node = match e.node.as_deref() {
            Some(n) => match self.nodes.iter().position(|k| k == n) {
                Some(i) => i,
                None => {
                    self.nodes.push(n.to_string());
                    self.nodes.len() - 1
                }
            },
            None => usize::from(u16::MAX),
        };
        requests.push(CompactRequest {
            sent_ms: e.sent_ms,
            done_ms: e.intended_ms + e.latency_us as f64 / 1000.0,
            latency_us: u32::try_from(e.latency_us).unwrap_or(u32::MAX),
            node: u16::try_from(node).unwrap_or(u16::MAX),
            created: e.outcome.is_created(),
            timed_out: e.outcome == Outcome::Status(504),
        });
    }
}

/// Whether a settled 201 may have been deleted by the client (any DELETE answer but a
/// 404, which says the sandbox was already gone): the set audit then never calls it lost.
pub fn client_deleted(e: &LedgerEntry) -> bool {
    !matches!(e.deleted, None | Some(Outcome::Status(404)))
}

/// Whether the set audit must read `e` in full once it is settled.
fn audit_reads(e: &LedgerEntry) -> bool {
    if e.outcome.is_created() {
        e.sandbox_id.is_some() && !client_deleted(e)
    } else {
        e.outcome.is_uncertain() || e.sandbox_id.is_some()
    }
}

impl Default for Ledger {
    fn default() -> Self {
        Self::new()
    }
}

impl Ledger {
    /// An empty ledger (histogram from 1 us to 1 hour, 3 significant digits).
    pub fn new() -> Self {
        Ledger {
            entries: Vec::new(),
            steps: Vec::new(),
            latency_us: Histogram::new_with_bounds(1, 3_600_000_000, 3)
                .expect("static histogram bounds are valid"),
            positions: HashMap::new(),
            settling: None,
        }
    }

    /// A ledger that folds each create once it is settled ([`SettledCreates`]) instead of
    /// keeping its entry, for a run of `shape` whose 201s each get a delete when
    /// `deletes` (a lifetime and no lifecycle). Lifecycle steps are not recorded.
    pub fn bounded(shape: RunShape, deletes: bool) -> Self {
        Ledger {
            settling: Some(Settling {
                pending: BTreeMap::new(),
                deletes,
                fold: SettledCreates::new(shape),
                audit: None,
            }),
            ..Ledger::new()
        }
    }

    /// A bounded ledger that also keeps what the set audit needs (see [`Ledger`]):
    /// settled creates go into `settled` as digests; with `windows`, every create's
    /// record for the fault windows is kept too (24 bytes each).
    pub fn audited(shape: RunShape, deletes: bool, settled: SettledIds, windows: bool) -> Self {
        let mut l = Self::bounded(shape, deletes);
        if let Some(s) = &mut l.settling {
            s.audit = Some(AuditKeep {
                settled,
                requests: windows.then(Vec::new),
                nodes: Vec::new(),
                names_nodes: false,
            });
        }
        l
    }

    /// The digests of the creates an audited ledger settled.
    pub fn settled_ids(&self) -> Option<&SettledIds> {
        self.settling.as_ref()?.audit.as_ref().map(|a| &a.settled)
    }

    /// Whether some create's answer named its node.
    pub fn names_nodes(&self) -> bool {
        let audited = self.settling.as_ref().and_then(|s| s.audit.as_ref());
        audited.is_some_and(|a| a.names_nodes) || self.entries.iter().any(|e| e.node.is_some())
    }

    /// Every create as the fault windows read it: from the entries, or an audited
    /// ledger's records (none when it keeps none).
    pub fn requests(&self) -> Vec<RequestRecord<'_>> {
        let audited = self.settling.as_ref().and_then(|s| s.audit.as_ref());
        let Some((a, requests)) = audited.and_then(|a| Some(a).zip(a.requests.as_ref())) else {
            return self.entries.iter().map(request_record).collect();
        };
        requests
            .iter()
            .map(|r| RequestRecord {
                sent_ms: r.sent_ms,
                done_ms: r.done_ms,
                latency_ms: f64::from(r.latency_us) / 1000.0,
                created: r.created,
                timed_out: r.timed_out,
                node: a.nodes.get(usize::from(r.node)).map(String::as_str),
            })
            .collect()
    }

    /// The settled creates of a bounded ledger (all of them once finished).
    pub fn settled(&self) -> Option<&SettledCreates> {
        self.settling.as_ref().map(|s| &s.fold)
    }

    /// Takes the settled creates of a finished bounded ledger.
    pub fn take_settled(&mut self) -> Option<SettledCreates> {
        self.settling.take().map(|s| s.fold)
    }

    /// Adds one create outcome.
    pub fn record(&mut self, entry: LedgerEntry) {
        self.latency_us.saturating_record(entry.latency_us.max(1));
        if let Some(a) = self.settling.as_mut().and_then(|s| s.audit.as_mut()) {
            a.note_request(&entry);
        }
        match &mut self.settling {
            Some(s) if s.deletes && entry.outcome.is_created() && entry.sandbox_id.is_some() => {
                s.pending.insert(entry.index, entry);
            }
            Some(s) => {
                if s.audit.is_some() && audit_reads(&entry) {
                    self.entries.push(entry.clone());
                }
                s.fold.settle(entry)
            }
            None => {
                self.positions.insert(entry.index, self.entries.len());
                self.entries.push(entry);
            }
        }
    }

    /// Marks the sandbox of slot `index` as deleted with `outcome`.
    pub fn record_delete(&mut self, index: usize, outcome: Outcome) {
        if let Some(s) = &mut self.settling {
            if let Some(mut e) = s.pending.remove(&index) {
                e.deleted = Some(outcome);
                if let Some(a) = &s.audit {
                    // A second 201 of a settled id stays whole: the audit names it.
                    let digested = match (&e.sandbox_id, audit_reads(&e)) {
                        (Some(id), false) => a.settled.insert(id),
                        _ => false,
                    };
                    if !digested {
                        self.entries.push(e.clone());
                    }
                }
                s.fold.settle(e);
            }
            return;
        }
        let at = self.positions.get(&index).copied();
        if let Some(e) = at.and_then(|k| self.entries.get_mut(k)) {
            e.deleted = Some(outcome);
        }
    }

    /// Adds one lifecycle call's outcome (a bounded ledger records none).
    pub fn record_step(&mut self, step: StepEntry) {
        if self.settling.is_none() {
            self.steps.push(step);
        }
    }

    /// Sorts entries by slot so the ledger reads the same whatever the arrival order
    /// (a sandbox's own steps keep their order: the sort is stable).
    pub fn finish(&mut self) {
        if let Some(s) = &mut self.settling {
            // Deletes that never came (a cancelled run): settled as not deleted.
            for e in std::mem::take(&mut s.pending).into_values() {
                if s.audit.is_some() {
                    self.entries.push(e.clone());
                }
                s.fold.settle(e);
            }
        }
        self.positions = HashMap::new();
        self.entries.sort_by_key(|e| e.index);
        self.steps.sort_by_key(|e| e.index);
    }

    /// Successful placements per node, by kind: `"create"` (a 201 create) and
    /// `"resume"` (a 201 resume or connect of a paused sandbox). Only placements whose
    /// node the service reported are counted.
    pub fn placements_by_kind(&self) -> BTreeMap<&'static str, BTreeMap<String, u64>> {
        let mut m: BTreeMap<&'static str, BTreeMap<String, u64>> = BTreeMap::new();
        let creates = self.entries.iter().filter(|e| e.outcome.is_created());
        for node in creates.filter_map(|e| e.node.clone()) {
            *m.entry("create").or_default().entry(node).or_insert(0) += 1;
        }
        let resumes = self
            .steps
            .iter()
            .filter(|s| s.kind.places() && s.succeeded());
        for node in resumes.filter_map(|s| s.node.clone()) {
            *m.entry("resume").or_default().entry(node).or_insert(0) += 1;
        }
        m
    }

    /// What the resumes (and connects) did; `None` without any. A resume's origin is
    /// the node its sandbox last landed on (its create's, or its previous resume's).
    pub fn resume_figures(&self) -> Option<ResumeFigures> {
        let mut origin: BTreeMap<usize, Option<&str>> = self
            .entries
            .iter()
            .map(|e| (e.index, e.node.as_deref()))
            .collect();
        let calls = self.steps.iter().filter(|s| s.kind.places()).map(|s| {
            let placed = s.succeeded();
            let from = origin.get(&s.index).copied().flatten();
            let moved = placed && from.is_some() && from != s.node.as_deref();
            if placed {
                origin.insert(s.index, s.node.as_deref());
            }
            ResumeCall {
                latency_us: s.latency_us,
                placed,
                moved,
            }
        });
        ResumeFigures::from_calls(calls.collect::<Vec<_>>())
    }

    /// Count of outcomes by [`Outcome::key`].
    pub fn statuses(&self) -> BTreeMap<String, u64> {
        let mut m = BTreeMap::new();
        for e in &self.entries {
            *m.entry(e.outcome.key()).or_insert(0) += 1;
        }
        m
    }

    /// Creates with outcome `pred`.
    pub fn count(&self, pred: impl Fn(&Outcome) -> bool) -> usize {
        self.entries.iter().filter(|e| pred(&e.outcome)).count()
    }

    /// Ids of sandboxes this run was told it created (201) and did not delete.
    pub fn live_ids(&self) -> Vec<String> {
        self.entries
            .iter()
            .filter(|e| e.outcome.is_created())
            .filter(|e| !matches!(e.deleted, Some(Outcome::Status(s)) if (200..300).contains(&s) || s == 404))
            .filter_map(|e| e.sandbox_id.clone())
            .collect()
    }

    /// Creates that got a 201.
    pub fn created(&self) -> usize {
        self.entries
            .iter()
            .filter(|e| e.outcome.is_created())
            .count()
    }

    /// Time between the first and the last send, ms (the burst's spread).
    pub fn send_spread_ms(&self) -> Option<f64> {
        let sent = self.entries.iter().map(|e| e.sent_ms);
        let (lo, hi) = sent.fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), t| {
            (lo.min(t), hi.max(t))
        });
        (lo.is_finite() && hi.is_finite()).then_some(hi - lo)
    }

    /// How late sends were against their intended time: (p50, p99, max) in ms.
    pub fn lateness_ms(&self) -> Option<(f64, f64, f64)> {
        let mut late: Vec<f64> = self
            .entries
            .iter()
            .map(|e| (e.sent_ms - e.intended_ms).max(0.0))
            .collect();
        if late.is_empty() {
            return None;
        }
        late.sort_by(f64::total_cmp);
        let at = |q: f64| late[((late.len() - 1) as f64 * q).round() as usize];
        Some((at(0.5), at(0.99), at(1.0)))
    }
}

/// `e` as the fault windows read it.
fn request_record(e: &LedgerEntry) -> RequestRecord<'_> {
    let latency_ms = e.latency_us as f64 / 1000.0;
    RequestRecord {
        sent_ms: e.sent_ms,
        // When the client got its answer.
        done_ms: e.intended_ms + latency_ms,
        latency_ms,
        created: e.outcome.is_created(),
        timed_out: e.outcome == Outcome::Status(504),
        node: e.node.as_deref(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(index: usize, sent_ms: f64, outcome: Outcome) -> LedgerEntry {
        LedgerEntry {
            index,
            target: 0,
            intended_ms: index as f64 * 10.0,
            sent_ms,
            latency_us: 1000,
            outcome,
            sandbox_id: None,
            node: None,
            deleted: None,
        }
    }

    #[test]
    fn spread_lateness_and_statuses() {
        let mut l = Ledger::new();
        l.record(entry(1, 12.0, Outcome::Status(201)));
        l.record(entry(0, 0.5, Outcome::Status(503)));
        l.record(entry(2, 20.0, Outcome::Timeout));
        l.finish();
        assert_eq!(l.entries[0].index, 0);
        assert_eq!(l.send_spread_ms(), Some(19.5));
        let (p50, _, max) = l.lateness_ms().unwrap();
        assert_eq!((p50, max), (0.5, 2.0));
        assert_eq!(l.statuses().get("503"), Some(&1));
        assert_eq!(l.created(), 1);
    }

    #[test]
    fn a_429_is_told_apart_the_way_e2b_words_it() {
        let team = "you have reached the maximum number of concurrent E2B sandboxes (20)";
        assert_eq!(LimitKind::classify(false, team), LimitKind::TeamConcurrency);
        assert_eq!(
            LimitKind::classify(true, "Rate limit exceeded"),
            LimitKind::Rate
        );
        assert_eq!(LimitKind::classify(false, ""), LimitKind::Unclassified);
        let o = Outcome::Limited(Limit {
            kind: LimitKind::Rate,
            retry_after_ms: Some(1000),
        });
        assert!(!o.is_uncertain() && o.is_limited());
        assert_eq!(o.key(), "429_rate_limit");
        assert!(Outcome::Cancelled.is_uncertain());
    }

    #[test]
    fn a_bounded_ledger_keeps_a_create_only_until_its_delete_is_answered() {
        let created = |i: usize| {
            let mut e = entry(i, 1.0, Outcome::Status(201));
            e.sandbox_id = Some(format!("s{i}"));
            e
        };
        let mut l = Ledger::bounded(RunShape::Paced, true);
        l.record(created(0));
        l.record(created(1));
        l.record(entry(2, 1.0, Outcome::Status(503)));
        let pending = |l: &Ledger| l.settling.as_ref().map(|s| s.pending.len());
        assert_eq!(pending(&l), Some(2));
        l.record_delete(0, Outcome::Status(204));
        assert_eq!(pending(&l), Some(1));
        assert!(l.entries.is_empty());
        l.finish();
        assert_eq!(pending(&l), Some(0));
        let s = l.take_settled().expect("bounded");
        assert_eq!((s.created(), s.deleted()), (2, 1));
        assert_eq!(s.left(), ["s1".to_string()]);
    }

    #[test]
    fn live_ids_leave_out_deleted_sandboxes() {
        let mut l = Ledger::new();
        let mut a = entry(0, 0.0, Outcome::Status(201));
        a.sandbox_id = Some("a".into());
        let mut b = entry(1, 0.0, Outcome::Status(201));
        b.sandbox_id = Some("b".into());
        b.deleted = Some(Outcome::Status(204));
        let mut c = entry(2, 0.0, Outcome::Status(201));
        c.sandbox_id = Some("c".into());
        c.deleted = Some(Outcome::Timeout);
        l.record(a);
        l.record(b);
        l.record(c);
        assert_eq!(l.live_ids(), vec!["a".to_string(), "c".to_string()]);
    }
}

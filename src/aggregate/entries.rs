//! The set audit's input: the client ledger, one entry per request, kept only by the
//! runs that check sets ([`needs_set_audit`](super::needs_set_audit)).

use crate::workload::{Ledger, LedgerEntry, Outcome};

/// Ledger entries in request order, fed one answer at a time.
#[derive(Debug, Default)]
pub struct Entries {
    entries: Vec<Option<LedgerEntry>>,
}

/// How one request ended, as the client ledger records it.
#[derive(Debug, Clone, Copy)]
pub struct EntryAnswer<'a> {
    /// Request index.
    pub req: u64,
    /// Placement replica the request went to.
    pub replica: u32,
    /// When it was meant to leave, ms after the gate.
    pub intended_ms: f64,
    /// When it left, ms after the gate.
    pub sent_ms: f64,
    /// Latency from the intended time, microseconds.
    pub latency_us: u64,
    /// What came back.
    pub outcome: &'a Outcome,
    /// The sandbox id (kept on a 201 only).
    pub sandbox_id: &'a str,
    /// The node it was placed on (kept on a 201 only).
    pub node: &'a str,
}

impl Entries {
    /// Records the answer of one request.
    pub fn answered(&mut self, a: EntryAnswer<'_>) {
        let Ok(index) = usize::try_from(a.req) else {
            return;
        };
        if self.entries.len() <= index {
            self.entries.resize_with(index + 1, || None);
        }
        let ok = a.outcome.is_created();
        self.entries[index] = Some(LedgerEntry {
            index,
            target: a.replica as usize,
            intended_ms: a.intended_ms,
            sent_ms: a.sent_ms,
            latency_us: a.latency_us,
            outcome: a.outcome.clone(),
            sandbox_id: ok.then(|| a.sandbox_id.to_string()),
            node: ok.then(|| a.node.to_string()),
            deleted: None,
        });
    }

    /// Records the workload's DELETE of request `req`'s sandbox.
    pub fn deleted(&mut self, req: u64, outcome: Outcome) {
        let entry = usize::try_from(req)
            .ok()
            .and_then(|i| self.entries.get_mut(i));
        if let Some(Some(e)) = entry {
            e.deleted = Some(outcome);
        }
    }

    /// The ledger the set audit reads, in request order.
    pub fn into_ledger(self) -> Ledger {
        let mut ledger = Ledger::new();
        for e in self.entries.into_iter().flatten() {
            ledger.record(e);
        }
        ledger
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_land_in_request_order_and_only_a_201_keeps_its_ids() {
        let mut e = Entries::default();
        let answer = |req, outcome| EntryAnswer {
            req,
            replica: 0,
            intended_ms: 0.0,
            sent_ms: 1.0,
            latency_us: 5,
            outcome,
            sandbox_id: "s",
            node: "n",
        };
        e.answered(answer(2, &Outcome::Status(503)));
        e.answered(answer(0, &Outcome::Status(201)));
        e.deleted(0, Outcome::Status(204));
        e.deleted(9, Outcome::Status(204));
        let l = e.into_ledger();
        assert_eq!(l.entries.len(), 2);
        assert_eq!(l.entries[0].index, 0);
        assert_eq!(l.entries[0].node.as_deref(), Some("n"));
        assert_eq!(l.entries[0].deleted, Some(Outcome::Status(204)));
        assert_eq!(l.entries[1].outcome, Outcome::Status(503));
        assert_eq!(l.entries[1].sandbox_id, None);
    }
}

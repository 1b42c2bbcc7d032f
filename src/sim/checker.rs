//! The set checker in simulation: a client ledger kept only when the profile has chaos
//! or checks `lost`/`duplicated`, compared with the nodes' final inventories by the same
//! [`check`] a real drill uses.

use std::collections::BTreeMap;

use mock_node::api::FaultKind;

use super::queue::Nanos;
use super::setup::SimSetup;
use crate::checker::{check, Inventory};
use crate::placement::CreateStatus;
use crate::report::CheckerResult;
use crate::workload::{Ledger, LedgerEntry, Outcome};

fn ms(t: Nanos) -> f64 {
    t as f64 / 1e6
}

/// One entry per request, in request order.
#[derive(Debug, Default)]
pub(super) struct SetLedger {
    entries: Vec<Option<LedgerEntry>>,
}

/// How one request ended, as the client ledger records it.
pub(super) struct Answer<'a> {
    pub req: u64,
    pub replica: u32,
    pub intended: Nanos,
    pub sent: Nanos,
    pub latency: Nanos,
    pub status: CreateStatus,
    pub sandbox_id: &'a str,
    pub node: &'a str,
}

impl SetLedger {
    /// Records the answer of one request.
    pub fn answered(&mut self, a: Answer<'_>) {
        let index = a.req as usize;
        if self.entries.len() <= index {
            self.entries.resize_with(index + 1, || None);
        }
        let ok = a.status == CreateStatus::Created;
        self.entries[index] = Some(LedgerEntry {
            index,
            target: a.replica as usize,
            intended_ms: ms(a.intended),
            sent_ms: ms(a.sent),
            latency_us: a.latency / 1000,
            outcome: Outcome::Status(a.status.code()),
            sandbox_id: ok.then(|| a.sandbox_id.to_string()),
            node: ok.then(|| a.node.to_string()),
            deleted: None,
        });
    }

    /// Records the workload's DELETE of request `req`'s sandbox.
    pub fn deleted(&mut self, req: u64, outcome: Outcome) {
        if let Some(Some(e)) = self.entries.get_mut(req as usize) {
            e.deleted = Some(outcome);
        }
    }

    /// Lost / duplicated / orphaned / recovered against `inventory` (final ids per node).
    pub fn check(
        self,
        setup: &SimSetup,
        inventory: BTreeMap<String, Vec<String>>,
        now: Nanos,
    ) -> CheckerResult {
        let mut ledger = Ledger::new();
        for e in self.entries.into_iter().flatten() {
            ledger.record(e);
        }
        let mut inv = Inventory {
            nodes: inventory,
            ..Inventory::default()
        };
        for f in setup.faults.iter().filter(|f| f.kind == FaultKind::Restart) {
            for &k in &f.nodes {
                let id = setup.cluster.node_id(k as usize);
                inv.restarts.entry(id).or_default().push(ms(f.at));
            }
        }
        inv.note_expired(&ledger, setup.sandbox.timeout, ms(now));
        check(&ledger, &inv)
    }
}

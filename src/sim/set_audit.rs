//! The set audit in simulation: the client ledger ([`Entries`], kept when
//! [`needs_set_audit`](crate::aggregate::needs_set_audit) says so) compared with the
//! nodes' final inventories by the same [`check`] a real drill uses.

use std::collections::BTreeMap;

use stampede_node_model::fault::FaultKind;

use super::queue::Nanos;
use super::setup::SimSetup;
use crate::aggregate::Entries;
use crate::audit::{audit, Inventory};
use crate::report::SetAudit;

/// The simulated client ledger: the aggregate's set audit input.
pub(super) type SetLedger = Entries;

fn ms(t: Nanos) -> f64 {
    t as f64 / 1e6
}

/// Lost / duplicated / orphaned / recovered of `ledger` against `inventory` (final ids
/// per node), forgiving only the absence of the sandboxes the evictor deleted.
pub(super) fn audit_sets(
    ledger: SetLedger,
    setup: &SimSetup,
    inventory: BTreeMap<String, Vec<String>>,
    evicted: Vec<String>,
) -> SetAudit {
    let ledger = ledger.into_ledger();
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
    inv.note_evicted(evicted);
    audit(&ledger, &inv)
}

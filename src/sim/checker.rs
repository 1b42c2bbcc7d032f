//! The set checker in simulation: the client ledger ([`Entries`], kept when
//! [`needs_set_checker`](crate::aggregate::needs_set_checker) says so) compared with the
//! nodes' final inventories by the same [`check`] a real drill uses.

use std::collections::BTreeMap;

use mock_node::api::FaultKind;

use super::queue::Nanos;
use super::setup::SimSetup;
use crate::aggregate::Entries;
use crate::checker::{check, Inventory};
use crate::report::CheckerResult;

/// The simulated client ledger: the aggregate's checker input.
pub(super) type SetLedger = Entries;

fn ms(t: Nanos) -> f64 {
    t as f64 / 1e6
}

/// Lost / duplicated / orphaned / recovered of `ledger` against `inventory` (final ids
/// per node), forgiving only the absence of the sandboxes the evictor deleted.
pub(super) fn check_sets(
    ledger: SetLedger,
    setup: &SimSetup,
    inventory: BTreeMap<String, Vec<String>>,
    evicted: Vec<String>,
) -> CheckerResult {
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
    check(&ledger, &inv)
}

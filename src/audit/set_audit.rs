//! The set audit (Jepsen's `set` checker, adapted): the client's ledger against the
//! union of the nodes' inventories.
//!
//! Rules, per sandbox id (ids present before the run are ignored):
//! - **duplicated**: an id listed more than once across the nodes (on two nodes, or twice
//!   on one), or one id acknowledged (201) to two requests. E2B reuses a request's
//!   sandbox id on every retry, so "one request made two sandboxes" shows as one id on
//!   two nodes; a request cannot be tied to two *different* ids, so that case is not seen.
//! - **lost**: a 201 whose id is on no node, that the client did not delete (a DELETE
//!   answered 404 does not count: the sandbox was already gone), and that is not known to
//!   have expired or been removed by someone else.
//! - **lost_to_node_restart**: such an id whose holder restarted after it was last seen
//!   there: the holder is known from the truth samples (node -> last seen) or the ledger's
//!   `node` (dated at the send). An id never seen anywhere with no ledger node is
//!   attributed to a restart when some node restarted after the request was sent (the
//!   sampler could not have caught it).
//! - **recovered** / **orphaned**: ids on the nodes that no 201 explains. An uncertain
//!   request (timeout, 5xx, transport error) that carries an id explains that id
//!   (recovered). The others are matched greedily: ids in order of first sighting, each
//!   to the earliest unused uncertain request sent before that sighting; matched ids are
//!   recovered, the rest orphaned (at least that many sandboxes nobody asked for).
//!
//! An audited ledger ([`Ledger::audited`]) keeps only the entries these rules read in
//! full; each create it settled by a delete is a digest, which still explains an id the
//! nodes list (never orphaned) and makes a second 201 of that id a duplicate.

use std::collections::{BTreeMap, BTreeSet};

use crate::report::{Finding, SetAudit};
use crate::workload::{client_deleted, Ledger, LedgerEntry};

use super::inventory::Inventory;

/// Compares `ledger` with `inventory`; pure and deterministic.
pub fn audit(ledger: &Ledger, inventory: &Inventory) -> SetAudit {
    // id -> nodes listing it (with repetition).
    let mut found: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for (node, ids) in &inventory.nodes {
        for id in ids {
            if !inventory.preexisting.contains(id) {
                found.entry(id).or_default().push(node);
            }
        }
    }
    let mut acked: BTreeMap<&str, Vec<&LedgerEntry>> = BTreeMap::new();
    for e in ledger.entries.iter().filter(|e| e.outcome.is_created()) {
        if let Some(id) = &e.sandbox_id {
            acked.entry(id).or_default().push(e);
        }
    }

    let mut duplicated: BTreeSet<&str> = found
        .iter()
        .filter(|(_, nodes)| nodes.len() > 1)
        .map(|(id, _)| *id)
        .collect();
    let settled = ledger.settled_ids().map(|s| s.view());
    let was_settled = |id: &str| settled.as_ref().is_some_and(|s| s.contains(id));
    duplicated.extend(
        acked
            .iter()
            .filter(|(id, es)| es.len() > 1 || was_settled(id))
            .map(|(id, _)| *id),
    );

    let mut lost = Vec::new();
    let mut lost_restart = Vec::new();
    for (id, entries) in &acked {
        if found.contains_key(id) || inventory.gone.contains(*id) {
            continue;
        }
        let Some(e) = entries.iter().find(|e| !client_deleted(e)) else {
            continue;
        };
        if lost_to_restart(id, e, inventory) {
            lost_restart.push(id.to_string());
        } else {
            lost.push(id.to_string());
        }
    }

    let (recovered, orphaned) = unexplained(ledger, inventory, &found, &was_settled);
    SetAudit {
        lost: Finding::from_ids(lost),
        lost_to_node_restart: Finding::from_ids(lost_restart),
        duplicated: Finding::from_ids(duplicated.into_iter().map(str::to_string)),
        orphaned: Finding::from_ids(orphaned),
        recovered: Finding::from_ids(recovered),
        evictions_unknown: false,
    }
}

fn lost_to_restart(id: &str, e: &LedgerEntry, inv: &Inventory) -> bool {
    let seen = inv.seen.get(id);
    let by_samples = seen
        .into_iter()
        .flatten()
        .any(|(node, at)| inv.restarted_since(node, at.last_ms));
    let by_ledger = e
        .node
        .as_deref()
        .is_some_and(|n| inv.restarted_since(n, e.sent_ms));
    let unplaced = seen.is_none_or(|s| s.is_empty()) && e.node.is_none();
    let any_restart_after = inv.restarts.values().flatten().any(|&t| t >= e.sent_ms);
    by_samples || by_ledger || (unplaced && any_restart_after)
}

/// Ids on the nodes that no 201 explains, split into (recovered, orphaned).
fn unexplained(
    ledger: &Ledger,
    inv: &Inventory,
    found: &BTreeMap<&str, Vec<&str>>,
    was_settled: &dyn Fn(&str) -> bool,
) -> (Vec<String>, Vec<String>) {
    let named: BTreeSet<&str> = ledger
        .entries
        .iter()
        .filter_map(|e| e.sandbox_id.as_deref())
        .collect();
    let mut recovered: Vec<String> = ledger
        .entries
        .iter()
        .filter(|e| e.outcome.is_uncertain())
        .filter_map(|e| e.sandbox_id.as_deref())
        .filter(|id| found.contains_key(id))
        .map(str::to_string)
        .collect();
    let mut pool: Vec<f64> = ledger
        .entries
        .iter()
        .filter(|e| e.outcome.is_uncertain() && e.sandbox_id.is_none())
        .map(|e| e.sent_ms)
        .collect();
    pool.sort_by(f64::total_cmp);
    let first_seen = |id: &str| {
        inv.seen
            .get(id)
            .and_then(|m| m.values().map(|a| a.first_ms).reduce(f64::min))
            .unwrap_or(f64::INFINITY)
    };
    let mut strangers: Vec<(f64, &str)> = found
        .keys()
        .filter(|id| !named.contains(*id) && !was_settled(id))
        .map(|id| (first_seen(id), *id))
        .collect();
    strangers.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(b.1)));
    // Requests sent before a sighting stay eligible for every later sighting, so taking
    // the earliest unused one is a maximum matching.
    let mut next = 0;
    let mut orphaned = Vec::new();
    for (seen_at, id) in strangers {
        if next < pool.len() && pool[next] <= seen_at {
            next += 1;
            recovered.push(id.to_string());
        } else {
            orphaned.push(id.to_string());
        }
    }
    (recovered, orphaned)
}

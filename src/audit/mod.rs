//! The set audit of chaos drills: after the run, every node's inventory is compared
//! with the client's ledger ([`audit`]), the way Jepsen's set checker compares what was
//! acknowledged with what a final read returns.

mod inventory;
mod set_audit;

pub use crate::collect::SeenAt;
pub use inventory::{collect_inventory, read_evicted, EvictedReadError, Inventory, InventoryError};
pub use set_audit::audit;

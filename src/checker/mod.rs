//! The set checker of chaos drills: after the run, every node's inventory is compared
//! with the client's ledger ([`check`]), the way Jepsen's set checker compares what was
//! acknowledged with what a final read returns.

mod inventory;
mod set_check;

pub use inventory::{
    collect_inventory, read_evicted, EvictedReadError, Inventory, InventoryError, SeenAt,
};
pub use set_check::check;

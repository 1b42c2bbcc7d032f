//! The sans-IO placement core: E2B's Best-of-K with four accounting modes.
//!
//! No sockets, no clock, no tokio: the HTTP service and the simulator drive it.

pub mod mode;

pub use mode::AccountingMode;

//! Run profiles: the user's main input, one typed serde tree (`deny_unknown_fields`).
//!
//! Defaults are written in the doc comments; [`Profile::validate`] names the bad field.

mod types;

pub use types::*;

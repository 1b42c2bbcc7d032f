//! Profiles: loading, descriptions, K lists, hostile and fuzzed input.

#[path = "../support/mod.rs"]
mod support;

mod descriptions;
mod hostile;
mod hostile_fuzz;
mod k_list;
mod load;

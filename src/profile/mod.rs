//! Run profiles: the user's main input, one typed serde tree (`deny_unknown_fields`).
//!
//! Defaults are written in the doc comments. [`load`] parses and type-checks a file,
//! [`validate`] names every semantic problem at `file:line:col: field.path`, and
//! [`load_and_validate`] does both. [`json_schema`] describes the format for editors.
//! Every bound a profile must stay within is in [`limits`].

mod chaos_step;
mod check_table;
mod command_action;
mod issue;
mod lifecycle;
pub mod limits;
mod load;
mod locate;
mod one_or_many;
mod run_settings;
mod shipped;
mod targets;
mod test_plan;
mod types;
mod validate;
mod variants;
mod warn;

pub use chaos_step::{ChaosFault, ChaosStep, StepError};
pub use check_table::{CheckDef, CheckId, SetBound, CHECKS};
pub use command_action::{CommandAction, DEFAULT_COMMAND_TIMEOUT, MAX_COMMAND_TIMEOUT};
pub use issue::{ProfileError, ProfileErrors, ProfileIssue};
pub use lifecycle::{Lifecycle, LifecycleStep, PlannedStep};
pub use load::{load, load_and_validate, load_checked, parse, Source};
pub use locate::{Locator, Position, ShapeProblem};
pub use run_settings::RunSettings;
pub use shipped::{did_you_mean, shipped, SHIPPED};
pub use targets::{host_of_address, is_loopback_host, validate_targets, validate_targets_in};
pub use test_plan::{parse_test_plan, PlanStep};
pub use types::*;
pub use validate::validate;
pub use variants::RunVariant;
pub use warn::{warnings, IDLE_ABOVE_HOST_CAP};

/// JSON Schema (draft 2020-12) of the profile format, for editors (`stampede schema`).
pub fn json_schema() -> serde_json::Value {
    serde_json::to_value(schemars::schema_for!(Profile)).unwrap_or(serde_json::Value::Null)
}

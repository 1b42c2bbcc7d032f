//! Accounting modes: what a placement instance adds to a node's reported allocation.

use serde::{Deserialize, Serialize};

/// How a placement instance estimates a node's allocated vCPU between syncs
/// (docs/design.md section 1, "Accounting modes").
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    PartialOrd,
    Ord,
    Serialize,
    Deserialize,
    schemars::JsonSchema,
)]
#[serde(rename_all = "kebab-case")]
pub enum AccountingMode {
    /// Only the heartbeat's `metric_cpu_allocated` (E2B before PR #2201).
    Reported,
    /// Reported plus the vCPU of this instance's creates still in progress.
    InFlight,
    /// In-flight plus optimistic add on create success / remove on delete, all dropped
    /// at the next sync (E2B today).
    Optimistic,
    /// Optimistic adds/removes keyed by sandbox id, each released only when a sync's id
    /// list confirms it (stampede's proposal).
    Reconciled,
}

impl AccountingMode {
    /// Every mode, in historical order.
    pub const ALL: [AccountingMode; 4] = [
        AccountingMode::Reported,
        AccountingMode::InFlight,
        AccountingMode::Optimistic,
        AccountingMode::Reconciled,
    ];

    /// The name used in profiles, flags and reports (`in-flight`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            AccountingMode::Reported => "reported",
            AccountingMode::InFlight => "in-flight",
            AccountingMode::Optimistic => "optimistic",
            AccountingMode::Reconciled => "reconciled",
        }
    }
}

impl std::fmt::Display for AccountingMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for AccountingMode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        AccountingMode::ALL
            .into_iter()
            .find(|m| m.as_str() == s)
            .ok_or_else(|| {
                format!("unknown accounting mode `{s}` (expected reported, in-flight, optimistic or reconciled)")
            })
    }
}

//! The runs an embedded profile asks for: one per accounting mode and Best-of-K `k`.
//!
//! `stampede run` and `stampede sim` both take their runs, labels and placement
//! parameters from here, so a profile's runs are the same on the wire and in the
//! simulator (E2B's `BenchmarkPlacementDistribution` runs K3 and K5 in one go).

use super::run_settings::RunSettings;
use super::types::EmbeddedPlacement;
use crate::placement::{AccountingMode, PlacementConfig};

/// One run of an embedded profile.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RunVariant {
    /// Accounting mode of the placement service.
    pub mode: AccountingMode,
    /// Nodes sampled per decision.
    pub k: usize,
    /// Whether the profile lists several `k`, so that the label must name it.
    pub k_varies: bool,
}

impl RunVariant {
    /// Name of the run: the mode (`reported`), with the `k` when the profile compares
    /// several (`reported K5`).
    pub fn label(&self) -> String {
        if self.k_varies {
            format!("{} K{}", self.mode, self.k)
        } else {
            self.mode.to_string()
        }
    }

    /// The settings every report of this run carries, simulated or not.
    pub fn settings(&self) -> RunSettings {
        RunSettings::placement(self.mode, self.k)
    }
}

impl EmbeddedPlacement {
    /// Every run the section asks for, `k` by `k` in the profile's order and, within
    /// each, the accounting modes in the profile's order.
    pub fn runs(&self) -> Vec<RunVariant> {
        let ks = self.best_of_k.k.to_vec();
        let k_varies = ks.len() > 1;
        ks.iter()
            .flat_map(|&k| {
                self.accounting
                    .to_vec()
                    .into_iter()
                    .map(move |mode| RunVariant { mode, k, k_varies })
            })
            .collect()
    }

    /// The placement core's parameters for `run`: the one mapping from a profile's
    /// placement section to [`PlacementConfig`], used by the service and the simulator.
    pub fn placement_config(&self, run: RunVariant) -> PlacementConfig {
        PlacementConfig {
            k: run.k,
            r: self.best_of_k.r,
            alpha: self.best_of_k.alpha,
            max_retries: self.max_retries,
            mode: run.mode,
            max_starting_per_node: self.max_starting_per_node,
            failure_answers: self.failure_answers,
            ..PlacementConfig::default()
        }
    }
}

//! The API's times inside and after a decision (`commit_lag`, `create_return`,
//! `sync_transit`) turned off, for tests of another mechanism whose figures are stated
//! without them (a retry period, a queue's exit time, a closed form).
#![allow(dead_code)]

use std::time::Duration;

use stampede::profile::{PlacementSection, Profile};
use stampede_node_model::config::LatencyDist;

/// `p` with the three times at zero (an embedded profile; others are left alone).
pub fn off(mut p: Profile) -> Profile {
    if let PlacementSection::Embedded(e) = &mut p.placement {
        let zero = || LatencyDist::Constant {
            value: Duration::ZERO,
        };
        e.api_stage.commit_lag = zero();
        e.api_stage.create_return = zero();
        e.api_stage.sync_transit = zero();
    }
    p
}

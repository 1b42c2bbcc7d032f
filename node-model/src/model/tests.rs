//! Keys and ids name the same sandboxes: a model driven by the keys its admissions
//! hand out answers, counts and lists exactly as one driven by ids.

use std::collections::HashMap;
use std::time::Duration;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::{CreateRequest, NodeModel, SandboxKey};
use crate::config::NodeSpec;

fn req(id: &str) -> CreateRequest {
    CreateRequest {
        sandbox_id: id.into(),
        vcpu: 1,
        ram_mb: 256,
        ..Default::default()
    }
}

#[test]
fn keyed_calls_answer_count_and_list_as_calls_by_id() {
    let spec = NodeSpec {
        max_sandboxes: 6,
        max_starting: 3,
        ..NodeSpec::default()
    };
    for seed in 0..20 {
        let mut by_id = NodeModel::new("n".into(), spec.clone(), seed);
        let mut by_key = by_id.clone();
        // The key of each id's latest admission, kept after it leaves (a stale key).
        let mut keys: HashMap<String, SandboxKey> = HashMap::new();
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        for step in 0..2_000u64 {
            let now = Duration::from_millis(step);
            let id = format!("sb-{}", rng.random_range(0..12));
            match rng.random_range(0..100) {
                0..40 => {
                    let a = by_id.begin_create(req(&id), now);
                    let b = by_key.begin_create(req(&id), now);
                    assert_eq!(a.is_ok(), b.is_ok(), "seed {seed} step {step}");
                    if let Ok(key) = b {
                        keys.insert(id, key);
                    }
                }
                40..65 => {
                    let a = by_id.finish_create(&id, now).is_ok();
                    let b = match keys.get(&id) {
                        Some(&key) => by_key.finish_create_by_key(key, now),
                        None => by_key.finish_create(&id, now).is_ok(),
                    };
                    assert_eq!(a, b, "seed {seed} step {step}");
                }
                65..75 => {
                    by_id.abort_create(&id, now);
                    match keys.get(&id) {
                        Some(&key) => by_key.abort_create_by_key(key, now),
                        None => by_key.abort_create(&id, now),
                    }
                }
                75..99 => {
                    let a = by_id.delete(&id, now).ok();
                    let b = match keys.get(&id) {
                        Some(&key) => by_key.delete_by_key(key, now),
                        None => by_key.delete(&id, now).ok(),
                    };
                    assert_eq!(a, b, "seed {seed} step {step}");
                }
                _ => {
                    by_id.restart(now);
                    by_key.restart(now);
                }
            }
            assert_eq!(
                by_id.counters(),
                by_key.counters(),
                "seed {seed} step {step}"
            );
            assert_eq!(by_id.starting_count(), by_key.starting_count());
            assert_eq!(by_id.list(now), by_key.list(now), "seed {seed} step {step}");
            assert_eq!(
                by_id.truth(now),
                by_key.truth(now),
                "seed {seed} step {step}"
            );
        }
    }
}

//! The node's fault gate: what the faults in force ([`FaultEffect`]) and the node's
//! configured failure rules do to one RPC, in a fixed order: killed, hang, slow (as the
//! RPC is sent, [`on_send`]), then injected error, sampled failure and, for a Create,
//! `exhaust` and admission (as it reaches the node, [`NodeModel::gate`] and
//! [`NodeModel::gate_create`]).
//!
//! Pure: no clock and no I/O, time passed in. The gRPC server and the simulator both
//! call these for Create, Delete, ServiceInfo and List; the simulator's figures depend
//! on the order of the node RNG's draws, which is fixed here: an `errors` fault's draw
//! first (only while one is in force), then the configured rules (only if that draw did
//! not fire), then, for an admitted Create, its latency.

use std::time::Duration;

use crate::config::{FailureCode, RpcKind};
use crate::effect::FaultEffect;
use crate::model::{CreateRejection, CreateRequest, NodeModel, SandboxKey};

/// What happens to an RPC as it is sent to the node.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sent {
    /// The node is killed: the connection is refused or reset (UNAVAILABLE).
    Refused,
    /// The node hangs: the RPC is held, unanswered, until the hang heals.
    Held,
    /// The node is slow: the RPC reaches it after this delay (never zero).
    Delayed(Duration),
    /// The RPC reaches the node now.
    Arrives,
}

/// What the node does with an RPC that reached it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Arrival {
    /// An injected error or a sampled failure: the RPC fails with this code.
    Failed(FailureCode),
    /// The RPC goes on to the model.
    Passed,
}

/// What the node does with a Create that reached it.
#[derive(Debug, Clone, PartialEq)]
pub enum CreateArrival {
    /// An injected error or a sampled failure (counted as a failed create).
    Failed(FailureCode),
    /// Refused by an `exhaust` fault, an invalid request or admission (counted by reason).
    Refused(CreateRejection),
    /// Admitted: the sandbox is starting and is ready after `latency`.
    Admitted {
        /// The create's latency, drawn from the node's model.
        latency: Duration,
        /// Where the node holds the sandbox (see [`NodeModel::begin_create`]).
        key: SandboxKey,
    },
}

/// The gate of an RPC as it is sent: a kill refuses it, a hang holds it, `slow` delays
/// it. Draws nothing.
pub fn on_send(effect: &FaultEffect) -> Sent {
    if effect.killed {
        Sent::Refused
    } else if effect.hung {
        Sent::Held
    } else {
        match effect.slow.filter(|d| !d.is_zero()) {
            Some(d) => Sent::Delayed(d),
            None => Sent::Arrives,
        }
    }
}

impl NodeModel {
    /// The gate of an RPC of kind `rpc` that reached the node under `effect`: the
    /// `errors` fault's draw, then the configured failure rules. A failed Create is
    /// counted as failed.
    pub fn gate(&mut self, effect: &FaultEffect, rpc: RpcKind) -> Arrival {
        let injected = effect
            .errors
            .and_then(|(p, code)| self.chance(p).then_some(code))
            .or_else(|| self.sample_failure(rpc));
        match injected {
            Some(code) => {
                if rpc == RpcKind::Create {
                    self.count_failed_create();
                }
                Arrival::Failed(code)
            }
            None => Arrival::Passed,
        }
    }

    /// The gate of a Create that reached the node under `effect` at `now`: [`gate`](Self::gate),
    /// then an `exhaust` fault, then `req` (a request the server already found invalid
    /// is refused here, after `exhaust`), then admission and the latency draw.
    pub fn gate_create(
        &mut self,
        effect: &FaultEffect,
        req: Result<CreateRequest, CreateRejection>,
        now: Duration,
    ) -> CreateArrival {
        if let Arrival::Failed(code) = self.gate(effect, RpcKind::Create) {
            return CreateArrival::Failed(code);
        }
        if effect.exhaust {
            return CreateArrival::Refused(self.reject(CreateRejection::Exhausted));
        }
        let req = match req {
            Ok(req) => req,
            Err(r) => return CreateArrival::Refused(self.reject(r)),
        };
        match self.begin_create(req, now) {
            Ok(key) => CreateArrival::Admitted {
                latency: self.sample_create_latency(),
                key,
            },
            Err(r) => CreateArrival::Refused(r),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{FailureRule, LatencyDist, NodeSpec};

    fn spec(failures: Vec<FailureRule>) -> NodeSpec {
        NodeSpec {
            create_latency: LatencyDist::Uniform {
                min: Duration::from_millis(1),
                max: Duration::from_millis(9),
            },
            failures,
            ..NodeSpec::default()
        }
    }

    fn rule(rpc: RpcKind, probability: f64, code: FailureCode) -> FailureRule {
        FailureRule {
            rpc,
            probability,
            code,
        }
    }

    fn req(id: &str) -> CreateRequest {
        CreateRequest {
            sandbox_id: id.into(),
            vcpu: 1,
            ram_mb: 256,
            end_time: None,
            template_id: "base".into(),
            team_id: Default::default(),
            execution_id: Default::default(),
        }
    }

    fn errors(p: f64, code: FailureCode) -> FaultEffect {
        FaultEffect {
            errors: Some((p, code)),
            ..FaultEffect::default()
        }
    }

    /// The next `n` draws of a model's RNG, to compare two models' states.
    fn next_draws(m: &mut NodeModel, n: usize) -> Vec<bool> {
        (0..n).map(|_| m.chance(0.5)).collect()
    }

    #[test]
    fn on_send_orders_kill_then_hang_then_slow() {
        let slow = Duration::from_millis(30);
        let all = FaultEffect {
            killed: true,
            hung: true,
            slow: Some(slow),
            ..FaultEffect::default()
        };
        assert_eq!(on_send(&all), Sent::Refused);
        let hung = FaultEffect {
            killed: false,
            ..all.clone()
        };
        assert_eq!(on_send(&hung), Sent::Held);
        let slowed = FaultEffect {
            hung: false,
            ..hung.clone()
        };
        assert_eq!(on_send(&slowed), Sent::Delayed(slow));
        let zero = FaultEffect {
            slow: Some(Duration::ZERO),
            ..FaultEffect::default()
        };
        assert_eq!(on_send(&zero), Sent::Arrives);
        assert_eq!(on_send(&FaultEffect::default()), Sent::Arrives);
    }

    #[test]
    fn a_certain_injected_error_fails_with_its_code_and_counts_a_failed_create() {
        let mut m = NodeModel::new("n".into(), spec(vec![]), 3);
        let e = errors(1.0, FailureCode::Internal);
        assert_eq!(
            m.gate(&e, RpcKind::List),
            Arrival::Failed(FailureCode::Internal)
        );
        assert_eq!(m.counters().creates_failed, 0);
        let got = m.gate_create(&e, Ok(req("a")), Duration::ZERO);
        assert_eq!(got, CreateArrival::Failed(FailureCode::Internal));
        assert_eq!(m.counters().creates_failed, 1);
        assert_eq!(m.truth(Duration::ZERO).sandboxes_running, 0);
    }

    #[test]
    fn a_sampled_failure_fails_only_its_rpc() {
        let rules = vec![rule(RpcKind::Delete, 1.0, FailureCode::Unavailable)];
        let mut m = NodeModel::new("n".into(), spec(rules), 3);
        let none = FaultEffect::default();
        assert_eq!(
            m.gate(&none, RpcKind::Delete),
            Arrival::Failed(FailureCode::Unavailable)
        );
        assert_eq!(m.gate(&none, RpcKind::ServiceInfo), Arrival::Passed);
        assert!(matches!(
            m.gate_create(&none, Ok(req("a")), Duration::ZERO),
            CreateArrival::Admitted { .. }
        ));
    }

    #[test]
    fn exhaust_refuses_after_the_error_draws_and_before_admission() {
        let mut m = NodeModel::new("n".into(), spec(vec![]), 3);
        let e = FaultEffect {
            exhaust: true,
            ..FaultEffect::default()
        };
        // Even an invalid request is refused as exhausted: `exhaust` comes first.
        let invalid = Err(CreateRejection::InvalidArgument("bad".into()));
        let got = m.gate_create(&e, invalid, Duration::ZERO);
        assert_eq!(got, CreateArrival::Refused(CreateRejection::Exhausted));
        assert_eq!(m.counters().creates_rejected.get("fault_exhaust"), Some(&1));
        let e = FaultEffect {
            errors: Some((1.0, FailureCode::ResourceExhausted)),
            ..e
        };
        let got = m.gate_create(&e, Ok(req("a")), Duration::ZERO);
        assert_eq!(got, CreateArrival::Failed(FailureCode::ResourceExhausted));
    }

    #[test]
    fn invalid_requests_and_admission_refusals_are_counted_by_reason() {
        let s = NodeSpec {
            max_starting: 1,
            ..spec(vec![])
        };
        let mut m = NodeModel::new("n".into(), s, 3);
        let none = FaultEffect::default();
        let invalid = Err(CreateRejection::InvalidArgument("bad".into()));
        assert!(matches!(
            m.gate_create(&none, invalid, Duration::ZERO),
            CreateArrival::Refused(CreateRejection::InvalidArgument(_))
        ));
        let CreateArrival::Admitted { latency, .. } =
            m.gate_create(&none, Ok(req("a")), Duration::ZERO)
        else {
            panic!("the first create is admitted");
        };
        assert!((Duration::from_millis(1)..=Duration::from_millis(9)).contains(&latency));
        assert_eq!(
            m.gate_create(&none, Ok(req("b")), Duration::ZERO),
            CreateArrival::Refused(CreateRejection::MaxStarting(1))
        );
        let rejected = &m.counters().creates_rejected;
        assert_eq!(rejected.values().sum::<u64>(), 2, "{rejected:?}");
    }

    #[test]
    fn draws_the_fault_then_the_rules_then_the_latency_in_that_order() {
        let rules = vec![
            rule(RpcKind::Create, 0.3, FailureCode::Internal),
            rule(RpcKind::Any, 0.2, FailureCode::Unavailable),
        ];
        let e = errors(0.4, FailureCode::ResourceExhausted);
        let mut seen = [0usize; 3];
        for seed in 0..200 {
            let mut gated = NodeModel::new("n".into(), spec(rules.clone()), seed);
            let mut by_hand = gated.clone();
            let got = gated.gate_create(&e, Ok(req("a")), Duration::ZERO);
            // The same draws, made one by one on the model's primitives.
            let want = match by_hand
                .chance(0.4)
                .then_some(FailureCode::ResourceExhausted)
                .or_else(|| by_hand.sample_failure(RpcKind::Create))
            {
                Some(code) => CreateArrival::Failed(code),
                None => {
                    let key = by_hand.begin_create(req("a"), Duration::ZERO).unwrap();
                    CreateArrival::Admitted {
                        latency: by_hand.sample_create_latency(),
                        key,
                    }
                }
            };
            seen[match &got {
                CreateArrival::Failed(FailureCode::ResourceExhausted) => 0,
                CreateArrival::Failed(_) => 1,
                _ => 2,
            }] += 1;
            assert_eq!(got, want, "seed {seed}");
            assert_eq!(next_draws(&mut gated, 16), next_draws(&mut by_hand, 16));
        }
        // Every branch was taken, so each order was compared.
        assert!(seen.iter().all(|&n| n > 0), "{seen:?}");
    }

    #[test]
    fn no_errors_fault_draws_nothing_for_it_and_a_fired_one_skips_the_rules() {
        let rules = vec![rule(RpcKind::Any, 0.5, FailureCode::Internal)];
        for seed in 0..50 {
            let mut gated = NodeModel::new("n".into(), spec(rules.clone()), seed);
            let mut by_hand = gated.clone();
            gated.gate(&FaultEffect::default(), RpcKind::List);
            by_hand.sample_failure(RpcKind::List);
            assert_eq!(next_draws(&mut gated, 16), next_draws(&mut by_hand, 16));

            let mut gated = NodeModel::new("n".into(), spec(rules.clone()), seed);
            let mut by_hand = gated.clone();
            let got = gated.gate(&errors(1.0, FailureCode::Unknown), RpcKind::List);
            assert_eq!(got, Arrival::Failed(FailureCode::Unknown));
            by_hand.chance(1.0);
            assert_eq!(next_draws(&mut gated, 16), next_draws(&mut by_hand, 16));
        }
    }
}

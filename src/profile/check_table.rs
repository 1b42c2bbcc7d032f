//! The one list of a profile's checks. Validation, evaluation (`report::checks`) and the
//! `per_mode`/`per_k` overlay all walk [`CHECKS`]; a test holds the [`Checks`] struct
//! (and so the JSON schema, which is derived from it) to the same list, in the same order.

use super::types::{Bound, Checks, LatencyBound};

/// Which check a [`CheckDef`] is: evaluation matches on it for the figure it judges.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CheckId {
    /// `cv`: coefficient of variation of the per-node sandbox counts at the end.
    Cv,
    /// `max_over_mean`: busiest node's count over the mean.
    MaxOverMean,
    /// `jain`: Jain's fairness index of the per-node counts.
    Jain,
    /// `error_rate`: fraction of creates that did not get a 201.
    ErrorRate,
    /// `p99_latency`: p99 create latency.
    P99Latency,
    /// `lost`: sandboxes the set audit found lost.
    Lost,
    /// `duplicated`: sandboxes the set audit found duplicated.
    Duplicated,
    /// `limited`: fraction of creates answered 429.
    Limited,
    /// `cancelled`: creates given up because the run was interrupted.
    Cancelled,
    /// `placements_cv`: CV of the creates that landed per node over the run.
    PlacementsCv,
    /// `running_cv_mean`: time-weighted mean CV of running sandboxes (steady window).
    RunningCvMean,
    /// `running_cv_peak`: largest CV of running sandboxes at a sample (steady window).
    RunningCvPeak,
    /// `retries_per_s_peak`: largest count of ResourceExhausted retries in one second.
    RetriesPerSPeak,
    /// `accounting_error`: mean |believed - true| allocated vCPU over nodes and samples
    /// (on the wire, its distance from the truth read just before and just after it).
    AccountingError,
}

/// A check's bound as a profile sets it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum SetBound {
    /// A bound on a figure (`min`, `max`).
    Figure(Bound),
    /// An upper bound on a latency (`max: 250ms`).
    Latency(LatencyBound),
}

/// One check a profile may set under `checks:` (and under `per_mode`/`per_k`).
#[derive(Debug, Clone, Copy)]
pub struct CheckDef {
    /// Which check.
    pub id: CheckId,
    /// Its key in a profile and its name in a report.
    pub name: &'static str,
    /// Largest value a bound may name (fractions and Jain's index); `None` for a figure
    /// with no upper limit. Every figure is non-negative.
    pub at_most: Option<f64>,
    /// The bound `checks` sets for it, if any.
    pub get: fn(&Checks) -> Option<SetBound>,
    /// Replaces the bound in the first `Checks` with the second's, when the second sets one.
    pub overlay: fn(&mut Checks, &Checks),
}

macro_rules! figure {
    ($id:ident, $field:ident, $at_most:expr) => {
        CheckDef {
            id: CheckId::$id,
            name: stringify!($field),
            at_most: $at_most,
            get: |c| c.$field.map(SetBound::Figure),
            overlay: |base, o| {
                if o.$field.is_some() {
                    base.$field = o.$field;
                }
            },
        }
    };
}

/// Every check, in the order a report lists their outcomes.
pub const CHECKS: [CheckDef; 14] = [
    figure!(Cv, cv, None),
    figure!(MaxOverMean, max_over_mean, None),
    figure!(Jain, jain, Some(1.0)),
    figure!(ErrorRate, error_rate, Some(1.0)),
    CheckDef {
        id: CheckId::P99Latency,
        name: "p99_latency",
        at_most: None,
        get: |c| c.p99_latency.map(SetBound::Latency),
        overlay: |base, o| {
            if o.p99_latency.is_some() {
                base.p99_latency = o.p99_latency;
            }
        },
    },
    figure!(Lost, lost, None),
    figure!(Duplicated, duplicated, None),
    figure!(Limited, limited, Some(1.0)),
    figure!(Cancelled, cancelled, None),
    figure!(PlacementsCv, placements_cv, None),
    figure!(RunningCvMean, running_cv_mean, None),
    figure!(RunningCvPeak, running_cv_peak, None),
    figure!(RetriesPerSPeak, retries_per_s_peak, None),
    figure!(AccountingError, accounting_error, None),
];

impl Checks {
    /// These checks without their `per_mode`/`per_k` overrides, with every check `o`
    /// sets replacing this one's.
    pub fn overlaid(&self, o: &Checks) -> Checks {
        let mut out = Checks {
            per_mode: Default::default(),
            per_k: Default::default(),
            ..self.clone()
        };
        for def in &CHECKS {
            (def.overlay)(&mut out, o);
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The struct (and the schema derived from it) lists exactly the table's checks, in
    /// the table's order, then the two override maps.
    #[test]
    fn the_checks_struct_and_its_schema_list_the_table() {
        let schema = serde_json::to_value(schemars::schema_for!(Checks)).unwrap();
        let props: Vec<&str> = schema["properties"]
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        let mut want: Vec<&str> = CHECKS.iter().map(|d| d.name).collect();
        want.extend(["per_mode", "per_k"]);
        let (mut got, mut want_sorted) = (props.clone(), want.clone());
        got.sort_unstable();
        want_sorted.sort_unstable();
        assert_eq!(got, want_sorted);
        // Serialized in field order: each key after the one before it.
        let text = serde_json::to_string(&Checks::default()).unwrap();
        let at: Vec<usize> = want
            .iter()
            .map(|name| text.find(&format!("\"{name}\":")).unwrap())
            .collect();
        assert!(at.windows(2).all(|w| w[0] < w[1]), "field order: {text}");
    }

    #[test]
    fn every_check_overlays_only_itself() {
        let set = Checks {
            cv: Some(Bound::default()),
            max_over_mean: Some(Bound::default()),
            jain: Some(Bound::default()),
            error_rate: Some(Bound::default()),
            p99_latency: Some(LatencyBound {
                max: std::time::Duration::from_millis(5),
            }),
            lost: Some(Bound::default()),
            duplicated: Some(Bound::default()),
            limited: Some(Bound::default()),
            cancelled: Some(Bound::default()),
            placements_cv: Some(Bound::default()),
            running_cv_mean: Some(Bound::default()),
            running_cv_peak: Some(Bound::default()),
            retries_per_s_peak: Some(Bound::default()),
            accounting_error: Some(Bound::default()),
            ..Checks::default()
        };
        for def in &CHECKS {
            let mut one = Checks::default();
            (def.overlay)(&mut one, &set);
            for other in &CHECKS {
                assert_eq!(
                    (other.get)(&one).is_some(),
                    other.id == def.id,
                    "{} overlaid {}",
                    def.name,
                    other.name
                );
            }
        }
    }
}

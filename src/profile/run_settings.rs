//! The settings a run was made with, typed once and shown the same in every report.
//!
//! `report.json` keeps them as a map of text (`{"accounting": "reported", "k": "3"}`),
//! so that older reports read back and two reports compare key by key; in memory they
//! are typed, so that a check reads `k` as a number and no writer invents a key.

use std::collections::BTreeMap;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::placement::AccountingMode;

/// The settings of one run. An embedded run (`stampede run`) and its simulation
/// (`stampede sim`) carry the same ones: the accounting mode and Best-of-K `k`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RunSettings {
    /// Accounting mode of the placement service (`accounting`), when stampede ran it.
    pub accounting: Option<AccountingMode>,
    /// Nodes sampled per decision (`k`), when stampede ran the placement.
    pub k: Option<usize>,
    /// The API a run against an external placement targeted, credentials redacted
    /// (`target`).
    pub target: Option<String>,
    /// The values a sweep varied besides `accounting` and `k`, as given on the command
    /// line, and any key of a report read back that this version does not type.
    pub swept: BTreeMap<String, String>,
}

impl RunSettings {
    /// The settings of a run of stampede's own placement in `mode` with `k`.
    pub fn placement(mode: AccountingMode, k: usize) -> Self {
        RunSettings {
            accounting: Some(mode),
            k: Some(k),
            ..RunSettings::default()
        }
    }

    /// The settings of a run against the external API at `target` (already redacted).
    pub fn external(target: String) -> Self {
        RunSettings {
            target: Some(target),
            ..RunSettings::default()
        }
    }

    /// Whether no setting is known.
    pub fn is_empty(&self) -> bool {
        self.to_map().is_empty()
    }

    /// The settings as `report.json` holds them: one text value per key, in key order.
    pub fn to_map(&self) -> BTreeMap<String, String> {
        let mut map = self.swept.clone();
        if let Some(m) = self.accounting {
            map.insert("accounting".into(), m.as_str().to_string());
        }
        if let Some(k) = self.k {
            map.insert("k".into(), k.to_string());
        }
        if let Some(t) = &self.target {
            map.insert("target".into(), t.clone());
        }
        map
    }

    /// The settings of a map as `report.json` holds it; a value that does not parse
    /// stays under [`swept`](Self::swept) as text.
    pub fn from_map(mut map: BTreeMap<String, String>) -> Self {
        let mut take = |key: &str| map.remove(key);
        let accounting = take("accounting");
        let k = take("k");
        let target = take("target");
        let mut s = RunSettings {
            target,
            ..RunSettings::default()
        };
        match accounting.as_deref().map(str::parse::<AccountingMode>) {
            Some(Ok(m)) => s.accounting = Some(m),
            Some(Err(_)) => {
                map.insert("accounting".into(), accounting.unwrap_or_default());
            }
            None => {}
        }
        match k.as_deref().map(str::parse::<usize>) {
            Some(Ok(k)) => s.k = Some(k),
            Some(Err(_)) => {
                map.insert("k".into(), k.unwrap_or_default());
            }
            None => {}
        }
        s.swept = map;
        s
    }
}

impl Serialize for RunSettings {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.to_map().serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for RunSettings {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        BTreeMap::<String, String>::deserialize(deserializer).map(RunSettings::from_map)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_placement_run_serializes_as_the_map_reports_always_held() {
        let s = RunSettings::placement(AccountingMode::Reported, 3);
        let json = serde_json::to_string(&s).expect("serializes");
        assert_eq!(json, r#"{"accounting":"reported","k":"3"}"#);
        let back: RunSettings = serde_json::from_str(&json).expect("reads back");
        assert_eq!(back, s);
    }

    #[test]
    fn unknown_keys_and_unparsed_values_survive_a_round_trip() {
        let json = r#"{"accounting":"bogus","k":"3","replicas":"2","sync_interval":"1s"}"#;
        let s: RunSettings = serde_json::from_str(json).expect("reads");
        assert_eq!(s.k, Some(3));
        assert_eq!(s.accounting, None);
        assert_eq!(serde_json::to_string(&s).expect("serializes"), json);
    }
}

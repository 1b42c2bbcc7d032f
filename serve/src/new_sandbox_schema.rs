//! The properties of E2B's `NewSandbox` that stampede accepts without acting on them
//! (`spec/openapi.yml`: `autoResume`, `network`, `mcp`, `iam`, `volumeMounts`), typed as
//! the spec types them so that a body E2B answers 400 (`iam` a number,
//! `network.rules.*.transform` an array) is answered 400 here too. Unlisted properties
//! of these objects are accepted, as the spec does not forbid them.

use std::collections::BTreeMap;

use serde::de::DeserializeOwned;
use serde::{Deserialize, Deserializer, Serialize};
use serde_json::Value;

/// A JSON object holding a `T`. serde's derived structs also read an array (as the
/// fields in order), so `"transform": []` would pass: this refuses anything but an
/// object, as E2B's validation does.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(transparent)]
pub struct Obj<T>(pub T);

impl<'de, T: DeserializeOwned> Deserialize<'de> for Obj<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let m = serde_json::Map::<String, Value>::deserialize(d)?;
        serde_json::from_value(Value::Object(m))
            .map(Obj)
            .map_err(serde::de::Error::custom)
    }
}

/// The accepted-and-ignored properties of a create body (flattened into
/// [`NewSandbox`](crate::rest::NewSandbox)).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NewSandboxExtras {
    /// `SandboxAutoResumeConfig`.
    #[serde(
        default,
        deserialize_with = "present_not_null",
        skip_serializing_if = "Option::is_none"
    )]
    pub auto_resume: Option<Obj<AutoResume>>,
    /// `SandboxNetworkConfig`.
    #[serde(
        default,
        deserialize_with = "present_not_null",
        skip_serializing_if = "Option::is_none"
    )]
    pub network: Option<Obj<NetworkConfig>>,
    /// `Mcp`: any object, or `null` (the spec's `nullable`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mcp: Option<serde_json::Map<String, serde_json::Value>>,
    /// `SandboxIam`.
    #[serde(
        default,
        deserialize_with = "present_not_null",
        skip_serializing_if = "Option::is_none"
    )]
    pub iam: Option<Obj<Iam>>,
    /// `SandboxVolumeMount` list.
    #[serde(
        default,
        deserialize_with = "present_not_null",
        skip_serializing_if = "Option::is_none"
    )]
    pub volume_mounts: Option<Vec<Obj<VolumeMount>>>,
}

/// A field E2B's spec does not mark nullable: absent is `None` (through `default`), a
/// present `null` is refused as E2B's request validator refuses it (400).
fn present_not_null<'de, D: Deserializer<'de>, T: Deserialize<'de>>(
    d: D,
) -> Result<Option<T>, D::Error> {
    T::deserialize(d).map(Some)
}

/// `SandboxAutoResumeConfig`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AutoResume {
    /// `SandboxAutoResumeEnabled` (required).
    pub enabled: bool,
}

/// `SandboxNetworkConfig`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NetworkConfig {
    /// Sandbox URLs reachable without authentication.
    #[serde(
        default,
        deserialize_with = "present_not_null",
        skip_serializing_if = "Option::is_none"
    )]
    pub allow_public_traffic: Option<bool>,
    /// Allowed egress destinations.
    #[serde(
        default,
        deserialize_with = "present_not_null",
        skip_serializing_if = "Option::is_none"
    )]
    pub allow_out: Option<Vec<String>>,
    /// Denied egress destinations.
    #[serde(
        default,
        deserialize_with = "present_not_null",
        skip_serializing_if = "Option::is_none"
    )]
    pub deny_out: Option<Vec<String>>,
    /// `SandboxEgressProxyConfig` (nullable).
    // Nullable in E2B's spec.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub egress_proxy: Option<Obj<EgressProxy>>,
    /// Host mask of the sandbox's requests.
    #[serde(
        default,
        deserialize_with = "present_not_null",
        skip_serializing_if = "Option::is_none"
    )]
    pub mask_request_host: Option<String>,
    /// Per-domain transform rules: a list of `SandboxNetworkRule` per domain.
    #[serde(
        default,
        deserialize_with = "present_not_null",
        skip_serializing_if = "Option::is_none"
    )]
    pub rules: Option<BTreeMap<String, Vec<Obj<NetworkRule>>>>,
}

/// `SandboxEgressProxyConfig`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EgressProxy {
    /// SOCKS5 proxy `host:port` (required).
    pub address: String,
    /// SOCKS5 user name.
    #[serde(
        default,
        deserialize_with = "present_not_null",
        skip_serializing_if = "Option::is_none"
    )]
    pub username: Option<String>,
    /// SOCKS5 password.
    #[serde(
        default,
        deserialize_with = "present_not_null",
        skip_serializing_if = "Option::is_none"
    )]
    pub password: Option<String>,
}

/// `SandboxNetworkRule`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NetworkRule {
    /// `SandboxNetworkTransform`: an object, never an array.
    #[serde(
        default,
        deserialize_with = "present_not_null",
        skip_serializing_if = "Option::is_none"
    )]
    pub transform: Option<Obj<NetworkTransform>>,
}

/// `SandboxNetworkTransform`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NetworkTransform {
    /// Headers to inject or override (string values).
    #[serde(
        default,
        deserialize_with = "present_not_null",
        skip_serializing_if = "Option::is_none"
    )]
    pub headers: Option<BTreeMap<String, String>>,
}

/// `SandboxIam`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Iam {
    /// `SandboxIamTokens`: token name -> definition.
    #[serde(
        default,
        deserialize_with = "present_not_null",
        skip_serializing_if = "Option::is_none"
    )]
    pub tokens: Option<BTreeMap<String, Obj<IamToken>>>,
}

/// `SandboxIamToken`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct IamToken {
    /// Audience of the workload token (required).
    pub audience: String,
    /// Workload token type (required).
    pub token_type: String,
}

/// `SandboxVolumeMount`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct VolumeMount {
    /// Name of the volume (required).
    pub name: String,
    /// Path of the volume (required).
    pub path: String,
}

#[cfg(test)]
mod tests {
    use crate::rest::NewSandbox;

    fn parse(body: &str) -> Result<NewSandbox, serde_json::Error> {
        serde_json::from_str(body)
    }

    /// E2B answers 400 to these; they used to be created.
    #[test]
    fn bodies_e2b_refuses_do_not_parse() {
        for bad in [
            r#"{"templateID":"base","iam":5}"#,
            r#"{"templateID":"base","network":{"rules":{"a.com":[{"transform":[]}]}}}"#,
            r#"{"templateID":"base","network":{"rules":{"a.com":{"transform":{}}}}}"#,
            r#"{"templateID":"base","autoResume":{}}"#,
            r#"{"templateID":"base","volumeMounts":[{"name":"v"}]}"#,
            r#"{"templateID":"base","iam":{"tokens":{"t":{"audience":"a"}}}}"#,
            r#"{"templateID":"base","mcp":[]}"#,
            r#"{"templateID":"base","network":[]}"#,
            r#"{"templateID":"base","volumeMounts":[["v","/d"]]}"#,
            r#"{"templateID":"base","volumeMounts":null}"#,
            r#"{"templateID":"base","network":null}"#,
            r#"{"templateID":"base","iam":{"tokens":null}}"#,
        ] {
            assert!(parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn every_property_of_the_spec_parses() {
        let ok = r#"{"templateID":"base","timeout":30,"autoPause":false,"autoPauseMemory":true,
            "autoResume":{"enabled":true},"secure":true,"allow_internet_access":true,
            "network":{"allowPublicTraffic":false,"allowOut":["8.8.8.8"],"denyOut":["0.0.0.0/0"],
              "egressProxy":{"address":"p:1080","username":"u"},"maskRequestHost":"h",
              "rules":{"api.example.com":[{"transform":{"headers":{"X":"y"}}}]}},
            "metadata":{"k":"v"},"envVars":{"A":"b"},"mcp":{"any":{"thing":1}},
            "iam":{"tokens":{"t":{"audience":"a","tokenType":"jwt"}}},
            "volumeMounts":[{"name":"v","path":"/data"}]}"#;
        let b = parse(ok).expect("parses");
        assert_eq!(b.extras.volume_mounts.map(|v| v.len()), Some(1));
        assert!(parse(r#"{"templateID":"base","mcp":null}"#).is_ok());
    }
}

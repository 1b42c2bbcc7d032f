//! `stampede run PROFILE --api URL`: any profile, embedded or not, run against an
//! E2B-compatible API with the same workload and checks.

use crate::profile::{ExternalPlacement, PlacementSection, Profile};

/// Turns a profile into an external run.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ApiOverride {
    /// API base URL (its host must be loopback or in the profile's `allow_targets`).
    pub url: String,
    /// Env var holding the API key; `None`: the profile's, else `STAMPEDE_API_KEY`.
    pub api_key_env: Option<String>,
    /// Env var holding the admin token for `GET /nodes`; `None`: the profile's, if any.
    pub admin_token_env: Option<String>,
    /// mock-node admin URLs to read per-node truth from instead of `GET /nodes`.
    pub mock_admin: Vec<String>,
    /// Env var holding the bearer token of those admin APIs; `None`: the profile's.
    pub mock_admin_token_env: Option<String>,
}

impl ApiOverride {
    /// `profile` with its placement replaced by this external API. The embedded
    /// `cluster` section no longer applies (the API's own nodes are measured); an
    /// external profile keeps its truth sources unless new ones are given.
    pub fn apply(&self, profile: &mut Profile) {
        let old = match &profile.placement {
            PlacementSection::External(x) => Some(x.clone()),
            PlacementSection::Embedded(_) => None,
        };
        let default_key = ExternalPlacement::default_api_key_env();
        let x = ExternalPlacement {
            url: self.url.clone(),
            api_key_env: self
                .api_key_env
                .clone()
                .or_else(|| old.as_ref().map(|o| o.api_key_env.clone()))
                .unwrap_or(default_key),
            admin_token_env: self
                .admin_token_env
                .clone()
                .or_else(|| old.as_ref().and_then(|o| o.admin_token_env.clone())),
            orchestrators: if self.mock_admin.is_empty() {
                old.as_ref()
                    .map(|o| o.orchestrators.clone())
                    .unwrap_or_default()
            } else {
                Vec::new()
            },
            mock_admin_token_env: self
                .mock_admin_token_env
                .clone()
                .or_else(|| old.as_ref().and_then(|o| o.mock_admin_token_env.clone())),
            mock_admin: if self.mock_admin.is_empty() {
                old.map(|o| o.mock_admin).unwrap_or_default()
            } else {
                self.mock_admin.clone()
            },
        };
        profile.placement = PlacementSection::External(x);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_embedded_profile_becomes_external_with_its_workload_and_checks() {
        let text = std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/profiles/nightly.yaml"
        ))
        .unwrap();
        let src = crate::profile::Source::inline("nightly.yaml", text);
        let mut p = crate::profile::parse(&src).unwrap();
        let (workload, checks) = (p.workload.clone(), p.checks.clone());
        ApiOverride {
            url: "http://127.0.0.1:3000".into(),
            admin_token_env: Some("ADMIN".into()),
            ..ApiOverride::default()
        }
        .apply(&mut p);
        let PlacementSection::External(x) = &p.placement else {
            panic!("not external: {:?}", p.placement)
        };
        assert_eq!(x.url, "http://127.0.0.1:3000");
        assert_eq!(x.api_key_env, "STAMPEDE_API_KEY");
        assert_eq!(x.admin_token_env.as_deref(), Some("ADMIN"));
        assert_eq!((&p.workload, &p.checks), (&workload, &checks));
        assert!(crate::profile::validate(&p, &src).is_empty());
    }
}

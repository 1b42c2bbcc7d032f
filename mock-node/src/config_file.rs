//! Reading a `cluster:` section from a YAML file, with errors that name file:line:col
//! and the field.

use std::path::Path;

use serde::Deserialize;

use crate::config::{ClusterConfig, SpecError};

/// Why a config file was refused.
#[derive(Debug, thiserror::Error)]
pub enum ConfigFileError {
    /// The file could not be read.
    #[error("{path}: {source}")]
    Read {
        /// File path.
        path: String,
        /// I/O error.
        source: std::io::Error,
    },
    /// YAML syntax or type error.
    #[error("{path}:{line}:{column}: {field}: {message}")]
    Parse {
        /// File path.
        path: String,
        /// 1-based line (0 when unknown).
        line: usize,
        /// 1-based column (0 when unknown).
        column: usize,
        /// Dotted path of the field (`.` for the document itself).
        field: String,
        /// What is wrong.
        message: String,
    },
    /// Well-formed but semantically invalid (`ClusterConfig::validate`).
    #[error("{path}: {}", .errors.iter().map(|e| e.to_string()).collect::<Vec<_>>().join("; "))]
    Invalid {
        /// File path.
        path: String,
        /// Every problem, each naming its field.
        errors: Vec<SpecError>,
    },
}

/// A run profile or a bare cluster file: only the `cluster:` section and the seed
/// matter here.
#[derive(Deserialize)]
struct ProfileShape {
    cluster: ClusterConfig,
    /// The profile's top-level seed, the fleet's when `cluster.seed` is absent.
    #[serde(default)]
    seed: u64,
}

/// Reads `path`: either a document with a top-level `cluster:` key (a run profile; other
/// keys are ignored) or a bare cluster section. The result's `seed` is the fleet seed
/// ([`ClusterConfig::fleet_seed`] of the profile's `seed`).
pub(crate) fn load_cluster(path: &Path) -> Result<ClusterConfig, ConfigFileError> {
    let label = path.display().to_string();
    let text =
        crate::regular_file::read_regular_to_string(path, "a fleet config").map_err(|source| {
            ConfigFileError::Read {
                path: label.clone(),
                source,
            }
        })?;
    parse_cluster(&text, &label)
}

/// Parses and validates YAML text; `label` names the source in errors.
pub fn parse_cluster(text: &str, label: &str) -> Result<ClusterConfig, ConfigFileError> {
    let value: serde_yaml_ng::Value =
        serde_yaml_ng::from_str(text).map_err(|e| ConfigFileError::Parse {
            path: label.to_string(),
            line: e.location().map_or(0, |l| l.line()),
            column: e.location().map_or(0, |l| l.column()),
            field: ".".to_string(),
            message: e.to_string(),
        })?;
    let wrapped = value
        .as_mapping()
        .is_some_and(|m| m.contains_key(serde_yaml_ng::Value::from("cluster")));
    let (cfg, prefix) = if wrapped {
        let profile = typed::<ProfileShape>(text, label)?;
        let mut cluster = profile.cluster;
        cluster.seed = Some(cluster.fleet_seed(profile.seed));
        (cluster, "cluster")
    } else if value.is_null() {
        (ClusterConfig::default(), "")
    } else {
        (typed::<ClusterConfig>(text, label)?, "")
    };
    let errors = cfg.validate(prefix);
    if errors.is_empty() {
        Ok(cfg)
    } else {
        Err(ConfigFileError::Invalid {
            path: label.to_string(),
            errors,
        })
    }
}

fn typed<T: serde::de::DeserializeOwned>(text: &str, label: &str) -> Result<T, ConfigFileError> {
    let de = serde_yaml_ng::Deserializer::from_str(text);
    serde_path_to_error::deserialize(de).map_err(|e| {
        let field = e.path().to_string();
        let inner = e.into_inner();
        let loc = inner.location();
        ConfigFileError::Parse {
            path: label.to_string(),
            line: loc.as_ref().map_or(0, |l| l.line()),
            column: loc.as_ref().map_or(0, |l| l.column()),
            field,
            message: strip_path(&strip_location(&inner.to_string())),
        }
    })
}

/// serde_yaml_ng prefixes messages with its own (partial) path; we print the full one.
fn strip_path(msg: &str) -> String {
    match msg.split_once(": ") {
        Some((head, rest)) if !head.contains(' ') => rest.to_string(),
        _ => msg.to_string(),
    }
}

/// serde_yaml_ng appends " at line L column C" to messages; we print it up front instead.
fn strip_location(msg: &str) -> String {
    match msg.find(" at line ") {
        Some(i) => msg[..i].to_string(),
        None => msg.to_string(),
    }
}

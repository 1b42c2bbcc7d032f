//! Why a simulation could not run.

use crate::profile::ProfileErrors;

/// Why `stampede sim` (or [`simulate`](super::simulate)) could not produce a result.
#[derive(Debug, thiserror::Error)]
pub enum SimError {
    /// The profile could not be loaded or is invalid (every problem, with file:line:col).
    #[error("{0}")]
    Profile(#[from] ProfileErrors),
    /// The profile targets an external API: there is nothing to simulate.
    #[error("placement.external: the simulator needs an embedded placement section")]
    ExternalPlacement,
    /// The workload shape is not simulated.
    #[error("workload.shape.{shape}: {message}")]
    UnsupportedShape {
        /// Shape name (`plan`).
        shape: &'static str,
        /// Why.
        message: String,
    },
    /// A setting is outside what the simulator (or the placement core) accepts.
    #[error("{field}: {message}")]
    Setting {
        /// Dotted path of the setting.
        field: String,
        /// What is wrong with it.
        message: String,
    },
    /// A chaos step cannot be applied.
    #[error("chaos[{index}]: {message}")]
    Chaos {
        /// Position of the step in `chaos:`.
        index: usize,
        /// What is wrong with it.
        message: String,
    },
    /// A `--sweep` argument is malformed.
    #[error("--sweep {arg}: {message}")]
    Sweep {
        /// The argument as given.
        arg: String,
        /// What is wrong with it.
        message: String,
    },
    /// Writing the report or the CSV failed.
    #[error("writing {what}: {source}")]
    Io {
        /// What was being written.
        what: String,
        /// The I/O error.
        source: std::io::Error,
    },
}

impl SimError {
    pub(crate) fn setting(field: impl Into<String>, message: impl Into<String>) -> Self {
        SimError::Setting {
            field: field.into(),
            message: message.into(),
        }
    }
}

//! Problems found in a profile, each naming its file, line, column and field path.

use std::fmt;
use std::path::PathBuf;

/// One problem in a profile: `profiles/x.yaml:12:5: placement.embedded.best_of_k.k: must be >= 1`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct ProfileIssue {
    /// File as the user named it.
    pub file: String,
    /// 1-based line, or 0 when unknown.
    pub line: usize,
    /// 1-based column, or 0 when unknown.
    pub col: usize,
    /// Dotted path of the offending field (`workload.shape.rate.duration`); empty for a
    /// problem of the whole document.
    pub field: String,
    /// What is wrong.
    pub message: String,
}

impl fmt::Display for ProfileIssue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut head = self.file.clone();
        if self.line > 0 && !head.is_empty() {
            head.push_str(&format!(":{}:{}", self.line, self.col));
        }
        for part in [head.as_str(), self.field.as_str()] {
            if !part.is_empty() {
                write!(f, "{part}: ")?;
            }
        }
        f.write_str(&self.message)
    }
}

/// Why a profile could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum ProfileError {
    /// The file could not be read.
    #[error("{}: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// No file at the path, and no shipped profile of that name.
    #[error("{}: no such profile file{}", path.display(), match suggestion {
        Some(s) => format!(" (did you mean `{s}`?)"),
        None => format!(" (shipped profiles: {})", super::SHIPPED.map(|s| s.0).join(", ")),
    })]
    NotFound {
        /// The path given.
        path: PathBuf,
        /// The closest existing or shipped name.
        suggestion: Option<String>,
    },
    /// The YAML is malformed or does not fit the profile format.
    #[error("{0}")]
    Parse(ProfileIssue),
}

/// Every problem of a profile at once (what `stampede validate` prints).
#[derive(Debug, thiserror::Error)]
pub enum ProfileErrors {
    /// The file could not be read or parsed; nothing else could be checked.
    #[error("{0}")]
    Load(#[from] ProfileError),
    /// The profile parsed but has semantic problems, all listed.
    #[error("{}", display_lines(.0))]
    Invalid(Vec<ProfileIssue>),
}

impl ProfileErrors {
    /// The individual problems (one for a load error).
    pub fn issues(&self) -> Vec<String> {
        match self {
            ProfileErrors::Load(e) => vec![e.to_string()],
            ProfileErrors::Invalid(v) => v.iter().map(ToString::to_string).collect(),
        }
    }
}

fn display_lines(issues: &[ProfileIssue]) -> String {
    issues
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("\n")
}

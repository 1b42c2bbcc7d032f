//! Reading a profile file: YAML syntax and types (serde), then semantic checks.

use std::path::Path;

use super::issue::{ProfileError, ProfileErrors, ProfileIssue};
use super::locate::Locator;
use super::types::Profile;
use super::validate::validate;

/// A profile's text and the name it is reported under.
#[derive(Debug, Clone)]
pub struct Source {
    /// File name as the user gave it (`profiles/x.yaml`).
    pub file: String,
    /// The YAML text.
    pub text: String,
}

impl Source {
    /// Read `path`.
    pub fn read(path: &Path) -> Result<Self, ProfileError> {
        let text = std::fs::read_to_string(path).map_err(|source| ProfileError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        Ok(Source {
            file: path.display().to_string(),
            text,
        })
    }

    /// A source held in memory (tests, generated profiles).
    pub fn inline(file: impl Into<String>, text: impl Into<String>) -> Self {
        Source {
            file: file.into(),
            text: text.into(),
        }
    }

    /// An issue at `field`, located in this source (line/col 0 when not found).
    pub fn issue_at(
        &self,
        locator: &Locator,
        field: &str,
        message: impl Into<String>,
    ) -> ProfileIssue {
        let pos = locator.find(field);
        ProfileIssue {
            file: self.file.clone(),
            line: pos.map_or(0, |p| p.line),
            col: pos.map_or(0, |p| p.col),
            field: field.to_string(),
            message: message.into(),
        }
    }
}

/// Parse and type-check a profile file (YAML syntax, unknown fields, types, durations).
/// Semantic limits are checked by [`validate`]; [`load_and_validate`] does both.
pub fn load(path: &Path) -> Result<Profile, ProfileError> {
    parse(&Source::read(path)?)
}

/// Parse a profile held in `source`. The error names `file:line:col: field.path: message`.
pub fn parse(source: &Source) -> Result<Profile, ProfileError> {
    let de = serde_yaml_ng::Deserializer::from_str(&source.text);
    serde_path_to_error::deserialize(de).map_err(|e| {
        let field = field_path(e.path());
        let inner = e.into_inner();
        let (line, col) = match inner.location() {
            Some(l) => (l.line(), l.column()),
            None => Locator::new(&source.text)
                .find(&field)
                .map_or((0, 0), |p| (p.line, p.col)),
        };
        let message = bare_message(&inner.to_string(), &field);
        ProfileError::Parse(ProfileIssue {
            file: source.file.clone(),
            line,
            col,
            field,
            message,
        })
    })
}

/// Load, type-check and validate `path`, returning every problem at once.
pub fn load_and_validate(path: &Path) -> Result<Profile, ProfileErrors> {
    let source = Source::read(path)?;
    let profile = parse(&source)?;
    let issues = validate(&profile, &source);
    if issues.is_empty() {
        Ok(profile)
    } else {
        Err(ProfileErrors::Invalid(issues))
    }
}

/// serde_path_to_error's path in our dotted form, skipping segments it could not name.
fn field_path(path: &serde_path_to_error::Path) -> String {
    use serde_path_to_error::Segment;
    let mut out = String::new();
    for seg in path {
        match seg {
            Segment::Seq { index } => out.push_str(&format!("[{index}]")),
            Segment::Map { key } => push_key(&mut out, key),
            Segment::Enum { variant } => push_key(&mut out, variant),
            Segment::Unknown => {}
        }
    }
    out
}

fn push_key(out: &mut String, key: &str) {
    if !out.is_empty() {
        out.push('.');
    }
    out.push_str(key);
}

/// serde_yaml_ng's message without its own `path: ` prefixes and ` at line L column C`
/// suffix, which we print in the `file:line:col: field:` form instead.
fn bare_message(display: &str, field: &str) -> String {
    let mut msg = display;
    if let Some(cut) = msg.rfind(" at line ") {
        if msg[cut..].contains(" column ") {
            msg = &msg[..cut];
        }
    }
    while let Some((head, rest)) = msg.split_once(": ") {
        let is_path = !head.is_empty()
            && head
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "._-[]".contains(c))
            && (field.starts_with(head) || head.contains('.') || head.contains('['));
        if !is_path {
            break;
        }
        msg = rest;
    }
    msg.to_string()
}

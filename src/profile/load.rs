//! Reading a profile file: YAML syntax and types (serde), then semantic checks.

use std::path::Path;

use super::issue::{ProfileError, ProfileErrors, ProfileIssue};
use super::limits::MAX_PROFILE_BYTES;
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
    /// Read `path`: at most [`MAX_PROFILE_BYTES`], UTF-8 (an invalid byte is reported
    /// at its line and column).
    pub fn read(path: &Path) -> Result<Self, ProfileError> {
        use std::io::Read;
        if !path.exists() {
            if let Some((name, text)) = super::shipped(path) {
                return Ok(Source::inline(format!("{name}.yaml (built in)"), text));
            }
            return Err(ProfileError::NotFound {
                path: path.to_path_buf(),
                suggestion: super::did_you_mean(path),
            });
        }
        let file = path.display().to_string();
        let io = |source| ProfileError::Read {
            path: path.to_path_buf(),
            source,
        };
        let mut bytes = Vec::new();
        open_regular(path)
            .and_then(|f| f.take(MAX_PROFILE_BYTES as u64 + 1).read_to_end(&mut bytes))
            .map_err(io)?;
        if bytes.len() > MAX_PROFILE_BYTES {
            return Err(ProfileError::Parse(too_large(&file)));
        }
        match String::from_utf8(bytes) {
            Ok(text) => Ok(Source { file, text }),
            Err(e) => {
                let at = e.utf8_error().valid_up_to();
                let bytes = e.as_bytes();
                let (line, col) = line_col(&bytes[..at]);
                Err(ProfileError::Parse(ProfileIssue {
                    file,
                    line,
                    col,
                    field: String::new(),
                    message: format!(
                        "not UTF-8: byte 0x{:02x} at offset {at} (a profile is UTF-8 text)",
                        bytes[at]
                    ),
                }))
            }
        }
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
///
/// The document's shape is checked first (size, nesting depth, one document, no
/// repeated key: [`Locator::problem`]), so that serde never sees a document it would
/// handle badly or report without a position.
pub fn parse(source: &Source) -> Result<Profile, ProfileError> {
    if source.text.len() > MAX_PROFILE_BYTES {
        return Err(ProfileError::Parse(too_large(&source.file)));
    }
    let locator = Locator::new(&source.text);
    if let Some(p) = locator.problem() {
        return Err(ProfileError::Parse(ProfileIssue {
            file: source.file.clone(),
            line: p.pos.line,
            col: p.pos.col,
            field: p.field.clone(),
            message: p.message.clone(),
        }));
    }
    let de = serde_yaml_ng::Deserializer::from_str(&source.text);
    serde_path_to_error::deserialize(de).map_err(|e| {
        let mut field = field_path(e.path());
        let inner = e.into_inner();
        let (message, inside) = bare_message(&inner.to_string(), &field);
        let serde_pos = inner.location().map(|l| (l.line(), l.column()));
        let (line, col) = match inside {
            // A field named by the message (a chaos step's `params.latency`): at its key
            // when the text has it, else where serde stopped.
            Some(sub) => {
                field = format!("{field}.{sub}");
                let pos = locator.find(&field).map(|p| (p.line, p.col));
                pos.or(serde_pos).unwrap_or((0, 0))
            }
            None => serde_pos
                .or_else(|| locator.find(&field).map(|p| (p.line, p.col)))
                .unwrap_or((0, 0)),
        };
        ProfileError::Parse(ProfileIssue {
            file: source.file.clone(),
            line,
            col,
            field,
            message,
        })
    })
}

/// The issue of a file over [`MAX_PROFILE_BYTES`].
fn too_large(file: &str) -> ProfileIssue {
    ProfileIssue {
        file: file.to_string(),
        line: 0,
        col: 0,
        field: String::new(),
        message: format!("larger than {MAX_PROFILE_BYTES} bytes; a profile is a small text file"),
    }
}

/// Opens `path` for reading only if it is a regular file (a FIFO would block the load).
fn open_regular(path: &Path) -> std::io::Result<std::fs::File> {
    mock_node::open_regular(path, "a profile")
}

/// 1-based line and column just after `prefix` (valid UTF-8).
fn line_col(prefix: &[u8]) -> (usize, usize) {
    let line_start = prefix
        .iter()
        .rposition(|&b| b == b'\n')
        .map_or(0, |i| i + 1);
    let line = prefix.iter().filter(|&&b| b == b'\n').count() + 1;
    let col = String::from_utf8_lossy(&prefix[line_start..])
        .chars()
        .count()
        + 1;
    (line, col)
}

/// Load, type-check and validate `path`, returning every problem at once.
pub fn load_and_validate(path: &Path) -> Result<Profile, ProfileErrors> {
    load_checked(path).map(|(profile, _)| profile)
}

/// [`load_and_validate`], with the profile's [`warnings`](super::warnings) (problems
/// that do not stop a run).
pub fn load_checked(path: &Path) -> Result<(Profile, Vec<ProfileIssue>), ProfileErrors> {
    let source = Source::read(path)?;
    let profile = parse(&source)?;
    let issues = validate(&profile, &source);
    if issues.is_empty() {
        let warnings = super::warn::warnings(&profile, &source);
        Ok((profile, warnings))
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
/// suffix, which we print in the `file:line:col: field:` form instead; and the field
/// inside `field` the message names, if it names one (a [`StepError`](super::StepError):
/// `params.latency: ...`), which is not one of those prefixes.
fn bare_message(display: &str, field: &str) -> (String, Option<String>) {
    let mut msg = display;
    if let Some(cut) = msg.rfind(" at line ") {
        if msg[cut..].contains(" column ") {
            msg = &msg[..cut];
        }
    }
    let mut inside = None;
    while let Some((head, rest)) = msg.split_once(": ") {
        let is_path = !head.is_empty()
            && head
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "._-[]".contains(c))
            && (field.starts_with(head) || head.contains('.') || head.contains('['));
        if !is_path {
            break;
        }
        if !field.starts_with(head) && !field.ends_with(head) {
            inside = Some(head.to_string());
        }
        msg = rest;
    }
    (msg.to_string(), inside)
}

//! Secrets: a bearer token that never shows up in logs or `Debug` output, the check
//! that refuses an empty one, and the one constant-time comparison every credential
//! check uses (mock-node's admin token, `stampede serve`'s API key and admin token).

use std::fmt;
use std::str::FromStr;

/// A secret refused at start; each variant names the setting.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EmptySecret {
    /// Empty or only whitespace: it would let an empty header in.
    #[error("{0} is empty or whitespace: give a real secret, or leave it unset")]
    Blank(&'static str),
    /// A character outside visible ASCII (a space, a control character, non-ASCII): an
    /// HTTP header carrying it is refused or altered on the way, so no request could
    /// ever match it.
    #[error("{0} has a character that is not visible ASCII (a space, a control character or non-ASCII): no HTTP header can carry it")]
    NotVisibleAscii(&'static str),
}

/// `Ok` unless `value` is empty, whitespace, or not visible ASCII; `what` names the
/// setting in the error.
pub fn validate_not_blank(what: &'static str, value: &str) -> Result<(), EmptySecret> {
    if value.trim().is_empty() {
        Err(EmptySecret::Blank(what))
    } else if !value.bytes().all(|b| b.is_ascii_graphic()) {
        Err(EmptySecret::NotVisibleAscii(what))
    } else {
        Ok(())
    }
}

/// Whether `given` equals `expected`, in a time that depends on their lengths only, not
/// on where they first differ (so a client cannot find a secret byte by byte by timing).
pub fn constant_time_eq(given: &[u8], expected: &[u8]) -> bool {
    let diff = given
        .iter()
        .zip(expected)
        .fold(0u8, |acc, (x, y)| acc | (x ^ y));
    // Kept opaque so the fold is not turned into an early-exit comparison.
    given.len() == expected.len() && std::hint::black_box(diff) == 0
}

/// A credential (an admin token, an API key). `Debug` and `Display` print `<redacted>`.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    /// A secret from its text.
    pub fn new(token: impl Into<String>) -> Self {
        Self(token.into())
    }

    /// The secret text, for the one place that sends it (a request header).
    pub fn expose(&self) -> &str {
        &self.0
    }

    /// A secret from its text, refused when blank or not visible ASCII; `what` names
    /// the setting in the error (`"the admin token"`).
    pub fn parse(what: &'static str, text: &str) -> Result<Self, EmptySecret> {
        validate_not_blank(what, text)?;
        Ok(Self(text.to_string()))
    }

    /// Reads the secret from the environment variable `var`; `None` when unset or empty.
    pub fn from_env(var: &str) -> Option<Self> {
        std::env::var(var).ok().filter(|v| !v.is_empty()).map(Self)
    }

    /// Whether `given` (a request header's value) is this secret, in constant time.
    pub fn matches(&self, given: &[u8]) -> bool {
        constant_time_eq(given, self.0.as_bytes())
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret(<redacted>)")
    }
}

impl fmt::Display for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("<redacted>")
    }
}

impl FromStr for Secret {
    type Err = EmptySecret;
    /// Refuses an empty or whitespace secret (`--admin-token ""`,
    /// `MOCK_NODE_ADMIN_TOKEN=`): it would read as "no secret" or let an empty one in.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        validate_not_blank("the secret", s)?;
        Ok(Self(s.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blank_tokens_are_refused() {
        for blank in ["", " ", "\t\n"] {
            assert!(blank.parse::<Secret>().is_err(), "{blank:?}");
        }
        assert!("t0k3n".parse::<Secret>().is_ok());
    }

    #[test]
    fn a_secret_no_header_can_carry_is_refused() {
        for odd in ["t0k 3n", "t0k\u{7f}", "clé", "tok\r\nX: y"] {
            assert_eq!(
                validate_not_blank("the key", odd),
                Err(EmptySecret::NotVisibleAscii("the key")),
                "{odd:?}"
            );
        }
    }

    #[test]
    fn debug_and_display_hide_the_secret() {
        let k = Secret::new("e2b_supersecret");
        assert!(!format!("{k:?}{k}").contains("supersecret"));
        assert_eq!(k.expose(), "e2b_supersecret");
        assert!(k.matches(b"e2b_supersecret"));
        assert!(!k.matches(b"e2b_supersecreT"));
    }

    #[test]
    fn constant_time_eq_is_equality() {
        assert!(constant_time_eq(b"abc", b"abc"));
        assert!(!constant_time_eq(b"abc", b"abd"));
        assert!(!constant_time_eq(b"abc", b"abcd"));
        assert!(!constant_time_eq(b"", b"a"));
        assert!(constant_time_eq(b"", b""));
    }
}

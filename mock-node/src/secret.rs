//! Secrets: a bearer token that never shows up in logs or `Debug` output, the check
//! that refuses an empty one, and the one constant-time comparison every credential
//! check uses (mock-node's admin token, `stampede serve`'s API key and admin token).

use std::fmt;
use std::str::FromStr;

/// A secret that is empty or only whitespace: it would let an empty header in.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0} is empty or whitespace: give a real secret, or leave it unset")]
pub struct EmptySecret(pub &'static str);

/// `Ok` unless `value` is empty or whitespace; `what` names the setting in the error.
pub fn validate_not_blank(what: &'static str, value: &str) -> Result<(), EmptySecret> {
    if value.trim().is_empty() {
        Err(EmptySecret(what))
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

/// The admin API token. `Debug` and `Display` print `<redacted>`.
#[derive(Clone, PartialEq, Eq)]
pub struct AdminToken(String);

impl AdminToken {
    /// A token from its text.
    pub fn new(token: impl Into<String>) -> Self {
        Self(token.into())
    }

    /// The token text, for comparing with a request header.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for AdminToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("AdminToken(<redacted>)")
    }
}

impl fmt::Display for AdminToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("<redacted>")
    }
}

impl FromStr for AdminToken {
    type Err = EmptySecret;
    /// Refuses an empty or whitespace token (`--admin-token ""`,
    /// `MOCK_NODE_ADMIN_TOKEN=`): it would read as "no token" or let an empty one in.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        validate_not_blank("the admin token", s)?;
        Ok(Self(s.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blank_tokens_are_refused() {
        for blank in ["", " ", "\t\n"] {
            assert!(blank.parse::<AdminToken>().is_err(), "{blank:?}");
        }
        assert!("t0k3n".parse::<AdminToken>().is_ok());
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

//! An API key that never shows up in output.

/// A secret read from an environment variable. `Debug` and `Display` print a
/// placeholder so the value cannot leak into logs or reports by accident.
#[derive(Clone, PartialEq, Eq)]
pub struct ApiKey(String);

impl ApiKey {
    /// Wraps a key.
    pub fn new(value: impl Into<String>) -> Self {
        ApiKey(value.into())
    }

    /// Reads the key from `var`; `None` when unset or empty.
    pub fn from_env(var: &str) -> Option<Self> {
        std::env::var(var)
            .ok()
            .filter(|v| !v.is_empty())
            .map(ApiKey)
    }

    /// The key itself, for the one place that sends it (a request header).
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for ApiKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ApiKey(<redacted>)")
    }
}

impl std::fmt::Display for ApiKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("<redacted>")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_and_display_hide_the_key() {
        let k = ApiKey::new("e2b_supersecret");
        assert!(!format!("{k:?}{k}").contains("supersecret"));
        assert_eq!(k.expose(), "e2b_supersecret");
    }
}

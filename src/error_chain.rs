//! An error and its sources as one line, for the places that keep a failure as text
//! (a report's read errors, a stage's message): `outer: cause: root cause`.

use std::error::Error;

/// `e`'s message followed by each of its sources', joined by `: `.
pub fn chain_text(e: &dyn Error) -> String {
    let mut out = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        out.push_str(": ");
        out.push_str(&c.to_string());
        cause = c.source();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::chain_text;

    #[derive(Debug, thiserror::Error)]
    #[error("outer")]
    struct Outer(#[source] std::io::Error);

    #[test]
    fn joins_every_source() {
        let e = Outer(std::io::Error::other("root"));
        assert_eq!(chain_text(&e), "outer: root");
    }
}

//! An error and its sources as one line, for the places that keep a failure as text
//! (a report's read errors, a stage's message): `outer: cause: root cause`.

use std::error::Error;

/// `e`'s message followed by each of its sources', joined by `: `. A source whose text
/// the line already holds is left out: errors that print their cause as well as
/// returning it (reqwest's, hyper's) would otherwise repeat it, `status 401: status 401`.
pub fn chain_text(e: &dyn Error) -> String {
    let mut out = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        let text = c.to_string();
        if !text.is_empty() && !out.contains(&text) {
            out.push_str(": ");
            out.push_str(&text);
        }
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

    #[derive(Debug, thiserror::Error)]
    #[error("GET /nodes: {0}")]
    struct Repeats(#[source] std::io::Error);

    #[test]
    fn a_cause_the_line_already_holds_is_not_repeated() {
        let e = Repeats(std::io::Error::other("status 401 Unauthorized"));
        assert_eq!(chain_text(&e), "GET /nodes: status 401 Unauthorized");
    }
}

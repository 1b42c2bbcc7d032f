//! Prometheus text exposition (format 0.0.4): the one line writer every `/metrics`
//! endpoint of the project uses (mock-node's fleet truth, `stampede serve`, a run's
//! metrics).
//!
//! Label values are escaped as the text format requires (backslash, double quote and
//! line feed), so a node id such as `edge"node\\1` cannot break the exposition.
//!
//! The `prometheus-client` crate was weighed: its registry holds live metric objects,
//! while these figures are a snapshot computed at each scrape; a custom collector would
//! be more code than this writer.

use std::fmt::Write;

/// `value` escaped for a label value of the text format: `\` -> `\\`, `"` -> `\"`,
/// line feed -> `\n`.
pub fn escape_label_value(value: &str) -> std::borrow::Cow<'_, str> {
    if !value.contains(['\\', '"', '\n']) {
        return value.into();
    }
    let mut out = String::with_capacity(value.len() + 8);
    for c in value.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    out.into()
}

/// Writes the `# HELP` and `# TYPE` lines of a metric family.
pub fn write_header(out: &mut String, name: &str, kind: &str, help: &str) {
    let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}");
}

/// Writes one sample line, `name{labels} value`, escaping every label value.
pub fn write_sample(
    out: &mut String,
    name: &str,
    labels: &[(&str, &str)],
    value: impl std::fmt::Display,
) {
    out.push_str(name);
    if !labels.is_empty() {
        out.push('{');
        for (i, (k, v)) in labels.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            let _ = write!(out, "{k}=\"{}\"", escape_label_value(v));
        }
        out.push('}');
    }
    let _ = writeln!(out, " {value}");
}

#[cfg(test)]
mod tests {
    use super::escape_label_value;

    #[test]
    fn label_values_are_escaped_as_the_text_format_requires() {
        assert_eq!(escape_label_value("node-01"), "node-01");
        assert_eq!(
            escape_label_value("edge\"node\\1\nx"),
            "edge\\\"node\\\\1\\nx"
        );
    }
}

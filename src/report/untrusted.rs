//! Strings a report carries from outside (node ids, labels, check names) made safe for
//! where they are written: no control characters for a terminal, and table cells that
//! stay one cell in Markdown.

/// `s` without control characters: ESC (so no ANSI colour or OSC sequence such as
/// `ESC ]52`, the clipboard), BEL, carriage returns and the rest; a newline or tab
/// becomes a space.
pub fn plain(s: &str) -> String {
    s.chars()
        .filter_map(|c| match c {
            '\n' | '\t' => Some(' '),
            c if c.is_control() => None,
            c => Some(c),
        })
        .collect()
}

/// `s` as one cell of a GitHub-flavoured Markdown table: [`plain`] (one line), with
/// `|` and backticks escaped (a bound's `<=` stays as written).
pub fn markdown_cell(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in plain(s).chars() {
        match c {
            '|' => out.push_str("\\|"),
            '`' => out.push_str("\\`"),
            c => out.push(c),
        }
    }
    out
}

/// A writer for a terminal: every control character but the newline is dropped from
/// what goes through it (a tab becomes a space), so no id or label can move the cursor,
/// colour the text or reach the clipboard (`ESC ]52`), whatever table it sits in.
#[derive(Debug)]
pub struct PlainWriter<W> {
    inner: W,
}

impl<W: std::io::Write> PlainWriter<W> {
    /// Wraps `inner`.
    pub fn new(inner: W) -> Self {
        PlainWriter { inner }
    }
}

impl<W: std::io::Write> std::io::Write for PlainWriter<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let keep = |c: char| match c {
            '\n' => Some('\n'),
            '\t' => Some(' '),
            c if c.is_control() => None,
            c => Some(c),
        };
        match std::str::from_utf8(buf) {
            Ok(text) => {
                let clean: String = text.chars().filter_map(keep).collect();
                self.inner.write_all(clean.as_bytes())?;
            }
            // Not text (a write split inside a character): ASCII controls go all the same.
            Err(_) => {
                let clean: Vec<u8> = buf
                    .iter()
                    .copied()
                    .filter(|b| *b == b'\n' || !b.is_ascii_control())
                    .collect();
                self.inner.write_all(&clean)?;
            }
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

/// `s` as one line inside a Markdown code fence or code span: [`plain`] (so it cannot
/// start a line of its own) with backticks as `'` (so it cannot close the fence).
pub fn code_line(s: &str) -> String {
    plain(s).replace('`', "'")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_plain_writer_lets_no_escape_through() {
        use std::io::Write;
        let mut out = Vec::new();
        let mut w = PlainWriter::new(&mut out);
        write!(w, "node-\u{1b}]52;c;eA==\u{7}x\u{9b}31m\tend\r\nnext").unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "node-]52;c;eA==x31m end\nnext"
        );
    }

    #[test]
    fn escapes_and_osc_never_reach_the_terminal() {
        let id = "node\u{1b}]52;c;aGk=\u{7}\u{1b}[31mred\r\nnext";
        let p = plain(id);
        assert!(!p.chars().any(char::is_control), "{p:?}");
        assert_eq!(p, "node]52;c;aGk=[31mred next");
    }

    #[test]
    fn a_cell_with_a_pipe_a_newline_and_a_fence_stays_one_cell() {
        let cell = markdown_cell("a|b\n```\n<script>");
        assert_eq!(cell, "a\\|b \\`\\`\\` <script>");
        assert!(!cell.contains('\n'));
    }

    #[test]
    fn a_node_id_with_a_newline_and_a_fence_does_not_close_the_fence() {
        let line = code_line("n1\n```\n<b>x</b>");
        assert!(!line.contains('`') && !line.contains('\n'), "{line:?}");
    }
}

//! Line-anchored edits of Go files in a build tree: each edit names the line it hangs
//! on, and the edit fails, saying what it looked for, unless that line is found
//! exactly as many times as the edit expects. stampede's probe and fix variants are
//! made of these, so that a revision whose code moved fails loudly instead of building
//! something else.

use std::path::{Path, PathBuf};

/// What an edit does at its anchor.
#[derive(Debug, Clone, Copy)]
pub enum At {
    /// Insert the text (one or more lines) before the anchor line, at its indent.
    Before,
    /// Insert the text after the anchor line, at its indent.
    After,
    /// Replace `from` with `to` inside the anchor line.
    Swap(&'static str, &'static str),
    /// Insert the text after the first line at or below the anchor whose trimmed text
    /// is `end` (the end of a statement that spans lines), at the anchor's indent.
    AfterEnd(&'static str),
}

/// One edit: in `file`, at every line whose trimmed text starts with `anchor`.
#[derive(Debug, Clone)]
pub struct Edit {
    /// File relative to the tree.
    pub file: &'static str,
    /// The anchor line's start (trimmed).
    pub anchor: String,
    /// How many lines must match.
    pub count: usize,
    /// What to do there.
    pub at: At,
    /// The text to insert (lines joined with `\n`, without indent).
    pub text: String,
}

impl Edit {
    /// An edit expected to match exactly one line.
    pub fn once(
        file: &'static str,
        anchor: impl Into<String>,
        at: At,
        text: impl Into<String>,
    ) -> Self {
        Edit {
            file,
            anchor: anchor.into(),
            count: 1,
            at,
            text: text.into(),
        }
    }
}

/// Why an edit could not be made.
#[derive(Debug, thiserror::Error)]
pub enum EditError {
    /// A file cannot be read or written.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// Cause.
        #[source]
        source: std::io::Error,
    },
    /// The anchor was not found as often as expected.
    #[error("{file}: found `{anchor}` {found} times where the edit expects {expected}")]
    Anchor {
        /// The file, relative to the tree.
        file: &'static str,
        /// The anchor.
        anchor: String,
        /// Matches found.
        found: usize,
        /// Matches expected.
        expected: usize,
    },
    /// A multi-line statement's end was not found below its anchor.
    #[error("{file}: no line `{end}` below `{anchor}`")]
    NoEnd {
        /// The file, relative to the tree.
        file: &'static str,
        /// The anchor.
        anchor: String,
        /// The end looked for.
        end: &'static str,
    },
}

/// Applies `edits` in order to the tree at `root`.
pub fn apply(root: &Path, edits: &[Edit]) -> Result<(), EditError> {
    for e in edits {
        let path = root.join(e.file);
        let text = std::fs::read_to_string(&path).map_err(|source| EditError::Io {
            path: path.clone(),
            source,
        })?;
        let out = apply_one(&text, e)?;
        std::fs::write(&path, out).map_err(|source| EditError::Io { path, source })?;
    }
    Ok(())
}

/// Writes a new file at `rel` under `root` (its folders made).
pub fn add_file(root: &Path, rel: &str, text: &str) -> Result<(), EditError> {
    let path = root.join(rel);
    let io = |source| EditError::Io {
        path: path.clone(),
        source,
    };
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(io)?;
    }
    std::fs::write(&path, text).map_err(io)
}

fn apply_one(text: &str, e: &Edit) -> Result<String, EditError> {
    let lines: Vec<&str> = text.split_inclusive('\n').collect();
    let hits: Vec<usize> = (0..lines.len())
        .filter(|&i| lines[i].trim_start().starts_with(e.anchor.as_str()))
        .collect();
    if hits.len() != e.count {
        return Err(EditError::Anchor {
            file: e.file,
            anchor: e.anchor.clone(),
            found: hits.len(),
            expected: e.count,
        });
    }
    let indented = |i: usize| {
        let indent: String = lines[i].chars().take_while(|c| c.is_whitespace()).collect();
        e.text
            .lines()
            .map(|l| format!("{indent}{l}\n"))
            .collect::<String>()
    };
    // Insertions keyed by the line they go before; swaps by line.
    let mut before: Vec<(usize, String)> = Vec::new();
    let mut swapped: Vec<(usize, String)> = Vec::new();
    for &i in &hits {
        match e.at {
            At::Before => before.push((i, indented(i))),
            At::After => before.push((i + 1, indented(i))),
            At::Swap(from, to) => {
                if !lines[i].contains(from) {
                    return Err(EditError::Anchor {
                        file: e.file,
                        anchor: from.to_string(),
                        found: 0,
                        expected: 1,
                    });
                }
                swapped.push((i, lines[i].replacen(from, to, 1)));
            }
            At::AfterEnd(end) => {
                let j = (i..lines.len())
                    .find(|&j| lines[j].trim() == end)
                    .ok_or_else(|| EditError::NoEnd {
                        file: e.file,
                        anchor: e.anchor.clone(),
                        end,
                    })?;
                before.push((j + 1, indented(i)));
            }
        }
    }
    let mut out = String::with_capacity(text.len() + e.text.len() * hits.len() * 2);
    for (i, line) in lines.iter().enumerate() {
        for (_, t) in before.iter().filter(|(at, _)| *at == i) {
            out.push_str(t);
        }
        match swapped.iter().find(|(at, _)| *at == i) {
            Some((_, l)) => out.push_str(l),
            None => out.push_str(line),
        }
    }
    for (_, t) in before.iter().filter(|(at, _)| *at == lines.len()) {
        out.push_str(t);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    const GO: &str = "func f() {\n\tx := 1\n\tg(a,\n\t\tb,\n\t)\n\treturn\n}\n";

    fn edit(anchor: &str, at: At, text: &str) -> Edit {
        Edit::once("f.go", anchor, at, text)
    }

    #[test]
    fn insertions_take_the_anchors_indent() {
        let out = apply_one(GO, &edit("x := 1", At::Before, "y := 0\nz := 0")).unwrap();
        assert!(out.contains("\ty := 0\n\tz := 0\n\tx := 1\n"), "{out}");
        let out = apply_one(GO, &edit("x := 1", At::After, "y := 0")).unwrap();
        assert!(out.contains("\tx := 1\n\ty := 0\n"), "{out}");
    }

    #[test]
    fn after_end_lands_below_the_statement() {
        let out = apply_one(GO, &edit("g(a,", At::AfterEnd(")"), "h()")).unwrap();
        assert!(out.contains("\t)\n\th()\n\treturn"), "{out}");
    }

    #[test]
    fn a_swap_changes_only_its_line() {
        let out = apply_one(GO, &edit("g(a,", At::Swap("a,", "c,"), "")).unwrap();
        assert!(out.contains("\tg(c,\n"), "{out}");
    }

    #[test]
    fn a_missing_or_repeated_anchor_is_refused() {
        let err = apply_one(GO, &edit("nothing here", At::Before, "x")).unwrap_err();
        assert!(
            err.to_string().contains("found `nothing here` 0 times"),
            "{err}"
        );
        let twice = edit("b", At::Before, "x");
        let text = "a\nb\nb\n";
        let err = apply_one(text, &twice).unwrap_err();
        assert!(
            err.to_string().contains("2 times where the edit expects 1"),
            "{err}"
        );
    }
}

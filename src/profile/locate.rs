//! Positions of the keys of a YAML document, by dotted field path, and the problems of
//! the document's shape that serde reports badly or not at all.
//!
//! serde forgets where a value came from; a semantic problem found after parsing
//! (`k: 0`) still has to be reported at `file:line:col`. This walks the document with
//! yaml-rust2's event parser, which keeps a marker per event, and records where each
//! mapping key (or sequence item) starts.
//!
//! Paths are stored as a tree (each key once, under its parent), so indexing is linear
//! in the document; the walk stops at [`MAX_YAML_DEPTH`] levels, at a second document
//! and at a repeated key, and says where ([`Locator::problem`]).

use std::collections::HashMap;

use yaml_rust2::parser::{Event, Parser};
use yaml_rust2::scanner::Marker;

use super::limits::MAX_YAML_DEPTH;

/// A 1-based line and column in a source file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Position {
    /// Line, counting from 1.
    pub line: usize,
    /// Column, counting from 1.
    pub col: usize,
}

/// Something wrong with the shape of the document, found while indexing it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShapeProblem {
    /// Dotted path where it is (the repeated key, the too-deep value); empty for the
    /// document as a whole.
    pub field: String,
    /// Where it is.
    pub pos: Position,
    /// What is wrong.
    pub message: String,
}

/// Where every field path of one YAML document starts.
#[derive(Debug, Clone, Default)]
pub struct Locator {
    /// Child of `(node, segment)`; node 0 is the document root. A segment is a mapping
    /// key or a sequence index written `[i]`.
    children: HashMap<(u32, String), u32>,
    /// Position of every node but the root (node `i` at `positions[i - 1]`).
    positions: Vec<Position>,
    /// The first shape problem, if any.
    problem: Option<ShapeProblem>,
}

impl Locator {
    /// Index `text`. A document the event parser rejects yields the positions found
    /// before the error (serde reports the syntax error itself).
    pub fn new(text: &str) -> Self {
        let mut walker = Walker::default();
        if let Some(pos) = flow_too_deep(text) {
            walker.too_deep(String::new(), pos);
            return walker.locator;
        }
        let mut parser = Parser::new_from_str(text);
        loop {
            match parser.next_token() {
                // yaml-rust2 refuses flow nesting past 255 levels, before any event of it.
                Err(e) if e.info().contains("recursion limit") => {
                    walker.too_deep(String::new(), position(*e.marker()));
                    break;
                }
                // Another scan error only truncates the index; serde_yaml_ng reports it.
                Err(_) | Ok((Event::StreamEnd, _)) => break,
                Ok((ev, mark)) => {
                    walker.on_event(ev, mark);
                    if walker.locator.problem.is_some() {
                        break;
                    }
                }
            }
        }
        walker.locator
    }

    /// Position of `path` (`workload.shape.rate.duration`, `chaos[1].nodes[0]`), or of
    /// its longest prefix present in the document (a defaulted field is reported where
    /// its parent is written), or `None` when not even the first segment is there.
    pub fn find(&self, path: &str) -> Option<Position> {
        let mut node = 0u32;
        let mut found = None;
        for seg in segments(path) {
            match self.children.get(&(node, seg.to_string())) {
                Some(&child) => {
                    node = child;
                    found = self.positions.get(child as usize - 1).copied();
                }
                None => break,
            }
        }
        found
    }

    /// The first problem of the document's shape: nesting deeper than
    /// [`MAX_YAML_DEPTH`], a key repeated in one mapping, or a second document.
    pub fn problem(&self) -> Option<&ShapeProblem> {
        self.problem.as_ref()
    }

    /// Number of paths indexed (for tests).
    pub fn len(&self) -> usize {
        self.positions.len()
    }

    /// Whether nothing was indexed.
    pub fn is_empty(&self) -> bool {
        self.positions.is_empty()
    }

    /// The child `seg` of `parent`, created at `pos` if new; `Err` with the existing
    /// child when it is there already.
    fn child(&mut self, parent: u32, seg: String, pos: Position) -> Result<u32, u32> {
        let next = self.positions.len() as u32 + 1;
        match self.children.entry((parent, seg)) {
            std::collections::hash_map::Entry::Occupied(e) => Err(*e.get()),
            std::collections::hash_map::Entry::Vacant(e) => {
                e.insert(next);
                self.positions.push(pos);
                Ok(next)
            }
        }
    }
}

/// The segments of a dotted path: `chaos[1].nodes` is `chaos`, `[1]`, `nodes`.
fn segments(path: &str) -> impl Iterator<Item = &str> {
    let mut rest = path;
    std::iter::from_fn(move || {
        let r = rest.strip_prefix('.').unwrap_or(rest);
        if r.is_empty() {
            return None;
        }
        let end = if r.starts_with('[') {
            r.find(']').map_or(r.len(), |i| i + 1)
        } else {
            r.find(['.', '[']).unwrap_or(r.len())
        };
        let (seg, tail) = r.split_at(end);
        rest = tail;
        Some(seg)
    })
}

/// Flow brackets nesting past this many levels are refused before any YAML parser
/// sees them: both scanners revisit every open flow level per token (quadratic), and
/// yaml-rust2 gives up at 255 levels before emitting the events the walker counts.
/// Four times [`MAX_YAML_DEPTH`], as the count is lexical (a bracket in a block scalar
/// counts too); deeper nesting below it is refused by the walk, at the exact level.
const FLOW_GUARD_DEPTH: usize = 4 * MAX_YAML_DEPTH;

/// Where `[`/`{` (outside quotes and comments) first nest past [`FLOW_GUARD_DEPTH`].
fn flow_too_deep(text: &str) -> Option<Position> {
    let (mut depth, mut line, mut col) = (0usize, 1usize, 0usize);
    let mut quote: Option<char> = None;
    let (mut escaped, mut comment) = (false, false);
    let mut prev = ' ';
    for c in text.chars() {
        if c == '\n' {
            line += 1;
            col = 0;
            comment = false;
            prev = ' ';
            if quote == Some('"') {
                escaped = false;
            }
            continue;
        }
        col += 1;
        if comment {
            continue;
        }
        match quote {
            Some('"') if escaped => escaped = false,
            Some('"') if c == '\\' => escaped = true,
            Some(q) if c == q => quote = None,
            Some(_) => {}
            None => match c {
                '#' if prev.is_whitespace() => comment = true,
                '\'' | '"' if prev.is_whitespace() || "[{,:-?".contains(prev) => quote = Some(c),
                '[' | '{' => {
                    depth += 1;
                    if depth > FLOW_GUARD_DEPTH {
                        return Some(Position { line, col });
                    }
                }
                ']' | '}' => depth = depth.saturating_sub(1),
                _ => {}
            },
        }
        prev = c;
    }
    None
}

/// One open container while walking events.
#[derive(Debug)]
enum Frame {
    /// A mapping at tree node `node` (with dotted path `path`); `key` is the node of the
    /// pending key once read, `None` while a key is expected next.
    Map {
        node: u32,
        path: String,
        key: Option<(u32, String)>,
    },
    /// A sequence at tree node `node` and the index of the next item.
    Seq {
        node: u32,
        path: String,
        next: usize,
    },
}

#[derive(Debug, Default)]
struct Walker {
    stack: Vec<Frame>,
    locator: Locator,
    /// Depth of complex keys (a mapping or sequence used as a key) being skipped.
    skipping: usize,
    /// Documents started.
    documents: usize,
    /// Complex keys seen, numbering their placeholders.
    complex_keys: usize,
}

fn position(mark: Marker) -> Position {
    Position {
        line: mark.line(),
        col: mark.col() + 1,
    }
}

fn join(parent: &str, key: &str) -> String {
    if parent.is_empty() {
        key.to_string()
    } else {
        format!("{parent}.{key}")
    }
}

impl Walker {
    fn too_deep(&mut self, field: String, pos: Position) {
        self.locator.problem = Some(ShapeProblem {
            field,
            pos,
            message: format!(
                "nested deeper than {MAX_YAML_DEPTH} levels (a profile is at most 7 deep)"
            ),
        });
    }

    /// The tree node and path of a value that starts now, recording a sequence item's
    /// position; `None` when this event is a mapping key (not a value).
    fn value_node(&mut self, mark: Marker) -> Option<(u32, String)> {
        let pos = position(mark);
        match self.stack.last_mut() {
            None => Some((0, String::new())),
            Some(Frame::Seq { node, path, next }) => {
                let seg = format!("[{next}]");
                let p = format!("{path}{seg}");
                *next += 1;
                let parent = *node;
                let child = self
                    .locator
                    .child(parent, seg, pos)
                    .unwrap_or_else(|existing| existing);
                Some((child, p))
            }
            Some(Frame::Map { key, .. }) => key.take(),
        }
    }

    fn open(&mut self, seq: bool, mark: Marker) {
        if self.skipping > 0 {
            self.skipping += 1;
            return;
        }
        if self.stack.len() >= MAX_YAML_DEPTH {
            let field = match self.stack.last() {
                Some(Frame::Map { path, .. } | Frame::Seq { path, .. }) => path.clone(),
                None => String::new(),
            };
            self.too_deep(field, position(mark));
            return;
        }
        match self.value_node(mark) {
            Some((node, path)) => self.stack.push(if seq {
                Frame::Seq {
                    node,
                    path,
                    next: 0,
                }
            } else {
                Frame::Map {
                    node,
                    path,
                    key: None,
                }
            }),
            // A mapping or sequence used as a key: not something profiles use.
            None => self.skipping = 1,
        }
    }

    fn close(&mut self, mark: Marker) {
        if self.skipping > 0 {
            self.skipping -= 1;
            if self.skipping == 0 {
                // The complex key is done; its value follows under a placeholder key of
                // its own (`?` and a number, never a duplicate).
                self.complex_keys += 1;
                let seg = format!("?{}", self.complex_keys);
                if let Some(Frame::Map { node, path, key }) = self.stack.last_mut() {
                    let p = join(path, &seg);
                    let child = self
                        .locator
                        .child(*node, seg, position(mark))
                        .unwrap_or_else(|existing| existing);
                    *key = Some((child, p));
                }
            }
            return;
        }
        self.stack.pop();
    }

    fn scalar(&mut self, value: String, mark: Marker) {
        if self.skipping > 0 {
            return;
        }
        let pos = position(mark);
        if let Some(Frame::Map { node, path, key }) = self.stack.last_mut() {
            if key.is_none() {
                let p = join(path, &value);
                let parent = *node;
                match self.locator.child(parent, value.clone(), pos) {
                    Ok(child) => *key = Some((child, p)),
                    Err(_) => {
                        self.locator.problem = Some(ShapeProblem {
                            field: p,
                            pos,
                            message: format!("duplicate key `{value}`: each key may appear once"),
                        });
                    }
                }
                return;
            }
        }
        let _ = self.value_node(mark);
    }

    fn on_event(&mut self, ev: Event, mark: Marker) {
        match ev {
            Event::DocumentStart => {
                self.documents += 1;
                if self.documents > 1 {
                    self.locator.problem = Some(ShapeProblem {
                        field: String::new(),
                        pos: position(mark),
                        message: "a second YAML document starts here; a profile is one document"
                            .into(),
                    });
                }
            }
            Event::MappingStart(..) => self.open(false, mark),
            Event::SequenceStart(..) => self.open(true, mark),
            Event::MappingEnd | Event::SequenceEnd => self.close(mark),
            Event::Scalar(value, ..) => self.scalar(value, mark),
            Event::Alias(_) if self.skipping == 0 => {
                let _ = self.value_node(mark);
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn segments_split_keys_and_indices() {
        let s: Vec<&str> = segments("chaos[1].nodes[0]").collect();
        assert_eq!(s, ["chaos", "[1]", "nodes", "[0]"]);
        assert_eq!(segments("").count(), 0);
        assert_eq!(segments("a").collect::<Vec<_>>(), ["a"]);
    }

    #[test]
    fn finds_keys_items_and_longest_prefix() {
        let l = Locator::new("a:\n  b: 1\n  c: [x, y]\n");
        assert_eq!(l.find("a.b"), Some(Position { line: 2, col: 3 }));
        assert_eq!(l.find("a.c[1]"), Some(Position { line: 3, col: 10 }));
        assert_eq!(l.find("a.zz.q"), Some(Position { line: 1, col: 1 }));
        assert_eq!(l.find("nope"), None);
        assert!(l.problem().is_none());
    }
}

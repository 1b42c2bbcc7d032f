//! Positions of the keys of a YAML document, by dotted field path.
//!
//! serde forgets where a value came from; a semantic problem found after parsing
//! (`k: 0`) still has to be reported at `file:line:col`. This walks the document with
//! yaml-rust2's event parser, which keeps a marker per event, and records where each
//! mapping key (or sequence item) starts.

use std::collections::BTreeMap;

use yaml_rust2::parser::{Event, MarkedEventReceiver, Parser};
use yaml_rust2::scanner::Marker;

/// A 1-based line and column in a source file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Position {
    /// Line, counting from 1.
    pub line: usize,
    /// Column, counting from 1.
    pub col: usize,
}

/// Where every field path of one YAML document starts.
#[derive(Debug, Clone, Default)]
pub struct Locator {
    positions: BTreeMap<String, Position>,
}

impl Locator {
    /// Index `text`. A document the event parser rejects yields the positions found
    /// before the error (serde reports the syntax error itself).
    pub fn new(text: &str) -> Self {
        let mut walker = Walker::default();
        let mut parser = Parser::new_from_str(text);
        // A scan error only truncates the index; serde_yaml_ng reports it properly.
        let _ = parser.load(&mut walker, false);
        Locator {
            positions: walker.positions,
        }
    }

    /// Position of `path` (`workload.shape.rate.duration`, `chaos[1].nodes[0]`), or of
    /// its longest prefix present in the document (a defaulted field is reported where
    /// its parent is written), or `None` when not even the first segment is there.
    pub fn find(&self, path: &str) -> Option<Position> {
        let mut p = path;
        loop {
            if let Some(pos) = self.positions.get(p) {
                return Some(*pos);
            }
            let cut = p.rfind(['.', '['])?;
            p = &p[..cut];
        }
    }

    /// Number of paths indexed (for tests).
    pub fn len(&self) -> usize {
        self.positions.len()
    }

    /// Whether nothing was indexed.
    pub fn is_empty(&self) -> bool {
        self.positions.is_empty()
    }
}

/// One open container while walking events.
#[derive(Debug)]
enum Frame {
    /// A mapping at `path`; `key` is the pending key once read, `None` while a key is
    /// expected next.
    Map { path: String, key: Option<String> },
    /// A sequence at `path` and the index of the next item.
    Seq { path: String, next: usize },
}

#[derive(Debug, Default)]
struct Walker {
    stack: Vec<Frame>,
    positions: BTreeMap<String, Position>,
    /// Depth of complex keys (a mapping or sequence used as a key) being skipped.
    skipping: usize,
}

impl Walker {
    /// The path of a value that starts now, recording the key/item position; `None`
    /// when this event is a mapping key (not a value).
    fn value_path(&mut self, mark: Marker) -> Option<String> {
        let pos = Position {
            line: mark.line(),
            col: mark.col() + 1,
        };
        match self.stack.last_mut() {
            None => Some(String::new()),
            Some(Frame::Seq { path, next }) => {
                let p = format!("{path}[{next}]");
                *next += 1;
                self.positions.entry(p.clone()).or_insert(pos);
                Some(p)
            }
            Some(Frame::Map { path, key }) => key.take().map(|k| join(path, &k)),
        }
    }

    fn open(&mut self, frame_of: impl FnOnce(String) -> Frame, mark: Marker) {
        if self.skipping > 0 {
            self.skipping += 1;
            return;
        }
        match self.value_path(mark) {
            Some(p) => self.stack.push(frame_of(p)),
            // A mapping or sequence used as a key: not something profiles use.
            None => self.skipping = 1,
        }
    }

    fn close(&mut self) {
        if self.skipping > 0 {
            self.skipping -= 1;
            if self.skipping == 0 {
                // The complex key is done; its value follows under a placeholder key.
                if let Some(Frame::Map { key, .. }) = self.stack.last_mut() {
                    *key = Some("?".into());
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
        let pos = Position {
            line: mark.line(),
            col: mark.col() + 1,
        };
        if let Some(Frame::Map { path, key }) = self.stack.last_mut() {
            if key.is_none() {
                self.positions.entry(join(path, &value)).or_insert(pos);
                *key = Some(value);
                return;
            }
        }
        let _ = self.value_path(mark);
    }
}

impl MarkedEventReceiver for Walker {
    fn on_event(&mut self, ev: Event, mark: Marker) {
        match ev {
            Event::MappingStart(..) => self.open(|path| Frame::Map { path, key: None }, mark),
            Event::SequenceStart(..) => self.open(|path| Frame::Seq { path, next: 0 }, mark),
            Event::MappingEnd | Event::SequenceEnd => self.close(),
            Event::Scalar(value, ..) => self.scalar(value, mark),
            Event::Alias(_) if self.skipping == 0 => {
                let _ = self.value_path(mark);
            }
            _ => {}
        }
    }
}

fn join(parent: &str, key: &str) -> String {
    if parent.is_empty() {
        key.to_string()
    } else {
        format!("{parent}.{key}")
    }
}

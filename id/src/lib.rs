//! [`Id`]: a node or sandbox id that lives inline when short.
//!
//! The placement core, the node model and the simulator key their per-node maps by
//! node and sandbox ids and copy them at every create, reply and delete. A `String` costs
//! an allocation per copy and a pointer chase per comparison; an `Id` of up to
//! [`INLINE`] bytes (E2B's sandbox ids are 21, node ids shorter) is a 24-byte value with
//! no heap behind it, so copying one is a memcpy. Longer ids (a client may send up to
//! the node's limit) share one heap string.
//!
//! An `Id` hashes, compares and orders exactly as its text does (it is `Borrow<str>`),
//! so a map keyed by `Id` is looked up with a `&str` and iterates, sorts and
//! serializes as the `String` map did.
#![deny(missing_docs)]

use std::borrow::Borrow;
use std::cmp::Ordering;
use std::fmt;
use std::hash::{Hash, Hasher};
use std::ops::Deref;
use std::sync::Arc;

mod map;
pub use map::IdMap;

/// Longest id held inline, in bytes.
pub const INLINE: usize = 22;

/// A node or sandbox id: text, held inline up to [`INLINE`] bytes.
#[derive(Clone)]
pub struct Id(Repr);

#[derive(Clone)]
enum Repr {
    Inline { len: u8, buf: [u8; INLINE] },
    Heap(Arc<str>),
}

impl Id {
    /// The empty id.
    pub const EMPTY: Id = Id(Repr::Inline {
        len: 0,
        buf: [0; INLINE],
    });

    /// `s` as an id (allocates only past [`INLINE`] bytes).
    pub fn new(s: &str) -> Self {
        if s.len() <= INLINE {
            let mut buf = [0; INLINE];
            buf[..s.len()].copy_from_slice(s.as_bytes());
            Id(Repr::Inline {
                len: s.len() as u8,
                buf,
            })
        } else {
            Id(Repr::Heap(Arc::from(s)))
        }
    }

    /// The id `format_args!(...)` writes, built in place (no allocation when it fits).
    pub fn from_args(args: fmt::Arguments<'_>) -> Self {
        if let Some(s) = args.as_str() {
            return Id::new(s);
        }
        let mut w = InlineWriter {
            len: 0,
            buf: [0; INLINE],
            overflow: None,
        };
        // Writing into the buffer or the overflow string cannot fail.
        let _ = fmt::write(&mut w, args);
        match w.overflow {
            Some(s) => Id(Repr::Heap(Arc::from(s))),
            None => Id(Repr::Inline {
                len: w.len as u8,
                buf: w.buf,
            }),
        }
    }

    /// The id's text.
    pub fn as_str(&self) -> &str {
        match &self.0 {
            Repr::Inline { len, buf } => {
                let bytes = &buf[..*len as usize];
                debug_assert!(std::str::from_utf8(bytes).is_ok());
                // SAFETY: an inline id's bytes are only ever written by `Id::new` and
                // `InlineWriter::write_str`, each of which copies whole `&str`s, so
                // `buf[..len]` is UTF-8. Checking it again on every hash and compare
                // was 3% of the simulator's time.
                unsafe { std::str::from_utf8_unchecked(bytes) }
            }
            Repr::Heap(s) => s,
        }
    }

    /// Whether the id is held inline (no heap behind it).
    pub fn is_inline(&self) -> bool {
        matches!(self.0, Repr::Inline { .. })
    }
}

/// A `fmt::Write` into an inline buffer that spills to a `String` when full.
struct InlineWriter {
    len: usize,
    buf: [u8; INLINE],
    overflow: Option<String>,
}

impl fmt::Write for InlineWriter {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        if let Some(o) = &mut self.overflow {
            o.push_str(s);
        } else if self.len + s.len() <= INLINE {
            self.buf[self.len..self.len + s.len()].copy_from_slice(s.as_bytes());
            self.len += s.len();
        } else {
            let mut o = String::with_capacity(self.len + s.len());
            // The buffer only ever received whole `&str`s.
            o.push_str(std::str::from_utf8(&self.buf[..self.len]).map_err(|_| fmt::Error)?);
            o.push_str(s);
            self.overflow = Some(o);
        }
        Ok(())
    }
}

/// `Id::from_args(format_args!(...))`: an [`Id`] formatted in place.
#[macro_export]
macro_rules! format_id {
    ($($arg:tt)*) => {
        $crate::Id::from_args(::std::format_args!($($arg)*))
    };
}

impl Default for Id {
    fn default() -> Self {
        Id::EMPTY
    }
}

impl Deref for Id {
    type Target = str;
    fn deref(&self) -> &str {
        self.as_str()
    }
}

impl AsRef<str> for Id {
    fn as_ref(&self) -> &str {
        self.as_str()
    }
}

impl Borrow<str> for Id {
    fn borrow(&self) -> &str {
        self.as_str()
    }
}

impl Hash for Id {
    // As `str` hashes: `Borrow<str>` lookups must find the entry.
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.as_str().hash(state);
    }
}

impl PartialEq for Id {
    fn eq(&self, other: &Self) -> bool {
        match (&self.0, &other.0) {
            // An id is inline exactly when it fits, and the bytes past an inline id's
            // length are always zero (`Id::new`, `InlineWriter`): equal ids have equal
            // buffers, compared as fixed-size arrays (no `memcmp` call).
            (Repr::Inline { len: a, buf: x }, Repr::Inline { len: b, buf: y }) => a == b && x == y,
            (Repr::Heap(x), Repr::Heap(y)) => x == y,
            _ => false,
        }
    }
}

impl Eq for Id {}

impl PartialOrd for Id {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Id {
    fn cmp(&self, other: &Self) -> Ordering {
        self.as_str().cmp(other.as_str())
    }
}

impl PartialEq<str> for Id {
    fn eq(&self, other: &str) -> bool {
        self.as_str() == other
    }
}

impl PartialEq<&str> for Id {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

impl PartialEq<String> for Id {
    fn eq(&self, other: &String) -> bool {
        self.as_str() == other.as_str()
    }
}

impl PartialEq<Id> for str {
    fn eq(&self, other: &Id) -> bool {
        self == other.as_str()
    }
}

impl PartialEq<Id> for &str {
    fn eq(&self, other: &Id) -> bool {
        *self == other.as_str()
    }
}

impl PartialEq<Id> for String {
    fn eq(&self, other: &Id) -> bool {
        self.as_str() == other.as_str()
    }
}

impl From<&str> for Id {
    fn from(s: &str) -> Self {
        Id::new(s)
    }
}

impl From<&String> for Id {
    fn from(s: &String) -> Self {
        Id::new(s)
    }
}

impl From<String> for Id {
    fn from(s: String) -> Self {
        if s.len() <= INLINE {
            Id::new(&s)
        } else {
            Id(Repr::Heap(Arc::from(s)))
        }
    }
}

impl From<&Id> for Id {
    fn from(s: &Id) -> Self {
        s.clone()
    }
}

impl From<Id> for String {
    fn from(id: Id) -> Self {
        id.as_str().to_string()
    }
}

impl fmt::Debug for Id {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.as_str(), f)
    }
}

impl fmt::Display for Id {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self.as_str(), f)
    }
}

impl serde::Serialize for Id {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl<'de> serde::Deserialize<'de> for Id {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Visit;
        impl serde::de::Visitor<'_> for Visit {
            type Value = Id;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an id string")
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Id, E> {
                Ok(Id::new(v))
            }
            fn visit_string<E: serde::de::Error>(self, v: String) -> Result<Id, E> {
                Ok(Id::from(v))
            }
        }
        d.deserialize_str(Visit)
    }
}

#[cfg(test)]
mod tests {
    use super::{Id, INLINE};
    use std::collections::{BTreeSet, HashMap};

    #[test]
    fn short_ids_are_inline_and_long_ones_are_not() {
        let short = "x".repeat(INLINE);
        let long = "x".repeat(INLINE + 1);
        assert!(Id::new(&short).is_inline());
        assert!(!Id::new(&long).is_inline());
        assert_eq!(Id::new(&long).as_str(), long);
        assert_eq!(Id::from(long.clone()).as_str(), long);
        assert_eq!(std::mem::size_of::<Id>(), 24);
    }

    #[test]
    fn equal_texts_are_equal_ids_whichever_way_they_were_built() {
        for text in ["", "node-03", &"x".repeat(INLINE), &"y".repeat(INLINE + 9)] {
            let built = [
                Id::new(text),
                Id::from(text.to_string()),
                format_id!("{text}"),
                serde_json::from_str::<Id>(&format!("\"{text}\"")).unwrap(),
            ];
            for a in &built {
                for b in &built {
                    assert_eq!(a, b, "{text}");
                }
                assert_ne!(*a, Id::new("other"));
            }
        }
        assert_ne!(Id::new("ab"), Id::new("abc"));
        assert_ne!(Id::new("abc"), Id::new("abd"));
    }

    #[test]
    fn formatted_ids_match_format_and_spill_past_the_inline_length() {
        for req in [0u64, 7, 12_345_678, 10u64.pow(18) + 1] {
            let id = format_id!("sb-{req:08}");
            assert_eq!(id.as_str(), format!("sb-{req:08}"));
            assert!(id.is_inline());
        }
        let long = format_id!("{}-{}", "a".repeat(20), "b".repeat(20));
        assert_eq!(
            long.as_str(),
            format!("{}-{}", "a".repeat(20), "b".repeat(20))
        );
        assert!(!long.is_inline());
    }

    #[test]
    fn hashes_orders_and_serializes_as_its_text() {
        let mut m: HashMap<Id, u32> = HashMap::new();
        m.insert(Id::new("node-03"), 3);
        m.insert(Id::new(&"n".repeat(40)), 40);
        assert_eq!(m.get("node-03"), Some(&3));
        assert_eq!(m.get("n".repeat(40).as_str()), Some(&40));
        let words = ["b", "a", "ab", "", "node-10", "node-9", "é"];
        let ids: BTreeSet<Id> = words.iter().map(|&w| Id::new(w)).collect();
        let strs: BTreeSet<&str> = words.iter().copied().collect();
        assert!(ids.iter().map(Id::as_str).eq(strs.iter().copied()));
        let json = serde_json::to_string(&Id::new("sb-1")).unwrap();
        assert_eq!(json, "\"sb-1\"");
        assert_eq!(serde_json::from_str::<Id>(&json).unwrap(), "sb-1");
    }
}

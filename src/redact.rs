//! Credentials in URLs (`http://user:PASSWORD@host`, as `--api` and `--mock-admin` may
//! be given) never reach a report, a log or an error line: every text the harness
//! writes about a URL goes through [`redact_userinfo`].

use std::borrow::Cow;

/// What replaces the userinfo of a URL.
pub const REDACTED: &str = "***";

/// `text` with the userinfo of every `scheme://userinfo@host` in it replaced by
/// [`REDACTED`] (`http://***@host`); text without one is returned as is.
pub fn redact_userinfo(text: &str) -> Cow<'_, str> {
    let mut out = String::new();
    let mut rest = text;
    let mut changed = false;
    while let Some(i) = rest.find("://") {
        let start = i + 3;
        let authority_len = rest[start..]
            .find(|c: char| {
                matches!(c, '/' | '?' | '#') || c.is_whitespace() || "\"')>,;".contains(c)
            })
            .unwrap_or(rest.len() - start);
        let authority = &rest[start..start + authority_len];
        match authority.rfind('@') {
            Some(at) => {
                out.push_str(&rest[..start]);
                out.push_str(REDACTED);
                out.push_str(&authority[at..]);
                changed = true;
            }
            None => out.push_str(&rest[..start + authority_len]),
        }
        rest = &rest[start + authority_len..];
    }
    if !changed {
        return Cow::Borrowed(text);
    }
    out.push_str(rest);
    Cow::Owned(out)
}

/// Redacts every string of a JSON value in place (a report before it is written).
pub fn redact_json(v: &mut serde_json::Value) {
    match v {
        serde_json::Value::String(s) => {
            if let Cow::Owned(r) = redact_userinfo(s) {
                *s = r;
            }
        }
        serde_json::Value::Array(a) => a.iter_mut().for_each(redact_json),
        serde_json::Value::Object(m) => {
            let keys: Vec<String> = m.keys().cloned().collect();
            for k in keys {
                let Some(mut value) = m.remove(&k) else {
                    continue;
                };
                redact_json(&mut value);
                m.insert(redact_userinfo(&k).into_owned(), value);
            }
        }
        _ => {}
    }
}

/// A writer that redacts what goes through it line by line (the log's stderr).
pub struct RedactingWriter<W: std::io::Write>(pub W);

impl<W: std::io::Write> std::io::Write for RedactingWriter<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let text = String::from_utf8_lossy(buf);
        self.0.write_all(redact_userinfo(&text).as_bytes())?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.0.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn userinfo_is_redacted_wherever_a_url_appears() {
        let cases = [
            (
                "http://user:PASS@127.0.0.1:3000",
                "http://***@127.0.0.1:3000",
            ),
            (
                "GET http://u:p@h:1/nodes failed (for url (http://u:p@h:1/nodes))",
                "GET http://***@h:1/nodes failed (for url (http://***@h:1/nodes))",
            ),
            ("a https://tok@x.y/z?q=a@b b", "a https://***@x.y/z?q=a@b b"),
            ("http://host:1/path@x", "http://host:1/path@x"),
            ("no url here @ all", "no url here @ all"),
            ("\"http://a:b@c\"", "\"http://***@c\""),
        ];
        for (text, want) in cases {
            assert_eq!(redact_userinfo(text), want, "{text}");
        }
        assert!(matches!(redact_userinfo("http://h/x"), Cow::Borrowed(_)));
    }

    #[test]
    fn every_string_of_a_json_value_is_redacted() {
        let mut v = serde_json::json!({
            "target": "http://u:SECRET@h",
            "list": ["x", "https://a:SECRET@b/c"],
            "http://k:SECRET@h": 1,
            "n": 3
        });
        redact_json(&mut v);
        assert!(!v.to_string().contains("SECRET"), "{v}");
        assert_eq!(v["n"], 3);
    }
}

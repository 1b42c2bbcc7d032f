//! E2B's API log, compacted as it streams. E2B's logger runs zap in development mode in
//! every environment (`packages/shared/pkg/logger`), so every WARN carries a stack
//! trace: one per refused retry, up to a gigabyte per retry-storm run. The log is kept
//! as shipped; stampede keeps counts per message (and per node for messages that name
//! one), the first lines, every line a verb needs (the initial sync), and drops the
//! stack traces.

use std::collections::BTreeMap;
use std::time::{Instant, SystemTime};

use serde::Serialize;

/// Entry lines kept verbatim from the start of the log.
const HEAD_LINES: usize = 200;
/// Longest kept line, bytes (longer ones are cut).
const LINE_CAP: usize = 2000;

/// The message E2B's API logs as it runs its first node sync (`orchestrator/cache.go`,
/// `keepInSync`); its periodic syncs follow every 20 s (`cacheSyncTime`).
pub const E2B_INITIAL_SYNC: &str = "Running the initial node sync";

/// The compacted log of one API process.
#[derive(Debug, Clone, Default, Serialize)]
pub struct LogSummary {
    /// Lines read (entries and continuation lines).
    pub lines: u64,
    /// Bytes read.
    pub bytes: u64,
    /// Continuation lines dropped (stack traces, wrapped text).
    pub dropped_lines: u64,
    /// Entries per `LEVEL message`.
    pub messages: BTreeMap<String, u64>,
    /// For messages that name a node (`"node.id": "..."`): entries per node.
    pub per_node: BTreeMap<String, BTreeMap<String, u64>>,
    /// The first entry lines, verbatim (cut at 2000 bytes).
    pub head: Vec<String>,
    /// Every ERROR-or-worse entry line up to 200.
    pub errors: Vec<String>,
    /// The first continuation lines (a panic's or an error's stack), up to 200.
    pub traces: Vec<String>,
}

/// The compactor: feed it lines; it notes when the sync line appears. Every kept line
/// has the run's secrets blanked: E2B's panic recovery prints the request's headers,
/// the API key among them.
#[derive(Debug)]
pub struct LogCompactor {
    summary: LogSummary,
    secrets: Vec<String>,
    sync_line: String,
    /// When the sync line was read (monotonic and wall clock).
    pub sync_seen: Option<(Instant, SystemTime)>,
}

impl LogCompactor {
    /// A compactor that watches for `sync_line` (a substring of the entry).
    pub fn new(sync_line: &str) -> Self {
        LogCompactor {
            summary: LogSummary::default(),
            secrets: Vec::new(),
            sync_line: sync_line.to_string(),
            sync_seen: None,
        }
    }

    /// Blanks `secret` in every line kept from now on.
    pub fn redact(&mut self, secret: &str) {
        if !secret.is_empty() {
            self.secrets.push(secret.to_string());
        }
    }

    /// Takes one line (without its newline).
    pub fn line(&mut self, line: &str) {
        if self.secrets.iter().any(|k| line.contains(k.as_str())) {
            let mut clean = line.to_string();
            for k in &self.secrets {
                clean = clean.replace(k.as_str(), "***");
            }
            return self.line_clean(&clean);
        }
        self.line_clean(line)
    }

    fn line_clean(&mut self, line: &str) {
        let s = &mut self.summary;
        s.lines += 1;
        s.bytes += line.len() as u64 + 1;
        if self.sync_seen.is_none() && !self.sync_line.is_empty() && line.contains(&self.sync_line)
        {
            self.sync_seen = Some((Instant::now(), SystemTime::now()));
        }
        let clean = strip_ansi(line);
        let Some((level, message, fields)) = parse_entry(&clean) else {
            s.dropped_lines += 1;
            if s.traces.len() < HEAD_LINES {
                s.traces.push(cap(&clean).to_string());
            }
            return;
        };
        let key = format!("{level} {message}");
        *s.messages.entry(key.clone()).or_default() += 1;
        if let Some(node) = field(fields, "node.id") {
            *s.per_node
                .entry(key)
                .or_default()
                .entry(node.to_string())
                .or_default() += 1;
        }
        let cut = || cap(&clean).to_string();
        if s.head.len() < HEAD_LINES {
            s.head.push(cut());
        }
        if matches!(level, "ERROR" | "DPANIC" | "PANIC" | "FATAL") && s.errors.len() < HEAD_LINES {
            s.errors.push(cut());
        }
    }

    /// The summary so far.
    pub fn summary(&self) -> &LogSummary {
        &self.summary
    }
}

fn cap(line: &str) -> &str {
    if line.len() <= LINE_CAP {
        return line;
    }
    let mut end = LINE_CAP;
    while !line.is_char_boundary(end) {
        end -= 1;
    }
    &line[..end]
}

/// `line` without ANSI colour sequences (E2B's console encoder colours the level).
fn strip_ansi(line: &str) -> std::borrow::Cow<'_, str> {
    if !line.contains('\u{1b}') {
        return std::borrow::Cow::Borrowed(line);
    }
    let mut out = String::with_capacity(line.len());
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            // CSI: ESC [ ... final byte in '@'..='~'.
            for d in chars.by_ref() {
                if ('@'..='~').contains(&d) && d != '[' {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    std::borrow::Cow::Owned(out)
}

/// `(level, message, fields)` of an entry line of zap's console encoder: `TIME`,
/// `LEVEL`, an optional `CALLER`, `MESSAGE` and JSON `FIELDS`, separated by tabs (zap's
/// default) or by two spaces (E2B's `GetConsoleEncoderConfig`, which also colours the
/// level and omits the caller); `None` for a continuation line.
fn parse_entry(line: &str) -> Option<(&str, &str, &str)> {
    const LEVELS: [&str; 7] = ["DEBUG", "INFO", "WARN", "ERROR", "DPANIC", "PANIC", "FATAL"];
    let parts: Vec<&str> = if line.contains('\t') {
        line.split('\t').collect()
    } else {
        line.split("  ").filter(|p| !p.is_empty()).collect()
    };
    let mut parts = parts.into_iter();
    let time = parts.next()?;
    if !time.starts_with(|c: char| c.is_ascii_digit()) || !time.contains(':') {
        return None;
    }
    let level = parts.next()?.trim();
    let level = LEVELS.into_iter().find(|l| *l == level)?;
    let mut rest: Vec<&str> = parts.collect();
    if rest
        .first()
        .is_some_and(|c| c.contains(".go:") && !c.contains(' '))
    {
        rest.remove(0);
    }
    let message = rest.first().copied().unwrap_or("").trim();
    let fields = rest.get(1).copied().unwrap_or("");
    Some((level, message, fields))
}

/// The string value of `"key": "value"` in a zap JSON fields text.
fn field<'a>(fields: &'a str, key: &str) -> Option<&'a str> {
    let pat = format!("\"{key}\": \"");
    let start = fields.find(&pat)? + pat.len();
    let len = fields[start..].find('"')?;
    Some(&fields[start..start + len])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_messages_per_node_and_drops_stack_traces() {
        let mut c = LogCompactor::new(E2B_INITIAL_SYNC);
        let lines = [
            "2026-12-04T20:40:01.123Z\tINFO\torchestrator/cache.go:34\tRunning the initial node sync",
            "2026-12-04T20:40:02.000Z\tWARN\tplacement/placement.go:172\tNode exhausted, trying another node\t{\"sandbox.id\": \"i1\", \"node.id\": \"node-03\", \"error\": \"[ResourceExhausted] too many\"}",
            "github.com/e2b-dev/infra/packages/api/internal/orchestrator/placement.PlaceSandbox",
            "\t/src/packages/api/internal/orchestrator/placement/placement.go:172",
            "2026-12-04T20:40:02.001Z\tWARN\tplacement/placement.go:172\tNode exhausted, trying another node\t{\"sandbox.id\": \"i2\", \"node.id\": \"node-03\"}",
            "2026-12-04T20:40:02.002Z\tERROR\tx.go:1\tboom",
        ];
        for l in lines {
            c.line(l);
        }
        let s = c.summary();
        assert!(c.sync_seen.is_some());
        assert_eq!(s.lines, 6);
        assert_eq!(s.dropped_lines, 2);
        assert_eq!(s.messages["WARN Node exhausted, trying another node"], 2);
        assert_eq!(
            s.per_node["WARN Node exhausted, trying another node"]["node-03"],
            2
        );
        assert_eq!(s.errors.len(), 1);
        assert_eq!(s.head.len(), 4);
    }

    #[test]
    fn reads_e2b_console_lines_with_coloured_levels_and_two_space_separators() {
        let mut c = LogCompactor::new(E2B_INITIAL_SYNC);
        c.line("2026-12-04T21:49:40.123Z  \u{1b}[33mWARN\u{1b}[0m  Node exhausted, trying another node  {\"node.id\": \"node-01\"}");
        c.line("2026-12-04T21:49:40.124Z  \u{1b}[34mINFO\u{1b}[0m  Running the initial node sync  {\"service\": \"api\"}");
        let s = c.summary();
        assert_eq!(s.dropped_lines, 0);
        assert_eq!(
            s.per_node["WARN Node exhausted, trying another node"]["node-01"],
            1
        );
        assert_eq!(s.messages["INFO Running the initial node sync"], 1);
        assert!(!s.head[0].contains('\u{1b}'));
    }

    #[test]
    fn secrets_are_blanked_in_every_kept_line() {
        let mut c = LogCompactor::new(E2B_INITIAL_SYNC);
        c.redact("e2b_sekrit");
        c.line("X-Api-Key: e2b_sekrit");
        c.line("2026-12-04T21:49:40.123Z  ERROR  boom key=e2b_sekrit");
        let text = serde_json::to_string(c.summary()).unwrap();
        assert!(!text.contains("sekrit"), "{text}");
        assert!(text.contains("X-Api-Key: ***"), "{text}");
    }

    #[test]
    fn a_line_without_a_time_is_a_continuation() {
        assert!(parse_entry("\t/src/x.go:12").is_none());
        assert!(parse_entry("goroutine 1 [running]:").is_none());
        assert_eq!(
            parse_entry("2026-12-04T20:40:01Z\tINFO\tready").map(|e| e.1),
            Some("ready")
        );
    }
}

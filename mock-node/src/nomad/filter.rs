//! Nomad's `filter` query parameter: the go-bexpr expression language, evaluated on the
//! JSON form of each listed object.
//!
//! Grammar (go-bexpr, as Nomad documents it under "Filtering"): `or`, `and`, `not`,
//! parentheses, and match expressions `Sel == V`, `Sel != V`, `Sel contains V`,
//! `Sel not contains V`, `V in Sel`, `V not in Sel`, `Sel is empty`, `Sel is not empty`,
//! `Sel matches V`, `Sel not matches V`. A selector is a dotted path (`Meta.x`) or a
//! bracketed key (`Meta["x"]`); a value is a double-quoted or backquoted string, a
//! number, `true`/`false`, or a bare word. Parsing and evaluation errors carry the text
//! Nomad wraps them in, so a caller sees the same 400 it would see from a real agent.

use serde_json::Value;

/// Why a filter was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum FilterError {
    /// The expression does not parse (Nomad: "failed to read filter expression").
    #[error("failed to read filter expression: {0}")]
    Syntax(String),
    /// A selector names a field the object does not have (Nomad: "error finding value
    /// in datum").
    #[error("error finding value in datum: /{path} at part {part}: couldn't find key: struct field with name \"{field}\"")]
    UnknownField {
        /// The selector, slash-separated.
        path: String,
        /// Index of the missing part.
        part: usize,
        /// The missing field.
        field: String,
    },
    /// A literal that cannot be compared with the field's type.
    #[error("error evaluating expression: {0}")]
    Mismatch(String),
    /// Compiling or evaluating took more than [`FILTER_CPU_BUDGET`] of CPU (mock-node's
    /// own bound; Nomad sets none).
    #[error("mock-node: the filter took more than its {} ms CPU budget", FILTER_CPU_BUDGET.as_millis())]
    OverBudget,
}

/// A parsed filter expression.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Expr {
    /// Both hold.
    And(Box<Expr>, Box<Expr>),
    /// Either holds.
    Or(Box<Expr>, Box<Expr>),
    /// Negation.
    Not(Box<Expr>),
    /// One match expression.
    Match {
        /// The field path.
        selector: Vec<String>,
        /// The operator.
        op: Op,
        /// The literal (empty for `is empty`).
        value: String,
    },
}

/// A match operator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Op {
    /// `==`
    Equal,
    /// `!=`
    NotEqual,
    /// `contains` (and `V in Sel`)
    Contains,
    /// `not contains` (and `V not in Sel`)
    NotContains,
    /// `is empty`
    IsEmpty,
    /// `is not empty`
    IsNotEmpty,
    /// `matches` (a regular expression)
    Matches,
    /// `not matches`
    NotMatches,
}

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Word(String),
    Str(String),
    Op(&'static str),
    LParen,
    RParen,
    LBracket,
    RBracket,
    Dot,
}

fn lex(s: &str) -> Result<Vec<(usize, Tok)>, FilterError> {
    let mut out = Vec::new();
    let b: Vec<char> = s.chars().collect();
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        let at = i;
        match c {
            ' ' | '\t' | '\r' | '\n' => i += 1,
            '(' | ')' | '[' | ']' | '.' => {
                let t = match c {
                    '(' => Tok::LParen,
                    ')' => Tok::RParen,
                    '[' => Tok::LBracket,
                    ']' => Tok::RBracket,
                    _ => Tok::Dot,
                };
                out.push((at, t));
                i += 1;
            }
            '=' | '!' => {
                if b.get(i + 1) == Some(&'=') {
                    out.push((at, Tok::Op(if c == '=' { "==" } else { "!=" })));
                    i += 2;
                } else {
                    return Err(syntax(at, "expected \"==\" or \"!=\""));
                }
            }
            '"' => {
                let mut v = String::new();
                i += 1;
                loop {
                    match b.get(i) {
                        None => return Err(syntax(at, "unterminated string")),
                        Some('"') => break,
                        Some('\\') => {
                            match b.get(i + 1) {
                                Some(&e @ ('"' | '\\')) => v.push(e),
                                Some('n') => v.push('\n'),
                                Some('t') => v.push('\t'),
                                _ => return Err(syntax(i, "invalid escape")),
                            }
                            i += 2;
                            continue;
                        }
                        Some(&ch) => v.push(ch),
                    }
                    i += 1;
                }
                out.push((at, Tok::Str(v)));
                i += 1;
            }
            '`' => {
                let rest: String = b[i + 1..].iter().collect();
                let Some(end) = rest.find('`') else {
                    return Err(syntax(at, "unterminated string"));
                };
                out.push((at, Tok::Str(rest[..end].to_string())));
                i += 1 + rest[..end].chars().count() + 1;
            }
            c if c.is_ascii_alphanumeric() || c == '_' || c == '-' || c == '/' => {
                let mut w = String::new();
                while let Some(&ch) = b.get(i) {
                    if ch.is_ascii_alphanumeric() || ch == '_' || ch == '-' || ch == '/' {
                        w.push(ch);
                        i += 1;
                    } else {
                        break;
                    }
                }
                out.push((at, Tok::Word(w)));
            }
            _ => return Err(syntax(at, &format!("unexpected character {c:?}"))),
        }
    }
    Ok(out)
}

fn syntax(at: usize, msg: &str) -> FilterError {
    FilterError::Syntax(format!("1:{} ({at}): {msg}", at + 1))
}

/// Deepest nesting of parentheses and `not` accepted: the parser recurses, and a URL
/// can carry tens of thousands of `(`. Deeper is a syntax error, not a stack overflow.
const MAX_DEPTH: usize = 64;

struct Parser {
    toks: Vec<(usize, Tok)>,
    pos: usize,
    len: usize,
    depth: usize,
}

impl Parser {
    fn peek(&self) -> Option<&Tok> {
        self.toks.get(self.pos).map(|(_, t)| t)
    }
    fn at(&self) -> usize {
        self.toks.get(self.pos).map_or(self.len, |(a, _)| *a)
    }
    fn word_is(&self, w: &str) -> bool {
        matches!(self.peek(), Some(Tok::Word(x)) if x == w)
    }
    fn bump(&mut self) -> Option<Tok> {
        let t = self.toks.get(self.pos).map(|(_, t)| t.clone());
        self.pos += 1;
        t
    }

    fn or(&mut self) -> Result<Expr, FilterError> {
        let mut e = self.and()?;
        while self.word_is("or") {
            self.bump();
            e = Expr::Or(Box::new(e), Box::new(self.and()?));
        }
        Ok(e)
    }
    fn and(&mut self) -> Result<Expr, FilterError> {
        let mut e = self.not()?;
        while self.word_is("and") {
            self.bump();
            e = Expr::And(Box::new(e), Box::new(self.not()?));
        }
        Ok(e)
    }
    fn not(&mut self) -> Result<Expr, FilterError> {
        self.depth += 1;
        let e = self.not_inner();
        self.depth -= 1;
        e
    }
    fn not_inner(&mut self) -> Result<Expr, FilterError> {
        if self.depth > MAX_DEPTH {
            return Err(syntax(self.at(), "expression nested too deeply"));
        }
        if self.word_is("not") {
            self.bump();
            return Ok(Expr::Not(Box::new(self.not()?)));
        }
        if self.peek() == Some(&Tok::LParen) {
            self.bump();
            let e = self.or()?;
            if self.bump() != Some(Tok::RParen) {
                return Err(syntax(self.at(), "expected \")\""));
            }
            return Ok(e);
        }
        self.matching()
    }

    /// `Sel op V`, `Sel is [not] empty`, or `V [not] in Sel`.
    fn matching(&mut self) -> Result<Expr, FilterError> {
        let start = self.pos;
        // `V [not] in Sel`: a value followed by `in` / `not in`.
        if let Some(v) = self.value_token() {
            let negated = self.word_is("not")
                && matches!(self.toks.get(self.pos + 1), Some((_, Tok::Word(w))) if w == "in");
            if self.word_is("in") || negated {
                if negated {
                    self.bump();
                }
                self.bump();
                let selector = self.selector()?;
                let op = if negated {
                    Op::NotContains
                } else {
                    Op::Contains
                };
                return Ok(Expr::Match {
                    selector,
                    op,
                    value: v,
                });
            }
        }
        self.pos = start;
        let selector = self.selector()?;
        let (op, needs_value) = match self.bump() {
            Some(Tok::Op("==")) => (Op::Equal, true),
            Some(Tok::Op("!=")) => (Op::NotEqual, true),
            Some(Tok::Word(w)) if w == "contains" => (Op::Contains, true),
            Some(Tok::Word(w)) if w == "matches" => (Op::Matches, true),
            Some(Tok::Word(w)) if w == "not" => match self.bump() {
                Some(Tok::Word(w)) if w == "contains" => (Op::NotContains, true),
                Some(Tok::Word(w)) if w == "matches" => (Op::NotMatches, true),
                _ => return Err(syntax(self.at(), "expected \"contains\" or \"matches\"")),
            },
            Some(Tok::Word(w)) if w == "is" => {
                let negated = self.word_is("not");
                if negated {
                    self.bump();
                }
                match self.bump() {
                    Some(Tok::Word(w)) if w == "empty" => {
                        (if negated { Op::IsNotEmpty } else { Op::IsEmpty }, false)
                    }
                    _ => return Err(syntax(self.at(), "expected \"empty\"")),
                }
            }
            _ => {
                return Err(syntax(
                    self.at(),
                    "no match found, expected: \"!=\", \"==\", \"contains\", \"is\", \"matches\" or \"not\"",
                ))
            }
        };
        let value = if needs_value {
            self.value_token()
                .ok_or_else(|| syntax(self.at(), "expected a value"))?
        } else {
            String::new()
        };
        Ok(Expr::Match {
            selector,
            op,
            value,
        })
    }

    fn value_token(&mut self) -> Option<String> {
        match self.peek() {
            Some(Tok::Str(s)) => {
                let s = s.clone();
                self.bump();
                Some(s)
            }
            Some(Tok::Word(w)) if !is_keyword(w) => {
                let w = w.clone();
                // A dotted bare word is a selector, never a value.
                if matches!(
                    self.toks.get(self.pos + 1),
                    Some((_, Tok::Dot | Tok::LBracket))
                ) {
                    return None;
                }
                self.bump();
                Some(w)
            }
            _ => None,
        }
    }

    fn selector(&mut self) -> Result<Vec<String>, FilterError> {
        let mut parts = match self.bump() {
            Some(Tok::Word(w)) if !is_keyword(&w) => vec![w],
            _ => return Err(syntax(self.at(), "expected a selector")),
        };
        loop {
            match self.peek() {
                Some(Tok::Dot) => {
                    self.bump();
                    match self.bump() {
                        Some(Tok::Word(w)) => parts.push(w),
                        _ => return Err(syntax(self.at(), "expected a field name")),
                    }
                }
                Some(Tok::LBracket) => {
                    self.bump();
                    match (self.bump(), self.bump()) {
                        (Some(Tok::Str(k)), Some(Tok::RBracket)) => parts.push(k),
                        _ => return Err(syntax(self.at(), "expected [\"key\"]")),
                    }
                }
                _ => return Ok(parts),
            }
        }
    }
}

fn is_keyword(w: &str) -> bool {
    matches!(
        w,
        "and" | "or" | "not" | "in" | "is" | "empty" | "contains" | "matches"
    )
}

/// Parses a filter expression.
pub(crate) fn parse(s: &str) -> Result<Expr, FilterError> {
    let toks = lex(s)?;
    let mut p = Parser {
        len: s.len(),
        toks,
        pos: 0,
        depth: 0,
    };
    if p.toks.is_empty() {
        return Err(syntax(0, "empty expression"));
    }
    let e = p.or()?;
    if p.pos < p.toks.len() {
        return Err(syntax(p.at(), "unexpected input after the expression"));
    }
    Ok(e)
}

/// Longest filter accepted, in bytes (an assumption: Nomad sets none, E2B's filters
/// are under 200 bytes, and a URL rarely carries more than 8 KiB). It bounds the number
/// of match expressions, and so the work per listed object.
pub(crate) const MAX_FILTER_LEN: usize = 4096;

/// Most memory one `matches` pattern may compile to (the `regex` crate's bound on its
/// compiled program and on its lazy DFA's cache, so also on the states a match visits).
/// Compile time grows with it: measured in a release build, a pattern just under 1 MiB
/// took 6-12 ms to compile, one just under 128 KiB about 1 ms (docs/benchmarks.md). 128
/// KiB still takes a Unicode class such as `\w` with a small repetition.
pub(crate) const MAX_PATTERN_BYTES: usize = 128 << 10;

/// Most distinct `matches` patterns in one filter (an assumption: Nomad sets none and
/// E2B's filters use none). With [`MAX_PATTERN_BYTES`] it bounds a filter's compile
/// cost: the worst filter within both costs well under 50 ms of CPU.
pub(crate) const MAX_PATTERNS: usize = 8;

/// CPU time one filter may take to compile and evaluate on its thread, checked between
/// patterns and between objects. A backstop (a fleet far larger than 1,000 nodes):
/// within the limits above a filter needs a small part of it. CPU, not wall time, so a
/// loaded machine does not turn a good filter into a refusal.
pub(crate) const FILTER_CPU_BUDGET: std::time::Duration = std::time::Duration::from_millis(500);

/// The CPU the calling thread may still spend, from when it was made.
#[derive(Debug, Clone, Copy)]
pub(crate) struct CpuBudget {
    until: std::time::Duration,
}

impl CpuBudget {
    /// `budget` of the calling thread's CPU time from now.
    pub(crate) fn starting_now(budget: std::time::Duration) -> CpuBudget {
        CpuBudget {
            until: thread_cpu() + budget,
        }
    }

    /// Whether the calling thread has spent it (call on the thread that made it).
    pub(crate) fn spent(&self) -> bool {
        thread_cpu() >= self.until
    }
}

/// The calling thread's CPU time (zero where the clock cannot be read: no budget then).
fn thread_cpu() -> std::time::Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: writes the calling thread's CPU clock into `ts`, which it owns.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    if rc != 0 {
        return std::time::Duration::ZERO;
    }
    std::time::Duration::new(
        ts.tv_sec.max(0) as u64,
        ts.tv_nsec.clamp(0, 999_999_999) as u32,
    )
}

/// A parsed filter with its `matches` patterns compiled once, as go-bexpr compiles them
/// when the evaluator is made: the work per listed object is then the expression's
/// size times its fields' lengths, never a compilation.
#[derive(Debug, Clone)]
pub(crate) struct Filter {
    expr: Expr,
    patterns: std::collections::HashMap<String, regex::Regex>,
}

impl Filter {
    /// Parses `s` and compiles each distinct pattern, within [`FILTER_CPU_BUDGET`].
    #[cfg(test)]
    pub(crate) fn new(s: &str) -> Result<Filter, FilterError> {
        Filter::new_within(s, &CpuBudget::starting_now(FILTER_CPU_BUDGET))
    }

    /// Parses `s` (at most [`MAX_FILTER_LEN`] bytes, at most [`MAX_PATTERNS`] distinct
    /// patterns of at most [`MAX_PATTERN_BYTES`] each) and compiles each distinct
    /// pattern; [`FilterError::OverBudget`] once `budget` is spent.
    pub(crate) fn new_within(s: &str, budget: &CpuBudget) -> Result<Filter, FilterError> {
        if s.len() > MAX_FILTER_LEN {
            return Err(FilterError::Syntax(format!(
                "the expression is {} bytes, more than the {MAX_FILTER_LEN} accepted",
                s.len()
            )));
        }
        let expr = parse(s)?;
        // Counted before anything is compiled: a refusal costs no compilation.
        let mut distinct = std::collections::HashSet::new();
        expr.each_pattern(&mut |lit| {
            distinct.insert(lit.to_string());
            Ok(())
        })?;
        if distinct.len() > MAX_PATTERNS {
            return Err(FilterError::Syntax(format!(
                "{} distinct patterns, more than the {MAX_PATTERNS} accepted",
                distinct.len()
            )));
        }
        let mut patterns = std::collections::HashMap::new();
        for lit in distinct {
            if budget.spent() {
                return Err(FilterError::OverBudget);
            }
            let re = regex::RegexBuilder::new(&lit)
                .size_limit(MAX_PATTERN_BYTES)
                .dfa_size_limit(MAX_PATTERN_BYTES)
                .build()
                .map_err(|e| FilterError::Syntax(e.to_string()))?;
            patterns.insert(lit, re);
        }
        Ok(Filter { expr, patterns })
    }

    /// Patterns compiled (one per distinct `matches` literal).
    #[cfg(test)]
    pub(crate) fn patterns(&self) -> usize {
        self.patterns.len()
    }

    /// Whether `datum` (an object's JSON form, field names as Nomad's API spells them)
    /// matches.
    pub(crate) fn eval(&self, datum: &Value) -> Result<bool, FilterError> {
        self.expr.eval_with(datum, &self.patterns)
    }
}

impl Expr {
    fn each_pattern(
        &self,
        f: &mut impl FnMut(&str) -> Result<(), FilterError>,
    ) -> Result<(), FilterError> {
        match self {
            Expr::And(a, b) | Expr::Or(a, b) => {
                a.each_pattern(f)?;
                b.each_pattern(f)
            }
            Expr::Not(e) => e.each_pattern(f),
            Expr::Match {
                op: Op::Matches | Op::NotMatches,
                value,
                ..
            } => f(value),
            Expr::Match { .. } => Ok(()),
        }
    }

    fn eval_with(
        &self,
        datum: &Value,
        patterns: &std::collections::HashMap<String, regex::Regex>,
    ) -> Result<bool, FilterError> {
        match self {
            Expr::And(a, b) => Ok(a.eval_with(datum, patterns)? && b.eval_with(datum, patterns)?),
            Expr::Or(a, b) => Ok(a.eval_with(datum, patterns)? || b.eval_with(datum, patterns)?),
            Expr::Not(e) => Ok(!e.eval_with(datum, patterns)?),
            Expr::Match {
                selector,
                op,
                value,
            } => {
                let field = lookup(datum, selector)?;
                match op {
                    Op::Matches | Op::NotMatches => {
                        let re = patterns.get(value).ok_or_else(|| {
                            FilterError::Syntax(format!("pattern {value:?} not compiled"))
                        })?;
                        let hit = matches(field, re)?;
                        Ok(if *op == Op::Matches { hit } else { !hit })
                    }
                    _ => compare(field, *op, value),
                }
            }
        }
    }
}

/// The field a selector names. A missing top-level field is an error (a struct field);
/// a missing key deeper down is a missing map entry, which compares as absent.
fn lookup<'a>(datum: &'a Value, selector: &[String]) -> Result<Option<&'a Value>, FilterError> {
    let mut cur = datum;
    for (i, part) in selector.iter().enumerate() {
        match cur.get(part) {
            Some(v) => cur = v,
            None if i == 0 => {
                return Err(FilterError::UnknownField {
                    path: selector.join("/"),
                    part: i,
                    field: part.clone(),
                })
            }
            None => return Ok(None),
        }
    }
    Ok(Some(cur))
}

fn compare(field: Option<&Value>, op: Op, lit: &str) -> Result<bool, FilterError> {
    let empty = match field {
        None | Some(Value::Null) => true,
        Some(Value::String(s)) => s.is_empty(),
        Some(Value::Array(a)) => a.is_empty(),
        Some(Value::Object(o)) => o.is_empty(),
        Some(_) => false,
    };
    Ok(match op {
        Op::IsEmpty => empty,
        Op::IsNotEmpty => !empty,
        Op::Equal => equals(field, lit)?,
        Op::NotEqual => !equals(field, lit)?,
        Op::Contains => contains(field, lit)?,
        Op::NotContains => !contains(field, lit)?,
        // Evaluated with their compiled pattern by `Expr::eval_with`.
        Op::Matches | Op::NotMatches => {
            return Err(FilterError::Syntax("a pattern without its regex".into()))
        }
    })
}

fn equals(field: Option<&Value>, lit: &str) -> Result<bool, FilterError> {
    Ok(match field {
        None | Some(Value::Null) => false,
        Some(Value::String(s)) => s == lit,
        Some(Value::Bool(b)) => {
            *b == lit
                .parse::<bool>()
                .map_err(|_| FilterError::Mismatch(format!("{lit:?} is not a bool")))?
        }
        Some(Value::Number(n)) => {
            let want: f64 = lit
                .parse()
                .map_err(|_| FilterError::Mismatch(format!("{lit:?} is not a number")))?;
            n.as_f64() == Some(want)
        }
        Some(_) => {
            return Err(FilterError::Mismatch(
                "== and != need a string, number or bool field".into(),
            ))
        }
    })
}

fn contains(field: Option<&Value>, lit: &str) -> Result<bool, FilterError> {
    Ok(match field {
        None | Some(Value::Null) => false,
        Some(Value::String(s)) => s.contains(lit),
        Some(Value::Array(a)) => a.iter().any(|v| matches!(v, Value::String(s) if s == lit)),
        Some(Value::Object(o)) => o.contains_key(lit),
        Some(_) => {
            return Err(FilterError::Mismatch(
                "contains and in need a string, list or map field".into(),
            ))
        }
    })
}

fn matches(field: Option<&Value>, re: &regex::Regex) -> Result<bool, FilterError> {
    Ok(match field {
        None | Some(Value::Null) => false,
        Some(Value::String(s)) => re.is_match(s),
        Some(_) => return Err(FilterError::Mismatch("matches needs a string field".into())),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn node() -> Value {
        json!({"ID": "6b1e0c8a-0000", "Status": "ready", "NodePool": "default",
               "Drain": false, "CreateIndex": 7, "Attributes": {"os.name": "linux"},
               "Tags": ["a", "b"]})
    }

    #[test]
    fn e2b_legacy_node_filter_selects_ready_default_pool_nodes() {
        let e = Filter::new(r#"Status == "ready" and NodePool == "default""#).expect("parses");
        assert!(e.eval(&node()).expect("evaluates"));
        let other = json!({"Status": "ready", "NodePool": "stampede"});
        assert!(!e.eval(&other).expect("evaluates"));
    }

    #[test]
    fn e2b_allocation_filter_parses() {
        let f = "ClientStatus == \"running\" and ((TaskGroup == \"template-manager\" and JobID contains \"template-manager\") or (TaskGroup == \"client-orchestrator\" and JobID contains \"orchestrator\"))";
        Filter::new(f).expect("E2B's template-builder filter parses");
    }

    #[test]
    fn operators_follow_bexpr() {
        let n = node();
        let t = |s: &str| Filter::new(s).expect(s).eval(&n).expect(s);
        assert!(t("Status != \"down\""));
        assert!(t("ID contains `6b1e`"));
        assert!(t("\"a\" in Tags"));
        assert!(t("\"z\" not in Tags"));
        assert!(t("Attributes[\"os.name\"] == linux"));
        assert!(t("Attributes.missing is empty"));
        assert!(t("Tags is not empty"));
        assert!(t("Drain == false and CreateIndex == 7"));
        assert!(t("not (Status == \"down\" or NodePool matches \"^x\")"));
    }

    #[test]
    fn bad_input_is_an_error_never_a_panic() {
        for bad in [
            "",
            "Status ==",
            "Status = \"x\"",
            "(Status == \"x\"",
            "\"x",
            "a b c",
            "Status is",
            "%",
        ] {
            assert!(
                matches!(Filter::new(bad), Err(FilterError::Syntax(_))),
                "{bad}"
            );
        }
        let e = Filter::new("Nope == \"x\"").expect("parses");
        assert!(matches!(
            e.eval(&node()),
            Err(FilterError::UnknownField { .. })
        ));
        let e = Filter::new("Drain == maybe").expect("parses");
        assert!(matches!(e.eval(&node()), Err(FilterError::Mismatch(_))));
    }

    #[test]
    fn a_hostile_filter_compiles_each_pattern_once_and_is_bounded() {
        let re = "(a|aa)*(b|bb)*[a-z]{1,100}x";
        let hostile = vec![format!("ID matches `{re}`"); 20].join(" or ");
        let f = Filter::new(&hostile).expect("parses");
        assert_eq!(f.patterns(), 1);
        let n = node();
        for _ in 0..1000 {
            assert!(!f.eval(&n).expect("evaluates"));
        }
        let long = "ID matches `a` or ".repeat(MAX_FILTER_LEN / 10) + "ID == `x`";
        assert!(matches!(Filter::new(&long), Err(FilterError::Syntax(_))));
        let huge = format!("ID matches `{}`", "a{1000}{1000}");
        assert!(matches!(Filter::new(&huge), Err(FilterError::Syntax(_))));
    }
}

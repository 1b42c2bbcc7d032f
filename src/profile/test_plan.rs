//! goose test-plan syntax (`users,timespan;...`), read exactly as goose reads it.
//!
//! goose's own `FromStr` prints to stderr when it refuses a plan, so validation reads
//! the same grammar here: each `;`-separated step is `\s*[0-9]+\s*,\s*[0-9hmsHMS]*\s*`,
//! the timespan is read by goose's [`parse_timespan`](goose::util::parse_timespan)
//! (whole seconds, or `1h30m10s`), and the plan must start at least one user. A unit
//! test checks that goose agrees on every case.

use std::time::Duration;

/// One step of a goose plan: reach `users` over `ramp`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PlanStep {
    /// Users at the end of the step.
    pub users: usize,
    /// Time to get there.
    pub ramp: Duration,
}

/// The steps of `text`, or why goose would refuse it.
pub fn parse_test_plan(text: &str) -> Result<Vec<PlanStep>, String> {
    let mut steps = Vec::new();
    let mut started: Option<usize> = Some(0);
    let mut previous = 0usize;
    for line in text.split(';') {
        let step = parse_step(line).ok_or_else(|| {
            format!(
                "`{line}`: not `users,timespan` (users a whole number; timespan whole \
                 seconds or `30s`, `20m`, `1h30m`)"
            )
        })?;
        started = started.and_then(|s| s.checked_add(step.users.saturating_sub(previous)));
        previous = step.users;
        steps.push(step);
    }
    match started {
        Some(n) if n > 0 => Ok(steps),
        _ => Err(format!("`{text}`: the plan must start at least one user")),
    }
}

fn parse_step(line: &str) -> Option<PlanStep> {
    let (users, span) = line.split_once(',')?;
    let users = users.trim_matches(char::is_whitespace);
    let span = span.trim_matches(char::is_whitespace);
    if users.is_empty() || !users.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    if !span
        .bytes()
        .all(|b| b.is_ascii_digit() || b"hmsHMS".contains(&b))
    {
        return None;
    }
    let users = users.parse::<usize>().ok()?;
    let secs = goose::util::parse_timespan(span)?;
    // goose keeps milliseconds in a usize.
    secs.checked_mul(1_000)?;
    Some(PlanStep {
        users,
        ramp: Duration::from_secs(secs as u64),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn agrees_with_goose() {
        for text in [
            "10,5s;10,20s;0,5s",
            "5,1s;5,2s;0,1s",
            " 3 , 1m ;0,0",
            "1,",
            "1,1h30m10s",
            "0,1s",
            "x,1s",
            "10,5s;",
            "",
            ";",
            "1,1ms",
            "1,1S",
            "1,2h3",
            "99999999999999999999999,1s",
            "1,99999999999999999999s",
            "1,\u{0663}s",
            "1\u{2003},\u{2003}2s",
        ] {
            let ours = parse_test_plan(text);
            let theirs = text.parse::<goose::test_plan::TestPlan>();
            assert_eq!(ours.is_ok(), theirs.is_ok(), "{text:?}: {ours:?}");
            if let (Ok(a), Ok(b)) = (ours, theirs) {
                let a: Vec<(usize, usize)> = a
                    .iter()
                    .map(|s| (s.users, s.ramp.as_millis() as usize))
                    .collect();
                assert_eq!(a, b.steps, "{text:?}");
            }
        }
    }
}

//! What the workload does with a 429 when the profile asks it to retry.

use std::time::Duration;

use super::ledger::Limit;

/// Retry policy for creates answered 429 (from the profile's `workload.on_429`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LimitRetry {
    /// Further attempts after the first 429.
    pub max_retries: u32,
    /// Wait the answer's `Retry-After` when it has one (else `backoff`).
    pub honour_retry_after: bool,
    /// Wait before a retry when `Retry-After` is absent or not honoured.
    pub backoff: Duration,
    /// Longest wait, whatever `Retry-After` says.
    pub max_wait: Duration,
}

impl LimitRetry {
    /// How long to wait before retrying after `limit`.
    pub fn wait(&self, limit: &Limit) -> Duration {
        let wanted = match (self.honour_retry_after, limit.retry_after_ms) {
            (true, Some(ms)) => Duration::from_millis(ms),
            _ => self.backoff,
        };
        wanted.min(self.max_wait)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::LimitKind;

    #[test]
    fn retry_after_is_waited_only_when_honoured_and_never_past_the_cap() {
        let p = LimitRetry {
            max_retries: 2,
            honour_retry_after: true,
            backoff: Duration::from_millis(100),
            max_wait: Duration::from_secs(5),
        };
        let l = |ms| Limit {
            kind: LimitKind::Rate,
            retry_after_ms: ms,
        };
        assert_eq!(p.wait(&l(Some(2000))), Duration::from_secs(2));
        assert_eq!(p.wait(&l(Some(60_000))), Duration::from_secs(5));
        assert_eq!(p.wait(&l(None)), Duration::from_millis(100));
        let off = LimitRetry {
            honour_retry_after: false,
            ..p
        };
        assert_eq!(off.wait(&l(Some(2000))), Duration::from_millis(100));
    }
}

//! A run that measured nothing of the placement because the setup was broken: every
//! create refused by the API's authentication, or the API never reached. Such a run
//! ends as a harness/setup failure (exit 2), never as a regression (exit 1).

use crate::report::RunResult;

/// Status keys of a create refused for its credentials: E2B answers 401 to a missing
/// or invalid key and 403 to a team without access to the template
/// (packages/api/internal/cache/templates/errors.go).
const AUTH_REFUSED: [&str; 2] = ["401", "403"];

/// Status key of a create that never reached the API (connection refused or reset).
const UNREACHABLE: &str = "transport_error";

/// Status key of a create given up on a signal: neither way a verdict on the API.
const CANCELLED: &str = crate::report::CANCELLED_KEY;

/// Why `run` says nothing about placement, when every create it sent failed for a
/// setup reason; `None` when at least one create got any other answer.
pub(super) fn setup_failure(run: &RunResult) -> Option<String> {
    if run.requests == 0 || run.ok > 0 {
        return None;
    }
    let only = |allowed: &[&str]| {
        run.statuses
            .keys()
            .all(|k| allowed.contains(&k.as_str()) || k == CANCELLED)
    };
    let count = |keys: &[&str]| -> u64 { keys.iter().filter_map(|k| run.statuses.get(*k)).sum() };
    let refused = count(&AUTH_REFUSED);
    if refused > 0 && only(&AUTH_REFUSED) {
        return Some(format!(
            "setup: every create of run `{}` ({refused}) was answered 401/403: the API refused \
             the key (check the env var it is read from, `--api-key-env VAR` or the profile's \
             `api_key_env`, default STAMPEDE_API_KEY, and the team the key belongs to)",
            run.label
        ));
    }
    let unreachable = count(&[UNREACHABLE]);
    if unreachable > 0 && only(&[UNREACHABLE]) {
        return Some(format!(
            "setup: the API of run `{}` was unreachable: every create ({unreachable}) failed \
             to connect",
            run.label
        ));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(statuses: &[(&str, u64)], ok: u64) -> RunResult {
        RunResult {
            label: "external".into(),
            requests: statuses.iter().map(|(_, n)| n).sum(),
            ok,
            statuses: statuses.iter().map(|(k, n)| (k.to_string(), *n)).collect(),
            ..RunResult::default()
        }
    }

    #[test]
    fn refused_keys_and_an_unreachable_api_are_setup_failures_and_nothing_else_is() {
        let auth = setup_failure(&run(&[("401", 40), ("cancelled", 2)], 0)).unwrap();
        assert!(auth.contains("401/403") && auth.contains("(40)"), "{auth}");
        assert!(setup_failure(&run(&[("403", 3)], 0)).is_some());
        let down = setup_failure(&run(&[("transport_error", 9)], 0)).unwrap();
        assert!(down.contains("unreachable"), "{down}");
        // A regression, or a mix, is a verdict on the API: not a setup failure.
        assert_eq!(setup_failure(&run(&[("503", 10)], 0)), None);
        assert_eq!(setup_failure(&run(&[("401", 1), ("503", 10)], 0)), None);
        assert_eq!(setup_failure(&run(&[("201", 1), ("401", 10)], 1)), None);
        assert_eq!(setup_failure(&run(&[("cancelled", 3)], 0)), None);
        assert_eq!(setup_failure(&run(&[], 0)), None);
    }
}

//! The `command` backend: a program that applies a fault and one that heals it (how a
//! team drives Nomad, kubectl or Toxiproxy), each run without a shell, under a
//! deadline, its exit status checked.

use std::process::Stdio;
use std::time::Duration;

use super::super::ChaosError;

/// Environment variable holding the step's nodes, comma-separated, for the program.
pub const NODES_ENV: &str = "STAMPEDE_FAULT_NODES";

/// Environment variable holding `run` or `heal`, for a program that does both.
pub const PHASE_ENV: &str = "STAMPEDE_FAULT_PHASE";

/// Bytes of the program's stderr kept in an error (its end, where the reason is).
const STDERR_TAIL: usize = 400;

/// Runs `argv` (`phase`: `run` or `heal`) with the nodes in [`NODES_ENV`], killed past
/// `timeout`; any exit status but 0 is an error carrying the end of its stderr.
pub(crate) async fn run_argv(
    phase: &'static str,
    argv: &[String],
    nodes: &[String],
    timeout: Duration,
) -> Result<(), ChaosError> {
    let (prog, args) = argv.split_first().ok_or_else(|| ChaosError::Command {
        phase,
        program: String::new(),
        message: "no program".into(),
    })?;
    let fail = |message: String| ChaosError::Command {
        phase,
        program: prog.clone(),
        message,
    };
    let child = tokio::process::Command::new(prog)
        .args(args)
        .env(NODES_ENV, nodes.join(","))
        .env(PHASE_ENV, phase)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        // On the deadline the future is dropped: the program goes with it.
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| fail(format!("cannot start: {e}")))?;
    let out = match tokio::time::timeout(timeout, child.wait_with_output()).await {
        Ok(Ok(out)) => out,
        Ok(Err(e)) => return Err(fail(format!("cannot wait for it: {e}"))),
        Err(_) => {
            return Err(fail(format!(
                "did not finish within {} (killed)",
                humantime::format_duration(timeout)
            )))
        }
    };
    if out.status.success() {
        return Ok(());
    }
    let err = String::from_utf8_lossy(&out.stderr);
    let err = err.trim();
    let mut cut = err.len().saturating_sub(STDERR_TAIL);
    while !err.is_char_boundary(cut) {
        cut += 1;
    }
    let tail = &err[cut..];
    Err(fail(format!(
        "{}{}",
        out.status,
        if tail.is_empty() {
            String::new()
        } else {
            format!(": {tail}")
        }
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn argv(a: &[&str]) -> Vec<String> {
        a.iter().map(|s| s.to_string()).collect()
    }

    #[tokio::test]
    async fn exit_status_deadline_and_environment_are_checked() {
        let nodes = vec!["node-01".to_string(), "node-02".to_string()];
        let t = Duration::from_secs(10);
        let env = argv(&[
            "sh",
            "-c",
            "[ \"$STAMPEDE_FAULT_NODES\" = node-01,node-02 ] && [ \"$STAMPEDE_FAULT_PHASE\" = run ]",
        ]);
        run_argv("run", &env, &nodes, t).await.expect("env seen");
        let failing = argv(&["sh", "-c", "echo no such job >&2; exit 3"]);
        let e = run_argv("heal", &failing, &nodes, t).await.unwrap_err();
        let text = e.to_string();
        assert!(
            text.contains("exit status: 3") && text.contains("no such job"),
            "{text}"
        );
        assert!(text.contains("heal"), "{text}");
        let slow = argv(&["sleep", "5"]);
        let started = std::time::Instant::now();
        let e = run_argv("run", &slow, &nodes, Duration::from_millis(200))
            .await
            .unwrap_err();
        assert!(e.to_string().contains("killed"), "{e}");
        assert!(started.elapsed() < Duration::from_secs(4));
        let missing = argv(&["/nonexistent/stampede-test-program"]);
        assert!(run_argv("run", &missing, &nodes, t).await.is_err());
    }
}

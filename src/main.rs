//! `stampede`: thin entry point; everything lives in the library.

use std::io::Write as _;
use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;
use stampede::cli::{Cli, Command};
use stampede::run::AbortState;
use tokio_util::sync::CancellationToken;

/// Exit code of a run aborted by a second signal.
const ABORT_EXIT: i32 = 130;

/// Longest the runtime may take to stop its tasks once the command has finished.
const RUNTIME_SHUTDOWN: Duration = Duration::from_millis(500);

/// Longest an abort may spend naming the faults it leaves before the process exits anyway.
const ABORT_DEADLINE: Duration = Duration::from_secs(5);

/// A signal arriving within this window after the first one is the same interrupt
/// delivered twice, not a second one: GNU `timeout` and CI runners forward the signal
/// they receive both to their child and to its process group, and a user's second
/// Ctrl-C comes well after a second (an assumption: a human press takes longer).
const REPEAT_WINDOW: Duration = Duration::from_secs(1);

fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .with_writer(|| stampede::redact::RedactingWriter(std::io::stderr()))
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
    let cli = Cli::parse();
    // A run holds a connection per in-flight create and its metrics endpoint's clients:
    // take the descriptors the hard limit allows, as Go's runtime does at start.
    stampede_http_kit::raise_fd_limit();
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(r) => r,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::from(2);
        }
    };
    let cancel = CancellationToken::new();
    let abort = AbortState::default();
    // Only `run` handles signals itself; the other verbs keep their own (or the default)
    // dispositions, so that SIGTERM still ends `serve` or `mock-node`.
    if matches!(cli.command, Command::Run(_)) {
        install_run_signals(cancel.clone(), abort.clone(), runtime.handle().clone());
    } else if matches!(cli.command, Command::E2b(_)) {
        install_stop_signals(cancel.clone());
    }
    let code = match runtime.block_on(stampede::cli::dispatch(cli, cancel, abort)) {
        Ok(code) => code,
        Err(e) => {
            let e = anyhow::Error::from(e);
            let text = stampede::error_chain::chain_text(e.as_ref());
            // A closed stderr (`… 2>&1 | head -1`) must not turn the error into a panic.
            let _ = writeln!(
                std::io::stderr().lock(),
                "error: {}",
                stampede::redact::redact_userinfo(&text)
            );
            ExitCode::from(2)
        }
    };
    // An interrupted run may leave work it gave up on (goose still building its users on
    // a worker thread): do not wait for it.
    runtime.shutdown_timeout(RUNTIME_SHUTDOWN);
    code
}

/// `stampede e2b`: the first SIGINT, SIGTERM or SIGHUP stops what the verb started and
/// ends it (exit 2); a second one exits at once (130), and the kernel then kills every
/// process the verb started (each has the harness as its parent-death signal's owner).
fn install_stop_signals(cancel: CancellationToken) {
    let installed = ctrlc::set_handler(move || {
        if cancel.is_cancelled() {
            eprintln!("second signal: exiting now");
            std::process::exit(ABORT_EXIT);
        }
        eprintln!("interrupted: stopping the API, mock-node, Redis and PostgreSQL");
        cancel.cancel();
    });
    if let Err(e) = installed {
        eprintln!("warning: cannot install the signal handler: {e}");
    }
}

/// SIGINT, SIGTERM and SIGHUP: the first stops the run (it heals its faults and writes a
/// partial report marked incomplete, exit 2); one within [`REPEAT_WINDOW`] of it is the
/// same interrupt; a later one aborts (exit 130) after removing goose's staging
/// directory and printing the faults it leaves active, and where. Installed before goose
/// can install its own handler.
fn install_run_signals(
    cancel: CancellationToken,
    abort: AbortState,
    runtime: tokio::runtime::Handle,
) {
    let first = std::sync::OnceLock::<std::time::Instant>::new();
    let installed = ctrlc::set_handler(move || {
        let at = *first.get_or_init(std::time::Instant::now);
        if !cancel.is_cancelled() {
            eprintln!(
                "interrupted: stopping the workload, healing faults, writing a partial report (a second signal after {REPEAT_WINDOW:?} aborts)"
            );
            cancel.cancel();
            return;
        }
        if at.elapsed() < REPEAT_WINDOW {
            eprintln!(
                "signal repeated within {REPEAT_WINDOW:?}: the same interrupt, still stopping"
            );
            return;
        }
        eprintln!("second signal: aborting");
        std::thread::spawn(|| {
            std::thread::sleep(ABORT_DEADLINE);
            eprintln!("aborted: the fault check did not finish within {ABORT_DEADLINE:?}");
            std::process::exit(ABORT_EXIT);
        });
        // This handler runs on its own thread, outside the runtime.
        let summary = runtime.block_on(abort.abort());
        eprint!(
            "{}",
            stampede::redact::redact_userinfo(&summary.to_string())
        );
        std::process::exit(ABORT_EXIT);
    });
    if let Err(e) = installed {
        eprintln!("warning: cannot install the signal handler: {e}");
    }
}

//! `stampede`: thin entry point; everything lives in the library.

use std::process::ExitCode;

use clap::Parser;
use tokio_util::sync::CancellationToken;

fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .with_writer(std::io::stderr)
        .init();
    let cli = stampede::cli::Cli::parse();
    let cancel = CancellationToken::new();
    let on_signal = cancel.clone();
    // Installed before goose can install its own, so a Ctrl-C reaches the run, which
    // stops goose, heals faults and writes a partial report.
    if let Err(e) = ctrlc::set_handler(move || {
        if on_signal.is_cancelled() {
            std::process::exit(130);
        }
        eprintln!("interrupted: stopping, healing faults, writing a partial report (Ctrl-C again to abort)");
        on_signal.cancel();
    }) {
        eprintln!("warning: cannot install the Ctrl-C handler: {e}");
    }
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(r) => r,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::from(2);
        }
    };
    match runtime.block_on(stampede::cli::dispatch(cli, cancel)) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(2)
        }
    }
}

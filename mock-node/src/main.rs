//! `mock-node`: serve a fleet of virtual E2B orchestrator nodes until Ctrl-C.

use clap::Parser;

/// A fleet of virtual E2B orchestrator nodes over real gRPC.
#[derive(Parser)]
#[command(name = "mock-node", version, about)]
struct Cli {
    #[command(flatten)]
    args: mock_node::cli::MockNodeArgs,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .with_writer(std::io::stderr)
        // Colour codes only for a terminal: files and CI logs get plain lines.
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
    mock_node::cli::run(Cli::parse().args).await?;
    Ok(())
}

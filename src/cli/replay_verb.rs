//! `stampede replay`: a placement trace through the placement core again.

use std::path::PathBuf;
use std::process::ExitCode;

use super::CliError;
use crate::stdout::out;

/// `stampede replay`'s arguments.
#[derive(Debug, clap::Args)]
pub struct ReplayArgs {
    /// The trace file.
    pub trace: PathBuf,
}

/// Replays the trace: 0 = every output as recorded, 1 = a difference (printed).
pub fn run(args: ReplayArgs) -> Result<ExitCode, CliError> {
    let trace = args.trace;
    let file =
        mock_node::open_regular(&trace, "a placement trace").map_err(|source| CliError::Open {
            path: trace.clone(),
            source,
        })?;
    let r = crate::placement::replay(std::io::BufReader::new(file))?;
    out(format_args!(
        "{}: {} inputs, {} outputs ({} creates sent, {} requests answered)",
        trace.display(),
        r.inputs,
        r.outputs,
        r.decisions,
        r.answers
    ))?;
    match &r.first_mismatch {
        None => {
            out(format_args!("identical: every output came out as recorded"))?;
            Ok(ExitCode::SUCCESS)
        }
        Some((line, want, got)) => {
            out(format_args!(
                "differs at line {line}:\n  recorded: {want:?}\n  replayed: {got:?}"
            ))?;
            Ok(ExitCode::from(1))
        }
    }
}

//! `stampede validate` and `stampede schema`: the profile format.

use std::path::PathBuf;
use std::process::ExitCode;

use super::CliError;
use crate::stdout::out;

/// `stampede validate`'s arguments.
#[derive(Debug, clap::Args)]
pub struct ValidateArgs {
    /// Profile(s) to check.
    #[arg(required = true)]
    pub profiles: Vec<PathBuf>,
}

/// `stampede schema`'s arguments.
#[derive(Debug, clap::Args)]
pub struct SchemaArgs {
    /// The schema of `report.json` instead of the profile's.
    #[arg(long)]
    pub report: bool,
}

/// Checks each profile, printing every problem: 0 = all good, 1 = some are not.
pub fn validate(args: ValidateArgs) -> Result<ExitCode, CliError> {
    let mut bad = false;
    for p in args.profiles {
        match crate::profile::load_checked(&p) {
            Ok((_, warnings)) => {
                for w in warnings {
                    eprintln!("warning: {w}");
                }
                out(format_args!("{}: ok", p.display()))?
            }
            Err(e) => {
                bad = true;
                eprintln!("{e}");
            }
        }
    }
    Ok(if bad {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

/// Prints the profile's JSON Schema, or `report.json`'s.
pub fn schema(args: SchemaArgs) -> Result<ExitCode, CliError> {
    let schema = if args.report {
        crate::report::json_schema()
    } else {
        crate::profile::json_schema()
    };
    out(format_args!("{}", serde_json::to_string_pretty(&schema)?))?;
    Ok(ExitCode::SUCCESS)
}

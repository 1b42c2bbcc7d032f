//! Writing to stdout when the reader may have gone: every verb's output goes through
//! here, so a closed pipe ends no verb with a panic or an error.

/// Prints one line on stdout. A closed stdout (`stampede validate … | head -1`) is not an
/// error: the reader has what it wanted, and the verb's exit code stays its own.
pub(crate) fn out(line: std::fmt::Arguments<'_>) -> std::io::Result<()> {
    use std::io::Write as _;
    closed_is_fine(writeln!(std::io::stdout().lock(), "{line}"))
}

/// `written`, with a closed stdout (broken pipe) taken as success.
pub(crate) fn closed_is_fine(written: std::io::Result<()>) -> std::io::Result<()> {
    match written {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        other => other,
    }
}

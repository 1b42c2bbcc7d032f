//! `run -q`: goose prints "N users launched." on stdout once its users are up, and no
//! goose setting turns that line off (it is not behind `no_print_metrics` nor `quiet`,
//! `GooseMetrics::reset_metrics` in goose 0.19). While a quiet workload runs, stdout
//! points at `/dev/null`; the final summary is printed after it is restored.

use std::io::Write;

/// Stdout muted until this drops (a no-op where muting is not supported or failed).
pub(crate) struct MutedStdout {
    #[cfg(unix)]
    saved: Option<libc::c_int>,
}

impl MutedStdout {
    /// Points fd 1 at `/dev/null`, keeping a copy of the old one.
    pub(crate) fn mute() -> Self {
        let _ = std::io::stdout().flush();
        #[cfg(unix)]
        {
            // SAFETY: plain fd calls on descriptors this function owns (`saved`, `null`)
            // or on fd 1, which stays open throughout: `dup2` swaps it atomically.
            let saved = unsafe {
                let saved = libc::dup(1);
                let null = libc::open(c"/dev/null".as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
                match (saved >= 0, null >= 0) {
                    (true, true) => {
                        let ok = libc::dup2(null, 1) >= 0;
                        libc::close(null);
                        if ok {
                            Some(saved)
                        } else {
                            libc::close(saved);
                            None
                        }
                    }
                    _ => {
                        if saved >= 0 {
                            libc::close(saved);
                        }
                        if null >= 0 {
                            libc::close(null);
                        }
                        None
                    }
                }
            };
            Self { saved }
        }
        #[cfg(not(unix))]
        Self {}
    }
}

impl Drop for MutedStdout {
    fn drop(&mut self) {
        // What was written while muted goes to /dev/null, not to the restored stdout.
        let _ = std::io::stdout().flush();
        #[cfg(unix)]
        if let Some(saved) = self.saved.take() {
            // SAFETY: `saved` is the descriptor `mute` duplicated and still owns.
            unsafe {
                libc::dup2(saved, 1);
                libc::close(saved);
            }
        }
    }
}

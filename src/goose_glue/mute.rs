//! goose prints "N users launched." on stdout once its users are up, and no goose
//! setting turns that line off (it is not behind `no_print_metrics` nor `quiet`,
//! `GooseMetrics::reset_metrics` in goose 0.19). It is printed with `println!` from a
//! worker thread, which panics when stdout is closed (`stampede run | head -1`). While a
//! workload runs, stdout points at `/dev/null`; the run's summary is printed after it is
//! restored, and the live progress goes to stderr.
//!
//! The descriptor is the process's, so the mute is counted: runs that overlap in
//! one process (a test binary runs several) share one redirection, made by the first
//! and undone by the last, and stdout is never left pointing at `/dev/null`.

use std::io::Write;
use std::sync::Mutex;

/// How many mutes are held, and the saved stdout while any is.
struct Held {
    count: usize,
    #[cfg(unix)]
    saved: Option<libc::c_int>,
}

static HELD: Mutex<Held> = Mutex::new(Held {
    count: 0,
    #[cfg(unix)]
    saved: None,
});

/// Stdout muted until this drops (a no-op where muting is not supported or failed).
pub(crate) struct MutedStdout(());

impl MutedStdout {
    /// Points fd 1 at `/dev/null` (the first holder keeps a copy of the old one).
    pub(crate) fn mute() -> Self {
        let mut held = HELD.lock().unwrap_or_else(|p| p.into_inner());
        if held.count == 0 {
            let _ = std::io::stdout().flush();
            #[cfg(unix)]
            {
                held.saved = redirect_to_null();
            }
        }
        held.count += 1;
        MutedStdout(())
    }
}

impl Drop for MutedStdout {
    fn drop(&mut self) {
        let mut held = HELD.lock().unwrap_or_else(|p| p.into_inner());
        held.count = held.count.saturating_sub(1);
        if held.count > 0 {
            return;
        }
        // What was written while muted goes to /dev/null, not to the restored stdout.
        let _ = std::io::stdout().flush();
        #[cfg(unix)]
        if let Some(saved) = held.saved.take() {
            // SAFETY: `saved` is the descriptor `redirect_to_null` duplicated and that
            // only `HELD` owns; it is closed once, here.
            unsafe {
                libc::dup2(saved, 1);
                libc::close(saved);
            }
        }
    }
}

/// Points fd 1 at `/dev/null`; returns a duplicate of the old fd 1, or `None` (and
/// leaves fd 1 alone) when a call fails.
#[cfg(unix)]
fn redirect_to_null() -> Option<libc::c_int> {
    // SAFETY: plain fd calls on descriptors this function owns (`saved`, `null`) or on
    // fd 1, which stays open throughout: `dup2` swaps it atomically.
    unsafe {
        let saved = libc::dup(1);
        let null = libc::open(c"/dev/null".as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
        if saved >= 0 && null >= 0 && libc::dup2(null, 1) >= 0 {
            libc::close(null);
            return Some(saved);
        }
        if saved >= 0 {
            libc::close(saved);
        }
        if null >= 0 {
            libc::close(null);
        }
        None
    }
}

#[cfg(all(test, unix))]
mod tests {
    use super::{MutedStdout, HELD};

    /// Overlapping mutes, released in the order that broke a per-holder save: the
    /// first holder's release must not restore while the second still holds, and the
    /// last must restore the original descriptor.
    #[test]
    fn overlapping_mutes_restore_stdout_once_the_last_ends() {
        // SAFETY: fstat on fd 1 into a zeroed, owned struct.
        let ino = || unsafe {
            let mut st: libc::stat = std::mem::zeroed();
            assert_eq!(libc::fstat(1, &mut st), 0);
            (st.st_dev, st.st_ino)
        };
        let before = ino();
        let a = MutedStdout::mute();
        let muted = ino();
        let b = MutedStdout::mute();
        drop(a);
        assert_eq!(ino(), muted, "still muted while one holder remains");
        assert_eq!(HELD.lock().expect("lock").count, 1);
        drop(b);
        assert_eq!(ino(), before, "stdout is the original descriptor again");
    }
}

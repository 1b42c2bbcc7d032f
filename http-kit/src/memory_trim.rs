//! Freed memory handed back to the OS while a process runs. glibc's allocator keeps
//! what it freed in its arenas: `stampede serve` stayed at its high-water mark after a
//! burst of 2,000 concurrent creates (15.6 MB idle, 96.6 MB after such a flood), and a
//! long `stampede run`, whose short-lived request buffers come and go between the
//! records it keeps, grew page by page with free holes. Go's runtime, which E2B's API
//! runs on, returns freed memory to the OS in the background (its scavenger); this does
//! the same, on a blocking thread, once a period.

use std::time::Duration;

use tokio_util::sync::CancellationToken;

/// How often the heap is trimmed (an assumption: after a flood, memory is back within
/// one period; a trim of an idle heap costs well under 1 ms).
pub const TRIM_EVERY: Duration = Duration::from_secs(10);

/// Trims the heap every [`TRIM_EVERY`] until `stop` fires (a no-op off glibc).
pub fn spawn_trimmer(stop: CancellationToken) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(TRIM_EVERY);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        tick.tick().await;
        loop {
            tokio::select! {
                () = stop.cancelled() => return,
                _ = tick.tick() => {}
            }
            let _ = tokio::task::spawn_blocking(trim).await;
        }
    })
}

/// Returns the free pages of every arena to the OS.
pub fn trim() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim takes a pad size and touches only the allocator's own state,
    // under its locks.
    unsafe {
        libc::malloc_trim(0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trimming_after_frees_keeps_the_heap_usable() {
        let blocks: Vec<Vec<u8>> = (0..1_000).map(|i| vec![i as u8; 64 << 10]).collect();
        drop(blocks);
        trim();
        let again: Vec<Vec<u8>> = (0..10).map(|i| vec![i as u8; 64 << 10]).collect();
        assert!(again.iter().enumerate().all(|(i, b)| b[0] == i as u8));
    }
}

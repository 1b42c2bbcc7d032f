//! Real-time priority for the few milliseconds of a burst's release loop. At normal
//! priority the loop shares its core with the threads its own writes wake (the
//! service's, on loopback), and the scheduler may hand one of them a whole tick
//! (4 ms here) in the middle of the 500 writes: measured on the 2-core machine, one
//! loop in three or four stalled once for 4-8 ms. `SCHED_FIFO` keeps the core for the
//! loop; the thread's own policy is restored when the guard drops. Without the
//! privilege (`CAP_SYS_NICE`, or an `RLIMIT_RTPRIO` above 0) the loop runs as it is,
//! and the report's send spread shows what that costs.

/// The calling thread at real-time priority until this drops; `None` when the system
/// refused it.
#[derive(Debug)]
pub(crate) struct Boost {
    #[cfg(target_os = "linux")]
    policy: libc::c_int,
    #[cfg(target_os = "linux")]
    param: libc::sched_param,
}

impl Boost {
    /// Moves the calling thread to `SCHED_FIFO` at its lowest priority.
    #[cfg(target_os = "linux")]
    pub(crate) fn try_new() -> Option<Self> {
        // SAFETY: pthread_self is always valid for the calling thread; the out and in
        // parameters live across the calls.
        unsafe {
            let me = libc::pthread_self();
            let mut policy = 0;
            let mut param: libc::sched_param = std::mem::zeroed();
            if libc::pthread_getschedparam(me, &mut policy, &mut param) != 0 {
                return None;
            }
            let mut fifo: libc::sched_param = std::mem::zeroed();
            fifo.sched_priority = libc::sched_get_priority_min(libc::SCHED_FIFO);
            if libc::pthread_setschedparam(me, libc::SCHED_FIFO, &fifo) != 0 {
                return None;
            }
            Some(Self { policy, param })
        }
    }

    /// Not supported here.
    #[cfg(not(target_os = "linux"))]
    pub(crate) fn try_new() -> Option<Self> {
        None
    }
}

#[cfg(target_os = "linux")]
impl Drop for Boost {
    fn drop(&mut self) {
        // SAFETY: as in `try_new`; the saved policy and parameter were the thread's.
        unsafe {
            libc::pthread_setschedparam(libc::pthread_self(), self.policy, &self.param);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_threads_policy_is_restored_when_the_boost_drops() {
        #[cfg(target_os = "linux")]
        {
            let policy = || unsafe {
                let mut p = 0;
                let mut param: libc::sched_param = std::mem::zeroed();
                libc::pthread_getschedparam(libc::pthread_self(), &mut p, &mut param);
                p
            };
            let before = policy();
            let boost = Boost::try_new();
            if boost.is_some() {
                assert_eq!(policy(), libc::SCHED_FIFO);
            }
            drop(boost);
            assert_eq!(policy(), before);
        }
    }
}

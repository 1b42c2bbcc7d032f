//! When the bytes a connection read reached this machine: the kernel's receive time of
//! the segment each read ended with (`SO_TIMESTAMPNS`, the clock tcpdump shows), kept in
//! a [`LastRead`] shared with the requests of that connection. A create's arrival is
//! then the wire time of its last byte, not the moment the service got round to
//! polling its body, which under a burst of 500 includes the queueing of 500 handlers
//! on a few cores.
//!
//! Where the kernel gives no timestamp (not Linux, or the socket option was refused),
//! a read is stamped by the wall clock when it completed, and [`LastRead::kernel`]
//! says so. Both are `CLOCK_REALTIME` nanoseconds, so one window may mix them.

use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::task::{ready, Context, Poll};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;

/// The receive time of the last bytes a connection read.
#[derive(Debug, Default)]
pub(crate) struct LastRead {
    /// `CLOCK_REALTIME` nanoseconds; 0: nothing read yet.
    ns: AtomicU64,
    kernel: AtomicBool,
}

impl LastRead {
    /// Nanoseconds since the Unix epoch of the last read, and whether the kernel
    /// stamped it; `None` before the first read.
    pub(crate) fn get(&self) -> Option<(u64, bool)> {
        let ns = self.ns.load(Relaxed);
        (ns != 0).then(|| (ns, self.kernel.load(Relaxed)))
    }

    fn set(&self, ns: u64, kernel: bool) {
        self.kernel.store(kernel, Relaxed);
        self.ns.store(ns.max(1), Relaxed);
    }
}

/// Now on the wall clock, in nanoseconds since the Unix epoch (the clock of the
/// kernel's receive timestamps).
pub(crate) fn realtime_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
        .unwrap_or(1)
}

/// A TCP stream whose reads record their receive time in a [`LastRead`].
#[derive(Debug)]
pub(crate) struct RxStamped {
    stream: TcpStream,
    last: Arc<LastRead>,
    /// The kernel timestamps this socket's segments.
    kernel: bool,
}

impl RxStamped {
    /// Wraps an accepted stream and asks the kernel to timestamp what it receives.
    pub(crate) fn new(stream: TcpStream) -> (Self, Arc<LastRead>) {
        let kernel = enable_kernel_stamps(&stream);
        if !kernel {
            tracing::debug!(
                "no kernel receive timestamps on this socket; reads are stamped by the wall clock"
            );
        }
        let last = Arc::new(LastRead::default());
        let s = Self {
            stream,
            last: last.clone(),
            kernel,
        };
        (s, last)
    }
}

impl AsyncRead for RxStamped {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = &mut *self;
        if !this.kernel {
            let before = buf.filled().len();
            ready!(Pin::new(&mut this.stream).poll_read(cx, buf))?;
            if buf.filled().len() > before {
                this.last.set(realtime_ns(), false);
            }
            return Poll::Ready(Ok(()));
        }
        loop {
            ready!(this.stream.poll_read_ready(cx))?;
            match this.stream.try_io(tokio::io::Interest::READABLE, || {
                recv_stamped(&this.stream, buf)
            }) {
                Ok(Some((ns, kernel))) => {
                    this.last.set(ns, kernel);
                    return Poll::Ready(Ok(()));
                }
                // End of stream, or bytes without a timestamp.
                Ok(None) => return Poll::Ready(Ok(())),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
                Err(e) => return Poll::Ready(Err(e)),
            }
        }
    }
}

impl AsyncWrite for RxStamped {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.stream).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.stream).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_shutdown(cx)
    }
}

/// Asks the kernel to stamp what the connections `listener` accepts receive (they
/// inherit the option), and waits, at most `within`, until the network stack stamps
/// segments: the kernel turns stamping on for the whole stack only after the first
/// socket asks, from a work queue, and segments before that come unstamped. The
/// listener keeps it on while it is open. `false`: no kernel stamps (not Linux, the
/// option was refused, or not on within `within`).
pub(crate) async fn stamp_listener(listener: &tokio::net::TcpListener, within: Duration) -> bool {
    if !enable_kernel_stamps(listener) {
        return false;
    }
    stamping_by(tokio::time::Instant::now() + within)
        .await
        .unwrap_or(false)
}

/// Sends one byte at a time over a loopback pair of its own until a read comes back
/// stamped by the kernel, or `deadline`.
async fn stamping_by(deadline: tokio::time::Instant) -> io::Result<bool> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let mut client = TcpStream::connect(listener.local_addr()?).await?;
    let (accepted, _) = listener.accept().await?;
    let (mut server, last) = RxStamped::new(accepted);
    let mut one = [0u8; 1];
    loop {
        client.write_all(b".").await?;
        server.read_exact(&mut one).await?;
        if last.get().is_some_and(|(_, kernel)| kernel) {
            return Ok(true);
        }
        if tokio::time::Instant::now() >= deadline {
            return Ok(false);
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}

#[cfg(target_os = "linux")]
fn enable_kernel_stamps(socket: &impl std::os::fd::AsRawFd) -> bool {
    let on: libc::c_int = 1;
    // SAFETY: the descriptor is the socket's and open for the call; the option value
    // is a c_int that lives across it.
    let rc = unsafe {
        libc::setsockopt(
            socket.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_TIMESTAMPNS,
            (&on as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    rc == 0
}

#[cfg(not(target_os = "linux"))]
fn enable_kernel_stamps<S>(_socket: &S) -> bool {
    false
}

/// One `recvmsg` into `buf`'s unfilled part; the kernel's timestamp of the last
/// segment read (`true`), or the wall clock now when the segment carries none
/// (`false`); `None` at the end of the stream.
///
/// A segment can come without one: the kernel turns receive stamping on for the
/// whole stack only after the first socket asks for it, from a work queue, so the
/// first segments after that may be unstamped.
#[cfg(target_os = "linux")]
fn recv_stamped(stream: &TcpStream, buf: &mut ReadBuf<'_>) -> io::Result<Option<(u64, bool)>> {
    use std::os::fd::AsRawFd;
    // Room for one `SCM_TIMESTAMPNS` (a timespec) with its header, u64-aligned.
    let mut control = [0u64; 8];
    // SAFETY: recvmsg writes at most `iov_len` bytes into the unfilled part, which is
    // then marked initialised for exactly the count it returned; `control` and the
    // iovec outlive the call; the cmsg walk stays within `msg_controllen`.
    unsafe {
        let unfilled = buf.unfilled_mut();
        let mut iov = libc::iovec {
            iov_base: unfilled.as_mut_ptr().cast(),
            iov_len: unfilled.len(),
        };
        let mut msg: libc::msghdr = std::mem::zeroed();
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = control.as_mut_ptr().cast();
        msg.msg_controllen = std::mem::size_of_val(&control) as _;
        let n = libc::recvmsg(stream.as_raw_fd(), &mut msg, 0);
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        let n = n as usize;
        buf.assume_init(n);
        buf.advance(n);
        if n == 0 {
            return Ok(None);
        }
        let mut stamp = None;
        let mut c = libc::CMSG_FIRSTHDR(&msg);
        while !c.is_null() {
            if (*c).cmsg_level == libc::SOL_SOCKET && (*c).cmsg_type == libc::SCM_TIMESTAMPNS {
                let ts: libc::timespec = std::ptr::read_unaligned(libc::CMSG_DATA(c).cast());
                let ns = (ts.tv_sec as u64)
                    .saturating_mul(1_000_000_000)
                    .saturating_add(ts.tv_nsec as u64);
                stamp = Some(ns);
            }
            c = libc::CMSG_NXTHDR(&msg, c);
        }
        Ok(Some(match stamp {
            Some(ns) => (ns, true),
            None => (realtime_ns(), false),
        }))
    }
}

#[cfg(not(target_os = "linux"))]
fn recv_stamped(_stream: &TcpStream, _buf: &mut ReadBuf<'_>) -> io::Result<Option<(u64, bool)>> {
    unreachable!("kernel stamps are only enabled on Linux")
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    #[tokio::test]
    async fn a_read_carries_the_kernel_receive_time_of_its_last_segment() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let mut client = TcpStream::connect(addr).await.unwrap();
        let (accepted, _) = listener.accept().await.unwrap();
        let (mut server, last) = RxStamped::new(accepted);
        assert_eq!(last.get(), None);
        // Stamping on for the stack first (see `stamp_listener`), as the service does.
        let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
        assert!(
            stamping_by(deadline).await.unwrap(),
            "the kernel never stamped"
        );
        let before = realtime_ns();
        client.write_all(b"a").await.unwrap();
        let mut one = [0u8; 1];
        server.read_exact(&mut one).await.unwrap();
        let (ns, kernel) = last.get().expect("a stamp after a read");
        assert!(kernel);
        assert!(ns >= before && ns <= realtime_ns(), "{before} <= {ns}");
        // The stamp is the segment's, taken when it arrived, not when it was read.
        let sent = realtime_ns();
        client.write_all(b"d").await.unwrap();
        tokio::time::sleep(Duration::from_millis(30)).await;
        let read_at = realtime_ns();
        server.read_exact(&mut one).await.unwrap();
        let (ns, kernel) = last.get().unwrap();
        assert!(kernel);
        assert!(
            ns >= sent && ns < read_at,
            "stamped {ns}, sent {sent}, read {read_at}"
        );
        drop(client);
        assert_eq!(server.read(&mut one).await.unwrap(), 0, "end of stream");
    }
}

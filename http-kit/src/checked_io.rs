//! A stream whose reads and writes stop once something outside it decides so: a
//! [`Tripwire`] fired by another task, watched from the stream's I/O by a
//! [`TripwireWatch`], and [`CheckedIo`], which asks its [`IoCheck`] before every read,
//! write and flush and hands the call to the wrapped stream only when the check passes.
//!
//! These sit on every byte of a server's connections, so a check costs one atomic load:
//! the tripwire's token wait (whose poll takes locks) is polled only when the stream is
//! polled with a waker the wait does not hold yet. A server polls a connection from one
//! task, so that is about once per connection; the wait is what wakes a stream idle in a
//! read when the tripwire fires, and the flag, set before the token is cancelled, is
//! what the woken read finds.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll, Waker};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio_util::sync::{
    CancellationToken, WaitForCancellationFuture, WaitForCancellationFutureOwned,
};

/// A one-way switch that streams watch: fired once, by any holder, it stays fired.
/// Cheap to clone; every clone is the same switch.
#[derive(Debug, Clone, Default)]
pub struct Tripwire(Arc<Wire>);

#[derive(Debug, Default)]
struct Wire {
    fired: AtomicBool,
    token: CancellationToken,
}

impl Tripwire {
    /// Fires the wire and wakes every stream waiting on it.
    pub fn fire(&self) {
        // The flag first: a stream woken by the token must find it set.
        self.0.fired.store(true, Ordering::Release);
        self.0.token.cancel();
    }

    /// Whether the wire fired (one atomic load).
    pub fn is_fired(&self) -> bool {
        self.0.fired.load(Ordering::Acquire)
    }

    /// Completes when the wire fires.
    pub fn fired(&self) -> WaitForCancellationFuture<'_> {
        self.0.token.cancelled()
    }

    /// A watch on this wire for one stream's I/O.
    pub fn watch(&self) -> TripwireWatch {
        TripwireWatch {
            wait: Box::pin(self.0.token.clone().cancelled_owned()),
            wire: self.clone(),
            registered: None,
        }
    }
}

/// One stream's watch on a [`Tripwire`]: tells its I/O whether the wire fired, and
/// makes sure the task polling that I/O is woken when it does.
pub struct TripwireWatch {
    wire: Tripwire,
    wait: Pin<Box<WaitForCancellationFutureOwned>>,
    /// The waker `wait` was last polled with.
    registered: Option<Waker>,
}

impl std::fmt::Debug for TripwireWatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TripwireWatch")
            .field("fired", &self.wire.is_fired())
            .finish_non_exhaustive()
    }
}

impl TripwireWatch {
    /// Whether the wire fired; registers `cx`'s waker with the wire if it is new.
    pub fn fired(&mut self, cx: &mut Context<'_>) -> bool {
        if self.wire.is_fired() {
            return true;
        }
        if self
            .registered
            .as_ref()
            .is_some_and(|w| w.will_wake(cx.waker()))
        {
            return false;
        }
        if self.wait.as_mut().poll(cx).is_ready() {
            return true;
        }
        self.registered = Some(cx.waker().clone());
        false
    }

    /// Whether the wire fired, without registering a waker.
    pub fn is_fired(&self) -> bool {
        self.wire.is_fired()
    }
}

/// What a [`CheckedIo`] asks before each read, write and flush of its stream `S`.
pub trait IoCheck<S> {
    /// `Ok` while I/O may go on; otherwise the error the read, write or flush returns
    /// (the wrapped stream is not called). `io` is the wrapped stream.
    fn check(&mut self, cx: &mut Context<'_>, io: &S) -> io::Result<()>;

    /// Sees the bytes each read of the wrapped stream gave (`fresh`, possibly empty).
    fn read(&mut self, fresh: &[u8]) {
        let _ = fresh;
    }
}

/// A stream `S` whose reads, writes and flushes first ask the check `C`; shutdown and
/// everything else go straight to `S`.
pub struct CheckedIo<S, C> {
    inner: S,
    pub(crate) check: C,
}

impl<S, C: std::fmt::Debug> std::fmt::Debug for CheckedIo<S, C> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CheckedIo")
            .field("check", &self.check)
            .finish_non_exhaustive()
    }
}

impl<S, C> CheckedIo<S, C> {
    /// `inner`, its I/O checked by `check`.
    pub fn wrap(inner: S, check: C) -> Self {
        Self { inner, check }
    }

    /// The wrapped stream.
    pub fn get_ref(&self) -> &S {
        &self.inner
    }
}

/// A checked stream tells tonic what its check says of the connection: the check is
/// what knows the connection's context (its node, its cap entry).
#[cfg(feature = "tonic")]
impl<S, C: tonic::transport::server::Connected> tonic::transport::server::Connected
    for CheckedIo<S, C>
{
    type ConnectInfo = C::ConnectInfo;

    fn connect_info(&self) -> Self::ConnectInfo {
        self.check.connect_info()
    }
}

impl<S: AsyncRead + Unpin, C: IoCheck<S> + Unpin> AsyncRead for CheckedIo<S, C> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        this.check.check(cx, &this.inner)?;
        let before = buf.filled().len();
        let polled = Pin::new(&mut this.inner).poll_read(cx, buf);
        this.check.read(&buf.filled()[before..]);
        polled
    }
}

impl<S: AsyncWrite + Unpin, C: IoCheck<S> + Unpin> AsyncWrite for CheckedIo<S, C> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        this.check.check(cx, &this.inner)?;
        Pin::new(&mut this.inner).poll_write(cx, buf)
    }
    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        this.check.check(cx, &this.inner)?;
        Pin::new(&mut this.inner).poll_write_vectored(cx, bufs)
    }
    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        this.check.check(cx, &this.inner)?;
        Pin::new(&mut this.inner).poll_flush(cx)
    }
    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicUsize;
    use std::time::Duration;

    use futures::task::ArcWake;
    use tokio::io::{AsyncReadExt, AsyncWriteExt, DuplexStream};

    use super::*;

    /// Fails I/O with `ConnectionAborted` once its wire fires; counts the bytes read.
    struct Stops {
        watch: TripwireWatch,
        read: usize,
    }

    impl IoCheck<DuplexStream> for Stops {
        fn check(&mut self, cx: &mut Context<'_>, _io: &DuplexStream) -> io::Result<()> {
            if self.watch.fired(cx) {
                return Err(io::ErrorKind::ConnectionAborted.into());
            }
            Ok(())
        }
        fn read(&mut self, fresh: &[u8]) {
            self.read += fresh.len();
        }
    }

    fn checked() -> (CheckedIo<DuplexStream, Stops>, DuplexStream, Tripwire) {
        let (a, b) = tokio::io::duplex(64);
        let wire = Tripwire::default();
        let check = Stops {
            watch: wire.watch(),
            read: 0,
        };
        (CheckedIo::wrap(a, check), b, wire)
    }

    /// A waker that counts its wakes.
    #[derive(Default)]
    struct Wakes(AtomicUsize);

    impl ArcWake for Wakes {
        fn wake_by_ref(arc_self: &Arc<Self>) {
            arc_self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    #[tokio::test]
    async fn io_passes_through_until_the_wire_fires() {
        let (mut io, mut peer, wire) = checked();
        peer.write_all(b"hello").await.expect("writes");
        let mut buf = [0u8; 16];
        assert_eq!(io.read(&mut buf).await.expect("reads"), 5);
        assert_eq!(io.check.read, 5);
        io.write_all(b"back").await.expect("writes");
        assert_eq!(peer.read(&mut buf).await.expect("reads"), 4);

        wire.fire();
        peer.write_all(b"more").await.expect("writes");
        let kind = |r: io::Result<usize>| r.expect_err("stopped").kind();
        assert_eq!(
            kind(io.read(&mut buf).await),
            io::ErrorKind::ConnectionAborted
        );
        assert_eq!(kind(io.write(b"x").await), io::ErrorKind::ConnectionAborted);
        assert_eq!(
            io.flush().await.expect_err("stopped").kind(),
            io::ErrorKind::ConnectionAborted
        );
        assert_eq!(
            io.check.read, 5,
            "the wrapped stream is not read once fired"
        );
    }

    #[test]
    fn a_pending_read_is_woken_and_fails_when_the_wire_fires() {
        let (mut io, _peer, wire) = checked();
        let mut buf = [0u8; 16];
        let mut read = std::pin::pin!(io.read(&mut buf));
        let first = Arc::new(Wakes::default());
        let first_waker = futures::task::waker(first.clone());
        let mut cx = Context::from_waker(&first_waker);
        assert!(read.as_mut().poll(&mut cx).is_pending());
        // The task moved (a new waker): the watch registers it in place of the first.
        let second = Arc::new(Wakes::default());
        let second_waker = futures::task::waker(second.clone());
        let mut cx = Context::from_waker(&second_waker);
        assert!(read.as_mut().poll(&mut cx).is_pending());

        wire.fire();
        assert!(
            second.0.load(Ordering::SeqCst) >= 1,
            "the pending read is woken"
        );
        match read.as_mut().poll(&mut cx) {
            Poll::Ready(Err(e)) => assert_eq!(e.kind(), io::ErrorKind::ConnectionAborted),
            other => panic!("the woken read fails, got {other:?}"),
        }
    }

    #[tokio::test]
    async fn a_read_waiting_in_another_task_ends_when_the_wire_fires() {
        let (mut io, _peer, wire) = checked();
        let reader = tokio::spawn(async move {
            let mut buf = [0u8; 16];
            io.read(&mut buf).await
        });
        wire.fire();
        let r = tokio::time::timeout(Duration::from_secs(5), reader)
            .await
            .expect("the read ends")
            .expect("the reader does not panic");
        assert_eq!(
            r.expect_err("stopped").kind(),
            io::ErrorKind::ConnectionAborted
        );
    }
}

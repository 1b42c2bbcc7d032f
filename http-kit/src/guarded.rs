//! The listener policy for a server that drives its connections itself (tonic's
//! `serve_with_incoming`): the accept loop cannot close a connection, so the connection's
//! own I/O does. [`GuardedIo`] wraps an accepted stream admitted by a [`ConnectionCap`];
//! a watcher task closes it, making every later read and write fail, when
//!
//! - the cap evicts it to admit a new connection (in the cap's order: see
//!   [`ConnectionCap`]);
//! - before it spoke HTTP/2, it has been idle for the header deadline: a silent
//!   connection, a stalled HTTP/1 head, an HTTP/1 keep-alive with no next request (the
//!   same bound [`serve_bounded`](crate::serve_bounded)'s header-read timer sets).
//!
//! An HTTP/2 connection (its first bytes are the HTTP/2 preface) has no idle timer here:
//! a gRPC channel between calls is idle, and its client keeps it open on purpose (E2B's
//! API pings its orchestrators every 30 s to keep theirs,
//! `packages/api/internal/orchestrator/nodemanager/client.go`), so closing it would fail
//! the call that races the close. The server's HTTP/2 keepalive (a PING after a quiet
//! interval, the connection closed when it is not acknowledged in time) ends one whose
//! client is gone or no longer reads; the request body deadline ends a stalled stream;
//! when the cap is full it evicts them only once no connection that never had a request
//! answered is left.

use std::io;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::Arc;
use std::task::Context;
use std::time::Duration;

use tokio::task::AbortHandle;
use tokio_util::sync::CancellationToken;

use crate::checked_io::{CheckedIo, IoCheck, Tripwire, TripwireWatch};
use crate::listener::{Admitted, ConnMark, HttpLimits};

/// The first bytes of every HTTP/2 connection (RFC 9113, section 3.4).
const H2_PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// What the first bytes of a connection said.
const PROTO_UNKNOWN: u8 = 0;
const PROTO_H1: u8 = 1;
const PROTO_H2: u8 = 2;

/// An accepted connection under the listener policy (see the module doc): its reads and
/// writes fail with `ConnectionAborted` once the policy closes it, and dropping it frees
/// its place in the cap.
///
/// Each read and write loads one flag; the close's wait is polled only when the
/// connection is polled with a waker it does not hold yet (a server polls a connection
/// from one task, so about once per connection).
pub type GuardedIo<S> = CheckedIo<S, PolicyCheck>;

/// The listener policy's check of one connection's I/O (what makes a [`GuardedIo`]):
/// the close its watcher decides, its place in the cap, and the protocol its first
/// bytes said. Dropping it stops the watcher.
pub struct PolicyCheck {
    admitted: Admitted,
    close: TripwireWatch,
    proto: Arc<AtomicU8>,
    /// Bytes of the HTTP/2 preface matched so far, while the protocol is unknown.
    matched: usize,
    watcher: AbortHandle,
}

impl std::fmt::Debug for PolicyCheck {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PolicyCheck")
            .field("proto", &self.proto.load(Ordering::Relaxed))
            .field("closed", &self.close.is_fired())
            .finish_non_exhaustive()
    }
}

impl<S> CheckedIo<S, PolicyCheck> {
    /// `inner`, admitted as `admitted`, under `limits`' header deadline and idle
    /// timeout (whichever is shorter bounds an HTTP/1 connection's wait for its next
    /// head). Spawns its watcher: call within a tokio runtime.
    pub fn new(inner: S, admitted: Admitted, limits: HttpLimits) -> Self {
        let close = Tripwire::default();
        let proto = Arc::new(AtomicU8::new(PROTO_UNKNOWN));
        let watcher = tokio::spawn(watch(
            admitted.mark().clone(),
            admitted.eviction(),
            proto.clone(),
            close.clone(),
            limits.header_read.min(limits.idle),
        ))
        .abort_handle();
        let check = PolicyCheck {
            admitted,
            close: close.watch(),
            proto,
            matched: 0,
            watcher,
        };
        CheckedIo::wrap(inner, check)
    }

    /// Signs of life of this connection, for its requests
    /// ([`ConnMark::request`]).
    pub fn mark(&self) -> &ConnMark {
        self.check.admitted.mark()
    }

    /// Whether the policy closed this connection.
    pub fn is_closed(&self) -> bool {
        self.check.close.is_fired()
    }
}

impl<S> IoCheck<S> for PolicyCheck {
    fn check(&mut self, cx: &mut Context<'_>, _io: &S) -> io::Result<()> {
        if self.close.fired(cx) {
            return Err(io::Error::new(
                io::ErrorKind::ConnectionAborted,
                "closed by the listener policy",
            ));
        }
        Ok(())
    }

    fn read(&mut self, fresh: &[u8]) {
        self.sniff(fresh);
    }
}

impl PolicyCheck {
    /// Follows the first bytes read until they tell HTTP/2's preface from anything else.
    fn sniff(&mut self, read: &[u8]) {
        if self.matched == usize::MAX || read.is_empty() {
            return;
        }
        let want = &H2_PREFACE[self.matched..];
        let n = want.len().min(read.len());
        if read[..n] != want[..n] {
            self.matched = usize::MAX;
            self.proto.store(PROTO_H1, Ordering::Release);
        } else if self.matched + n == H2_PREFACE.len() {
            self.matched = usize::MAX;
            self.proto.store(PROTO_H2, Ordering::Release);
        } else {
            self.matched += n;
        }
    }
}

impl Drop for PolicyCheck {
    fn drop(&mut self) {
        self.watcher.abort();
    }
}

/// Closes the connection of `mark` when the cap evicts it, or when, not yet speaking
/// HTTP/2, it has been idle for `wait`.
async fn watch(
    mark: ConnMark,
    evict: CancellationToken,
    proto: Arc<AtomicU8>,
    close: Tripwire,
    wait: Duration,
) {
    let timer = tokio::time::sleep(wait);
    let mut timer = std::pin::pin!(timer);
    loop {
        tokio::select! {
            _ = evict.cancelled() => {
                tracing::debug!("closing a connection waiting on its client: the cap is full");
                break;
            }
            () = timer.as_mut() => {
                if proto.load(Ordering::Acquire) == PROTO_H2 {
                    // Bounded by keepalive, body deadlines and eviction from now on.
                    evict.cancelled().await;
                    break;
                }
                match mark.idle() {
                    Some(w) if w >= wait => {
                        tracing::debug!("closing a connection idle past the header deadline");
                        break;
                    }
                    Some(w) => timer.as_mut().reset(tokio::time::Instant::now() + (wait - w)),
                    None => timer.as_mut().reset(tokio::time::Instant::now() + wait),
                }
            }
        }
    }
    close.fire();
}

#[cfg(test)]
mod tests {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    use super::*;
    use crate::ConnectionCap;

    fn limits(header_read: Duration) -> HttpLimits {
        HttpLimits {
            header_read,
            body_read: Duration::from_secs(5),
            idle: Duration::from_secs(5),
            max_connections: 8,
        }
    }

    async fn guarded(
        header_read: Duration,
    ) -> (GuardedIo<tokio::io::DuplexStream>, tokio::io::DuplexStream) {
        let cap = ConnectionCap::new(8);
        let (a, b) = tokio::io::duplex(256);
        let admitted = cap.admit().await;
        (GuardedIo::new(a, admitted, limits(header_read)), b)
    }

    #[tokio::test]
    async fn a_silent_connection_is_closed_at_the_header_deadline() {
        let (mut io, _peer) = guarded(Duration::from_millis(100)).await;
        let mut buf = [0u8; 8];
        let r = tokio::time::timeout(Duration::from_secs(5), io.read(&mut buf))
            .await
            .expect("the read ends");
        assert_eq!(
            r.expect_err("closed").kind(),
            io::ErrorKind::ConnectionAborted
        );
        assert!(io.is_closed());
    }

    #[tokio::test]
    async fn an_http2_connection_outlives_the_header_deadline() {
        let (mut io, mut peer) = guarded(Duration::from_millis(50)).await;
        peer.write_all(H2_PREFACE).await.expect("writes");
        let mut buf = [0u8; 64];
        let n = io.read(&mut buf).await.expect("reads");
        assert!(n > 0);
        // Idle well past the deadline: still open, and still reads.
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert!(!io.is_closed());
        peer.write_all(b"x").await.expect("writes");
        assert_eq!(io.read(&mut buf).await.expect("reads"), 1);
    }

    #[test]
    fn the_preface_is_told_apart_split_anywhere() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        rt.block_on(async {
            for split in 1..H2_PREFACE.len() {
                let (mut io, _peer) = guarded(Duration::from_secs(5)).await;
                io.check.sniff(&H2_PREFACE[..split]);
                assert_eq!(io.check.proto.load(Ordering::Relaxed), PROTO_UNKNOWN);
                io.check.sniff(&H2_PREFACE[split..]);
                assert_eq!(
                    io.check.proto.load(Ordering::Relaxed),
                    PROTO_H2,
                    "split {split}"
                );
            }
            let (mut io, _peer) = guarded(Duration::from_secs(5)).await;
            io.check.sniff(b"GET / HTTP/1.1\r\n");
            assert_eq!(io.check.proto.load(Ordering::Relaxed), PROTO_H1);
        });
    }
}

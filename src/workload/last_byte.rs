//! Last-byte release of a burst: each create goes out before the start gate but for
//! its final byte, which the gate releases. The gate then costs one wake-up and one
//! write per request (on a connection that is open and warm), not building and
//! sending whole requests, so the burst reaches the service together. This is the
//! "last-byte synchronisation" race testers use; a server sees a request arrive when
//! its last byte does.

use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::task::{Context, Poll, Waker};
use std::time::Instant;

use axum::body::Bytes;
use http_body::{Frame, SizeHint};
use tokio::sync::oneshot;

const HELD: u8 = 0;
const OPEN: u8 = 1;
const ABORTED: u8 = 2;

/// The gate every held body waits on.
#[derive(Debug, Default)]
pub(crate) struct Release {
    state: AtomicU8,
    wakers: Mutex<Vec<Waker>>,
}

impl Release {
    /// Releases every held final byte.
    pub(crate) fn open(&self) {
        self.settle(OPEN);
    }

    /// Fails every held body (the run was cancelled before the gate).
    pub(crate) fn abort(&self) {
        self.settle(ABORTED);
    }

    fn settle(&self, to: u8) {
        let _ = self
            .state
            .compare_exchange(HELD, to, Ordering::AcqRel, Ordering::Acquire);
        let wakers = std::mem::take(&mut *self.wakers.lock().unwrap_or_else(|p| p.into_inner()));
        for w in wakers {
            w.wake();
        }
    }

    fn poll_open(&self, cx: &mut Context<'_>) -> Poll<bool> {
        match self.state.load(Ordering::Acquire) {
            OPEN => return Poll::Ready(true),
            ABORTED => return Poll::Ready(false),
            _ => {}
        }
        let mut wakers = self.wakers.lock().unwrap_or_else(|p| p.into_inner());
        // Checked again under the lock: `settle` takes the wakers after the state moved.
        match self.state.load(Ordering::Acquire) {
            OPEN => Poll::Ready(true),
            ABORTED => Poll::Ready(false),
            _ => {
                if !wakers.iter().any(|w| w.will_wake(cx.waker())) {
                    wakers.push(cx.waker().clone());
                }
                Poll::Pending
            }
        }
    }
}

/// A request body sent at once but for its final byte, which waits for a [`Release`].
#[derive(Debug)]
pub(crate) struct HeldBody {
    head: Option<Bytes>,
    tail: Option<Bytes>,
    len: u64,
    release: Arc<Release>,
    armed: Option<oneshot::Sender<()>>,
    released_at: Arc<OnceLock<Instant>>,
}

/// What the sender of a held body learns: when it is armed (everything but the last
/// byte handed to the connection, or the request gave up) and when it was released.
#[derive(Debug)]
pub(crate) struct HeldHandle {
    /// Fires once the body waits at the gate (or is dropped unsent).
    pub armed: oneshot::Receiver<()>,
    /// When the final byte was handed to the connection.
    pub released_at: Arc<OnceLock<Instant>>,
}

impl HeldBody {
    /// `bytes` held back by its final byte until `release` opens.
    pub(crate) fn new(bytes: Vec<u8>, release: Arc<Release>) -> (Self, HeldHandle) {
        let mut head = Bytes::from(bytes);
        let len = head.len() as u64;
        let tail = (!head.is_empty()).then(|| head.split_off(head.len() - 1));
        let (armed_tx, armed) = oneshot::channel();
        let released_at = Arc::new(OnceLock::new());
        let body = Self {
            head: (!head.is_empty()).then_some(head),
            tail,
            len,
            release,
            armed: Some(armed_tx),
            released_at: released_at.clone(),
        };
        (body, HeldHandle { armed, released_at })
    }
}

impl http_body::Body for HeldBody {
    type Data = Bytes;
    type Error = io::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, io::Error>>> {
        let this = &mut *self;
        if let Some(head) = this.head.take() {
            return Poll::Ready(Some(Ok(Frame::data(head))));
        }
        if this.tail.is_none() {
            return Poll::Ready(None);
        }
        if let Some(armed) = this.armed.take() {
            let _ = armed.send(());
        }
        match this.release.poll_open(cx) {
            Poll::Pending => Poll::Pending,
            Poll::Ready(false) => Poll::Ready(Some(Err(io::Error::other(
                "the burst was cancelled before its gate opened",
            )))),
            Poll::Ready(true) => {
                let _ = this.released_at.set(Instant::now());
                Poll::Ready(this.tail.take().map(|t| Ok(Frame::data(t))))
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.head.is_none() && self.tail.is_none()
    }

    fn size_hint(&self) -> SizeHint {
        SizeHint::with_exact(self.len)
    }
}

impl Drop for HeldBody {
    fn drop(&mut self) {
        // A request that failed before reaching the gate must not hold the others.
        if let Some(armed) = self.armed.take() {
            let _ = armed.send(());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::BodyExt;

    #[tokio::test]
    async fn everything_but_the_last_byte_goes_before_the_gate() {
        let release = Arc::new(Release::default());
        let (mut body, handle) = HeldBody::new(b"{\"a\":1}".to_vec(), release.clone());
        assert_eq!(http_body::Body::size_hint(&body).exact(), Some(7));
        let head = body.frame().await.unwrap().unwrap().into_data().unwrap();
        assert_eq!(&head[..], b"{\"a\":1");
        // The tail waits for the gate.
        let pending =
            tokio::time::timeout(std::time::Duration::from_millis(20), body.frame()).await;
        assert!(pending.is_err(), "the last byte left before the gate");
        handle.armed.await.expect("armed before the gate");
        assert!(handle.released_at.get().is_none());
        release.open();
        let tail = body.frame().await.unwrap().unwrap().into_data().unwrap();
        assert_eq!(&tail[..], b"}");
        assert!(body.frame().await.is_none());
        assert!(handle.released_at.get().is_some());
    }

    #[tokio::test]
    async fn an_aborted_gate_fails_the_body_and_a_dropped_body_arms() {
        let release = Arc::new(Release::default());
        let (mut body, _h) = HeldBody::new(b"xy".to_vec(), release.clone());
        let _ = body.frame().await;
        release.abort();
        assert!(body.frame().await.unwrap().is_err());
        let (body, h) = HeldBody::new(b"xy".to_vec(), release);
        drop(body);
        assert!(
            h.armed.await.is_ok(),
            "a dropped body does not hold the gate"
        );
    }
}

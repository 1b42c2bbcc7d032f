//! Refusing oversized gRPC requests with RESOURCE_EXHAUSTED, as gRPC specifies.
//!
//! tonic answers a message over its decoding limit with OUT_OF_RANGE. The gRPC status
//! code spec says a receiver refusing a message for its size answers RESOURCE_EXHAUSTED
//! (grpc-go, the orchestrator's stack, does), so callers written against E2B must see that.
//! [`Limited`] reads the 5-byte prefix of every gRPC message (flag, then
//! big-endian length) of a request body as it streams past, and fails the body with
//! RESOURCE_EXHAUSTED as soon as a prefix announces more than the limit: before tonic
//! sees that prefix, and before anything of the message is buffered. tonic turns a body
//! error that is a [`Status`] into the RPC's status. The
//! [`IntakeLayer`](crate::intake::IntakeLayer) wraps every request body in one.

use std::pin::Pin;
use std::task::{Context, Poll};

use http_body::Frame;
use tonic::body::Body;
use tonic::codegen::Bytes;
use tonic::Status;

/// Largest request message a node accepts, in bytes: 4 MiB, gRPC's customary default
/// (and tonic's). Larger ones get RESOURCE_EXHAUSTED.
pub const MAX_MESSAGE_BYTES: usize = 4 * 1024 * 1024;

/// Length of the prefix of every gRPC message: compressed flag, then a `u32` length.
const PREFIX: usize = 5;

/// Follows the message framing of a gRPC body chunk by chunk.
#[derive(Debug, Clone, Default)]
pub(crate) struct FrameScanner {
    prefix: [u8; PREFIX],
    have: usize,
    /// Bytes of the current message not seen yet.
    skip: u64,
}

impl FrameScanner {
    /// Feeds the next chunk; `Err(len)` names the first message longer than `limit`.
    pub(crate) fn scan(&mut self, mut chunk: &[u8], limit: usize) -> Result<(), u64> {
        while !chunk.is_empty() {
            if self.skip > 0 {
                let n = usize::try_from(self.skip)
                    .unwrap_or(usize::MAX)
                    .min(chunk.len());
                chunk = &chunk[n..];
                self.skip -= n as u64;
                continue;
            }
            let n = (PREFIX - self.have).min(chunk.len());
            self.prefix[self.have..self.have + n].copy_from_slice(&chunk[..n]);
            self.have += n;
            chunk = &chunk[n..];
            if self.have == PREFIX {
                self.have = 0;
                let p = self.prefix;
                let len = u64::from(u32::from_be_bytes([p[1], p[2], p[3], p[4]]));
                if len > limit as u64 {
                    return Err(len);
                }
                self.skip = len;
            }
        }
        Ok(())
    }
}

/// A request body whose data frames pass through a [`FrameScanner`]: every message
/// prefix is checked against the limit, frames are passed on as they come.
#[derive(Debug)]
pub(crate) struct Limited {
    inner: Body,
    scanner: FrameScanner,
    limit: usize,
}

impl Limited {
    /// `inner`, whose messages may be at most `limit` bytes long.
    pub(crate) fn new(inner: Body, limit: usize) -> Self {
        Self {
            inner,
            scanner: FrameScanner::default(),
            limit,
        }
    }
}

impl http_body::Body for Limited {
    type Data = Bytes;
    type Error = Status;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Status>>> {
        let this = &mut *self;
        let frame = match Pin::new(&mut this.inner).poll_frame(cx) {
            Poll::Ready(Some(Ok(frame))) => frame,
            other => return other,
        };
        if let Some(data) = frame.data_ref() {
            if let Err(len) = this.scanner.scan(data, this.limit) {
                let limit = this.limit;
                return Poll::Ready(Some(Err(Status::resource_exhausted(format!(
                    "request message of {len} bytes exceeds the limit of {limit} bytes"
                )))));
            }
        }
        Poll::Ready(Some(Ok(frame)))
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.inner.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn message(len: u32) -> Vec<u8> {
        let mut m = vec![0u8];
        m.extend_from_slice(&len.to_be_bytes());
        m.extend(std::iter::repeat_n(7u8, len as usize));
        m
    }

    #[test]
    fn scanner_follows_messages_split_anywhere() {
        let mut body = message(3);
        body.extend(message(0));
        body.extend(message(10));
        for split in 0..body.len() {
            let mut s = FrameScanner::default();
            let (a, b) = body.split_at(split);
            assert_eq!(s.scan(a, 10), Ok(()));
            assert_eq!(s.scan(b, 10), Ok(()), "split at {split}");
            assert_eq!((s.have, s.skip), (0, 0), "ends on a boundary");
        }
    }

    #[test]
    fn scanner_refuses_a_prefix_over_the_limit_even_byte_by_byte() {
        let mut body = message(4);
        body.extend_from_slice(&[0, 0xff, 0xff, 0xff, 0xff]);
        let mut s = FrameScanner::default();
        let r: Result<Vec<()>, u64> = body.chunks(1).map(|c| s.scan(c, 4)).collect();
        assert_eq!(r, Err(u64::from(u32::MAX)));
        let mut s = FrameScanner::default();
        assert_eq!(s.scan(&message(5), 4), Err(5));
    }
}

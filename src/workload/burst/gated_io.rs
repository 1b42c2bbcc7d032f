//! Last-byte release of a burst over raw sockets. Each create is written whole to a
//! [`GatedIo`] but for the final byte of the stream, which stays in user space; when
//! the gate opens, one loop per core ([`Release::open`]) writes the held bytes of its
//! share of the connections straight to their sockets, one `send` after another. The
//! burst then leaves in the time of 500 one-byte writes divided over the cores (3-5 ms
//! for 500 on loopback on the 2-core machine of `docs/benchmarks.md`), not of 500
//! client tasks each woken and scheduled to write its own byte, and a server sees a
//! request arrive when its last byte does ("last-byte synchronisation").
//!
//! The byte held is the last one the upper layer wrote, whatever the protocol: under
//! TLS it is the final ciphertext byte, so the server cannot decrypt the request's
//! last record before the gate.

use std::io::{self, IoSlice};
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::task::{ready, Context, Poll};
use std::time::Instant;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio::sync::oneshot;

use super::boost::Boost;

/// A peer that closed must give an error, not a SIGPIPE.
#[cfg(target_os = "linux")]
const SEND_FLAGS: libc::c_int = libc::MSG_NOSIGNAL;
#[cfg(not(target_os = "linux"))]
const SEND_FLAGS: libc::c_int = 0;

/// What a connection does with what is written to it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// Bytes go straight to the socket.
    Pass,
    /// The last byte written so far is held back.
    Hold,
}

#[derive(Debug)]
struct HeldState {
    mode: Mode,
    byte: Option<u8>,
    /// Fires when the held request is written but its last byte.
    armed: Option<oneshot::Sender<()>>,
}

/// One connection's socket and its held byte, shared by the connection's IO and the
/// [`Release`].
#[derive(Debug)]
pub(crate) struct Gate {
    stream: TcpStream,
    state: Mutex<HeldState>,
    /// The request is whole in the write path (its body gave its last frame).
    body_done: AtomicBool,
    released_at: OnceLock<Instant>,
}

impl Gate {
    fn state(&self) -> MutexGuard<'_, HeldState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// From now on the last byte written is held, until [`Release::open`]. The
    /// receiver fires once the request is written but for that byte (or the gate is
    /// dropped or released first).
    pub(crate) fn hold(&self) -> oneshot::Receiver<()> {
        let (tx, rx) = oneshot::channel();
        let mut st = self.state();
        st.mode = Mode::Hold;
        st.armed = Some(tx);
        self.body_done.store(false, Ordering::Release);
        rx
    }

    /// The held request ended without being released (it failed): whoever waits for
    /// it to be armed stops waiting.
    pub(crate) fn give_up(&self) {
        self.state().armed = None;
    }

    /// The burst was cancelled before its gate: the held byte is dropped and the
    /// connection shut, so the target never sees the request whole.
    fn abort(&self) {
        let mut st = self.state();
        st.mode = Mode::Pass;
        st.armed = None;
        st.byte = None;
        drop(st);
        let _ = socket2::SockRef::from(&self.stream).shutdown(std::net::Shutdown::Both);
    }

    /// The request being held has handed its whole body to the connection.
    pub(crate) fn body_done(&self) {
        self.body_done.store(true, Ordering::Release);
    }

    /// When the held byte went out (`None`: not released, or nothing was held).
    pub(crate) fn released_at(&self) -> Option<Instant> {
        self.released_at.get().copied()
    }

    /// Sends the held byte now and stops holding. The byte goes out on this thread,
    /// in this call, unless the socket's send buffer is full: then a task sends it
    /// once the socket is writable.
    fn release(self: &Arc<Self>) {
        let mut st = self.state();
        st.mode = Mode::Pass;
        st.armed = None;
        let Some(b) = st.byte.take() else {
            return;
        };
        match socket2::SockRef::from(&self.stream).send_with_flags(&[b], SEND_FLAGS) {
            Ok(1) => {
                let _ = self.released_at.set(Instant::now());
            }
            _ => {
                // Kept in order: nothing else is written while the byte waits.
                st.byte = Some(b);
                drop(st);
                let gate = self.clone();
                tokio::spawn(async move { gate.send_held_when_writable().await });
            }
        }
    }

    async fn send_held_when_writable(&self) {
        loop {
            if self.stream.writable().await.is_err() {
                return;
            }
            let mut st = self.state();
            let Some(b) = st.byte else {
                return;
            };
            match self.stream.try_write(&[b]) {
                Ok(1) => {
                    st.byte = None;
                    let _ = self.released_at.set(Instant::now());
                    return;
                }
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(_) => return,
            }
        }
    }
}

const HELD: u8 = 0;
const OPEN: u8 = 1;
const ABORTED: u8 = 2;

/// The gate of one burst: every held connection registers here and is released by
/// one loop.
#[derive(Debug, Default)]
pub(crate) struct Release {
    gates: Mutex<Vec<Arc<Gate>>>,
    state: AtomicU8,
    /// Whether every release loop ran at real-time priority (set when they ran).
    realtime: OnceLock<bool>,
    /// How many release loops ran (set when they ran).
    lanes: OnceLock<usize>,
}

impl Release {
    /// Adds a connection to release at the gate (at once, if the gate already opened).
    pub(crate) fn register(&self, gate: Arc<Gate>) {
        let mut gates = self.gates.lock().unwrap_or_else(|p| p.into_inner());
        match self.state.load(Ordering::Acquire) {
            HELD => gates.push(gate),
            OPEN => gate.release(),
            _ => gate.abort(),
        }
    }

    /// Writes every held byte, one connection after another, in one loop per core
    /// ([`release_lanes`]): this thread takes the first share, scoped threads the others,
    /// all starting together. On loopback each `send` runs the segment's whole transmit
    /// and receive path in the sender's context, so one loop is bound by one core's
    /// speed at that path; lanes on the other cores divide the spread by their number
    /// while those cores are free. Only the first of `open` and `abort` acts.
    pub(crate) fn open(&self) {
        let gates = self.settle(OPEN);
        let share = gates.len().div_ceil(release_lanes(gates.len())).max(1);
        // As many lanes as shares (never a lane without one to wait at the start).
        let lanes = gates.len().div_ceil(share).max(1);
        let start = std::sync::Barrier::new(lanes);
        let boosted = std::sync::atomic::AtomicUsize::new(0);
        let runtime = tokio::runtime::Handle::try_current().ok();
        let t0 = Instant::now();
        std::thread::scope(|scope| {
            let mut shares = gates.chunks(share);
            let mine = shares.next().unwrap_or(&[]);
            for theirs in shares {
                let (start, boosted, runtime) = (&start, &boosted, runtime.as_ref());
                // A byte that finds its socket full is sent by a task of the runtime.
                scope.spawn(move || {
                    let _in_runtime = runtime.map(tokio::runtime::Handle::enter);
                    release_lane(theirs, start, boosted);
                });
            }
            release_lane(mine, &start, &boosted);
        });
        let took = t0.elapsed();
        let _ = self.realtime.set(boosted.load(Ordering::Relaxed) == lanes);
        let _ = self.lanes.set(lanes);
        tracing::debug!(
            connections = gates.len(),
            lanes,
            realtime = self.realtime.get(),
            ?took,
            "burst released"
        );
    }

    /// Whether every release loop ran at real-time priority; `None` before they ran.
    pub(crate) fn realtime(&self) -> Option<bool> {
        self.realtime.get().copied()
    }

    /// How many release loops ran; `None` before they ran.
    #[cfg(test)]
    fn lanes(&self) -> Option<usize> {
        self.lanes.get().copied()
    }

    /// Drops every held byte and shuts its connection (the run was cancelled before
    /// the gate).
    pub(crate) fn abort(&self) {
        for g in self.settle(ABORTED) {
            g.abort();
        }
    }

    fn settle(&self, to: u8) -> Vec<Arc<Gate>> {
        let mut gates = self.gates.lock().unwrap_or_else(|p| p.into_inner());
        match self
            .state
            .compare_exchange(HELD, to, Ordering::AcqRel, Ordering::Acquire)
        {
            Ok(_) => std::mem::take(&mut *gates),
            Err(_) => Vec::new(),
        }
    }
}

/// Below this many held bytes one loop releases them: starting a thread (tens of
/// microseconds) is not worth a share of a few sends of ~10 us each.
const ONE_LANE_BELOW: usize = 64;

/// Release loops for `held` bytes: one per core (at most 8), one for a small burst.
fn release_lanes(held: usize) -> usize {
    if held < ONE_LANE_BELOW {
        return 1;
    }
    std::thread::available_parallelism()
        .map_or(1, std::num::NonZeroUsize::get)
        .clamp(1, 8)
}

/// One release loop: at real-time priority when the system allows it, started with the
/// other lanes, then one `send` per gate.
fn release_lane(
    gates: &[Arc<Gate>],
    start: &std::sync::Barrier,
    boosted: &std::sync::atomic::AtomicUsize,
) {
    let boost = Boost::try_new();
    if boost.is_some() {
        boosted.fetch_add(1, Ordering::Relaxed);
    }
    start.wait();
    for g in gates {
        g.release();
    }
    drop(boost);
}

/// A TCP connection whose last written byte a [`Gate`] may hold back.
#[derive(Debug)]
pub(crate) struct GatedIo {
    gate: Arc<Gate>,
}

impl GatedIo {
    /// Wraps a connected stream; it passes bytes through until [`Gate::hold`].
    pub(crate) fn new(stream: TcpStream) -> (Self, Arc<Gate>) {
        let gate = Arc::new(Gate {
            stream,
            state: Mutex::new(HeldState {
                mode: Mode::Pass,
                byte: None,
                armed: None,
            }),
            body_done: AtomicBool::new(false),
            released_at: OnceLock::new(),
        });
        (Self { gate: gate.clone() }, gate)
    }

    /// One write of `bufs` to the socket, as soon as it is writable.
    fn write_raw(&self, cx: &mut Context<'_>, bufs: &[IoSlice<'_>]) -> Poll<io::Result<usize>> {
        loop {
            ready!(self.gate.stream.poll_write_ready(cx))?;
            match self.gate.stream.try_write_vectored(bufs) {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
                r => return Poll::Ready(r),
            }
        }
    }
}

impl AsyncRead for GatedIo {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        loop {
            ready!(self.gate.stream.poll_read_ready(cx))?;
            let unfilled = buf.initialize_unfilled();
            match self.gate.stream.try_read(unfilled) {
                Ok(n) => {
                    buf.advance(n);
                    return Poll::Ready(Ok(()));
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
                Err(e) => return Poll::Ready(Err(e)),
            }
        }
    }
}

impl AsyncWrite for GatedIo {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        if buf.is_empty() {
            return Poll::Ready(Ok(0));
        }
        let mut st = self.gate.state();
        let hold = st.mode == Mode::Hold;
        // What of `buf` goes now: all of it, or when holding all but its last byte,
        // which becomes the held one.
        let now = if hold { &buf[..buf.len() - 1] } else { buf };
        // A byte held earlier goes out first, in the same write (one segment, not a
        // one-byte segment of its own before every write of a held request).
        if let Some(b) = st.byte {
            let n = ready!(self.write_raw(cx, &[IoSlice::new(&[b]), IoSlice::new(now)]))?;
            if n == 0 {
                return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
            }
            st.byte = None;
            let sent = n - 1;
            if sent == now.len() {
                if hold {
                    st.byte = Some(buf[buf.len() - 1]);
                }
                return Poll::Ready(Ok(buf.len()));
            }
            if sent > 0 {
                return Poll::Ready(Ok(sent));
            }
            // Only the held byte went: `buf` is still to write.
        }
        if !now.is_empty() {
            let n = ready!(self.write_raw(cx, &[IoSlice::new(now)]))?;
            if n < now.len() {
                return Poll::Ready(Ok(n));
            }
        }
        if hold {
            st.byte = Some(buf[buf.len() - 1]);
        }
        Poll::Ready(Ok(buf.len()))
    }

    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        // The socket has no user-space buffer; only the held byte stays, by design.
        let mut st = self.gate.state();
        if st.mode == Mode::Hold && st.byte.is_some() && self.gate.body_done.load(Ordering::Acquire)
        {
            if let Some(tx) = st.armed.take() {
                let _ = tx.send(());
            }
        }
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let sock = socket2::SockRef::from(&self.gate.stream);
        match sock.shutdown(std::net::Shutdown::Write) {
            Err(e) if e.kind() != io::ErrorKind::NotConnected => Poll::Ready(Err(e)),
            _ => Poll::Ready(Ok(())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpListener;

    /// A gated client connection and the server's end of it.
    async fn pair() -> (GatedIo, Arc<Gate>, TcpStream) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let client = TcpStream::connect(listener.local_addr().unwrap())
            .await
            .unwrap();
        let (server, _) = listener.accept().await.unwrap();
        let (io, gate) = GatedIo::new(client);
        (io, gate, server)
    }

    /// Nothing more is readable now (the bytes asked for were never handed to the
    /// kernel, so none can be on their way).
    fn nothing_more(server: &TcpStream) {
        let mut b = [0u8; 8];
        let r = server.try_read(&mut b);
        assert!(
            matches!(&r, Err(e) if e.kind() == io::ErrorKind::WouldBlock),
            "{r:?}"
        );
    }

    #[tokio::test]
    async fn a_held_request_leaves_but_for_its_last_byte_until_the_gate_opens() {
        let (mut io, gate, mut server) = pair().await;
        // Passing through until held.
        io.write_all(b"warm").await.unwrap();
        let mut got = [0u8; 4];
        server.read_exact(&mut got).await.unwrap();
        let mut armed = gate.hold();
        let release = Release::default();
        release.register(gate.clone());
        io.write_all(b"POST").await.unwrap();
        io.write_all(b" /x").await.unwrap();
        io.flush().await.unwrap();
        assert!(armed.try_recv().is_err(), "armed before the body was whole");
        gate.body_done();
        io.flush().await.unwrap();
        armed
            .await
            .expect("armed once the body is whole and flushed");
        let mut got = [0u8; 6];
        server.read_exact(&mut got).await.unwrap();
        assert_eq!(&got, b"POST /");
        nothing_more(&server);
        assert_eq!(gate.released_at(), None);
        let before = Instant::now();
        release.open();
        let mut last = [0u8; 1];
        server.read_exact(&mut last).await.unwrap();
        assert_eq!(&last, b"x");
        assert!(gate.released_at().is_some_and(|t| t >= before));
        // After the gate the connection passes bytes through again.
        io.write_all(b"!").await.unwrap();
        server.read_exact(&mut last).await.unwrap();
        assert_eq!(&last, b"!");
        // A gate registered after the opening is released at once.
        let (mut io2, gate2, mut server2) = pair().await;
        let _armed = gate2.hold();
        io2.write_all(b"ab").await.unwrap();
        release.register(gate2.clone());
        let mut two = [0u8; 2];
        server2.read_exact(&mut two).await.unwrap();
        assert_eq!(&two, b"ab");
    }

    #[test]
    fn a_small_burst_has_one_lane_and_a_large_one_a_lane_per_core() {
        assert_eq!(release_lanes(ONE_LANE_BELOW - 1), 1);
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        assert_eq!(release_lanes(5_000), cores.clamp(1, 8));
    }

    /// Every held byte of a burst split over lanes arrives, each after its gate opened,
    /// whatever the lane that sent it.
    #[tokio::test]
    async fn every_held_byte_of_a_burst_over_several_lanes_is_released_once() {
        const N: usize = ONE_LANE_BELOW * 2 + 3;
        let release = Release::default();
        let mut held = Vec::new();
        for _ in 0..N {
            let (mut io, gate, server) = pair().await;
            let armed = gate.hold();
            release.register(gate.clone());
            io.write_all(b"ab").await.unwrap();
            gate.body_done();
            io.flush().await.unwrap();
            armed.await.expect("armed");
            held.push((io, gate, server));
        }
        let before = Instant::now();
        release.open();
        assert!(release.realtime().is_some(), "the lanes ran");
        // One loop per core (up to 8) shared the release.
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        assert_eq!(release.lanes(), Some(cores.clamp(1, 8)));
        for (_io, gate, mut server) in held {
            let mut two = [0u8; 2];
            tokio::time::timeout(
                std::time::Duration::from_secs(10),
                server.read_exact(&mut two),
            )
            .await
            .expect("the held byte arrives")
            .unwrap();
            assert_eq!(&two, b"ab");
            nothing_more(&server);
            assert!(gate.released_at().is_some_and(|t| t >= before));
        }
    }

    #[tokio::test]
    async fn an_aborted_gate_never_sends_the_held_byte_and_a_failed_create_stops_the_wait() {
        let (mut io, gate, mut server) = pair().await;
        let armed = gate.hold();
        let release = Release::default();
        release.register(gate.clone());
        io.write_all(b"abc").await.unwrap();
        gate.give_up();
        assert!(
            armed.await.is_err(),
            "a given-up create does not hold the gate"
        );
        release.abort();
        let mut got = Vec::new();
        server.read_to_end(&mut got).await.unwrap();
        assert_eq!(
            got, b"ab",
            "the held byte was dropped and the connection shut"
        );
        release.open();
        assert_eq!(gate.released_at(), None, "open after abort does nothing");
    }

    #[tokio::test]
    async fn a_release_onto_a_full_send_buffer_sends_the_byte_once_it_drains() {
        let (mut io, gate, mut server) = pair().await;
        let _armed = gate.hold();
        io.write_all(b"ab").await.unwrap();
        // Fill the socket until the kernel takes no more (the server is not reading).
        let chunk = vec![b'.'; 64 * 1024];
        let mut filled = 0usize;
        loop {
            match gate.stream.try_write(&chunk) {
                Ok(n) => filled += n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) => panic!("{e}"),
            }
            assert!(filled < 1 << 30, "the send buffer never filled");
        }
        let release = Release::default();
        release.register(gate.clone());
        // Most often the one-byte send finds no room and a task sends it later (a
        // late ACK may make room first: either way the byte must arrive, and last).
        release.open();
        // Drain: everything arrives, the held byte last.
        let mut got = Vec::new();
        let want = 1 + filled + 1;
        let mut buf = vec![0u8; 64 * 1024];
        while got.len() < want {
            let n = tokio::time::timeout(std::time::Duration::from_secs(10), server.read(&mut buf))
                .await
                .expect("the held byte arrives once the buffer drains")
                .unwrap();
            assert!(n > 0, "closed early at {} of {want}", got.len());
            got.extend_from_slice(&buf[..n]);
        }
        assert_eq!(got[0], b'a');
        assert_eq!(got[want - 1], b'b');
        assert!(gate.released_at().is_some());
    }
}

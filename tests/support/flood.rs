//! A flood of stalled clients held against a listener, and a well-behaved client timed
//! through it: the check every listener of the project passes (silent connections and
//! stalled request bodies must not keep a normal request from its answer).
#![allow(dead_code)]

use std::net::SocketAddr;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Silent connections and stalled bodies each flood holds (the figure to withstand).
pub const FLOOD: usize = 2_000;

/// Longest a normal request may take to be answered during a flood.
pub const ANSWER_WITHIN: Duration = Duration::from_secs(1);

/// Requests timed through each flood.
pub const PROBES: usize = 5;

/// Floods of one test binary run one at a time: each holds thousands of descriptors.
pub async fn one_at_a_time() -> tokio::sync::MutexGuard<'static, ()> {
    static TURN: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());
    TURN.lock().await
}

/// Connections each kind of flood can hold in this process: [`FLOOD`], fewer (said on
/// stderr) when the descriptor limit, raised to the hard limit first, leaves no room
/// for two kinds of client connections and the server's side of them.
pub fn flood_size() -> usize {
    let limit = stampede_http_kit::raise_fd_limit().unwrap_or(1024) as usize;
    let fits = limit.saturating_sub(1_000) / 4;
    if fits < FLOOD {
        eprintln!("descriptor limit {limit}: holding {fits} connections of each kind, not {FLOOD}");
    }
    fits.min(FLOOD)
}

/// The client side of a flood; dropping it closes every connection.
pub struct Flood {
    conns: Vec<TcpStream>,
}

impl Flood {
    /// Connections opened (some may since have been closed by the server).
    pub fn len(&self) -> usize {
        self.conns.len()
    }
}

/// Opens `n` connections that send nothing, then `n` that send `stalled_head` (a
/// request head announcing more body than follows) and stop. A connection the server
/// refuses or closes early is not retried: the flood only holds what it can.
pub async fn hold(addr: SocketAddr, n: usize, stalled_head: &[u8]) -> Flood {
    let mut conns = Vec::with_capacity(2 * n);
    for _ in 0..n {
        if let Ok(Ok(c)) =
            tokio::time::timeout(Duration::from_secs(2), TcpStream::connect(addr)).await
        {
            conns.push(c);
        }
    }
    for _ in 0..n {
        if let Ok(Ok(mut c)) =
            tokio::time::timeout(Duration::from_secs(2), TcpStream::connect(addr)).await
        {
            let _ = c.write_all(stalled_head).await;
            conns.push(c);
        }
    }
    Flood { conns }
}

/// Sends `request` (which asks for `Connection: close`) on a new connection and returns
/// the status line of the answer and how long it took, or why there was none within
/// `within`.
pub async fn answered(
    addr: SocketAddr,
    request: &[u8],
    within: Duration,
) -> Result<(String, Duration), String> {
    let t0 = std::time::Instant::now();
    let exchange = async {
        let mut c = TcpStream::connect(addr)
            .await
            .map_err(|e| format!("connect: {e}"))?;
        c.write_all(request)
            .await
            .map_err(|e| format!("write: {e}"))?;
        let mut seen = Vec::new();
        let mut buf = [0u8; 512];
        while !seen.windows(2).any(|w| w == b"\r\n") {
            match c.read(&mut buf).await {
                Ok(0) => return Err(format!("closed after {:?}", String::from_utf8_lossy(&seen))),
                Ok(n) => seen.extend_from_slice(&buf[..n]),
                Err(e) => return Err(format!("read: {e}")),
            }
        }
        let text = String::from_utf8_lossy(&seen);
        Ok(text.lines().next().unwrap_or_default().to_string())
    };
    match tokio::time::timeout(within, exchange).await {
        Ok(Ok(status)) => Ok((status, t0.elapsed())),
        Ok(Err(e)) => Err(e),
        Err(_) => Err(format!("no answer within {within:?}")),
    }
}

/// Holds a flood of [`FLOOD`] silent connections and [`FLOOD`] stalled bodies against
/// `addr` and checks that each of [`PROBES`] normal requests is answered within
/// [`ANSWER_WITHIN`] with a status line starting `want`.
pub async fn withstands(addr: SocketAddr, stalled_head: &[u8], request: &[u8], want: &str) {
    let _turn = one_at_a_time().await;
    let n = flood_size();
    let flood = hold(addr, n, stalled_head).await;
    assert!(
        flood.len() >= n,
        "the flood could open only {} connections",
        flood.len()
    );
    for i in 0..PROBES {
        match answered(addr, request, ANSWER_WITHIN).await {
            Ok((status, _took)) => assert!(status.starts_with(want), "probe {i}: {status}"),
            Err(e) => panic!("probe {i} during a flood of {n} + {n}: {e}"),
        }
    }
    drop(flood);
}

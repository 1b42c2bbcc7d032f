//! Free ports for many listeners at once.
//!
//! Binding port 0 lets the kernel search for a free port, and Linux scans its ephemeral
//! range from a random point at every bind, restricted to one half and one parity
//! first: once a few thousand listeners hold ports, each bind scans thousands of
//! buckets (10,000 nodes took over 20 s to bind this way). [`FreePorts`] walks the same
//! ephemeral range itself, from a random start, one candidate after the other, skipping
//! ports in use: one bind per node in the common case.

use std::io;
use std::net::{IpAddr, SocketAddr};

use rand::Rng;
use socket2::{Domain, Socket, Type};
use tokio::net::TcpListener;

/// The kernel's range for "any free port" when it cannot be read.
const FALLBACK_RANGE: (u16, u16) = (32768, 60999);

/// Pending connections per listener, as tokio's own `bind` sets.
const BACKLOG: i32 = 1024;

/// Hands out listeners on free ports of the ephemeral range, in sequence.
#[derive(Debug)]
pub(crate) struct FreePorts {
    low: u16,
    span: u32,
    next: u32,
}

impl Default for FreePorts {
    fn default() -> Self {
        Self::new()
    }
}

impl FreePorts {
    /// Starts at a random port of the system's ephemeral range.
    pub(crate) fn new() -> Self {
        let (low, high) = ephemeral_range().unwrap_or(FALLBACK_RANGE);
        let span = u32::from(high.saturating_sub(low)) + 1;
        Self {
            low,
            span,
            next: rand::rng().random_range(0..span),
        }
    }

    /// A listener on `ip` and the next free port; the last error when the whole range
    /// is taken, or the first one that is not "address in use".
    pub(crate) fn bind(&mut self, ip: IpAddr) -> io::Result<TcpListener> {
        let mut last = io::Error::new(io::ErrorKind::AddrInUse, "no free port left");
        for _ in 0..self.span {
            let offset = u16::try_from(self.next % self.span).unwrap_or(0);
            self.next = self.next.wrapping_add(1);
            let addr = SocketAddr::new(ip, self.low.saturating_add(offset));
            match listen(addr) {
                Ok(l) => return Ok(l),
                Err(e) if e.kind() == io::ErrorKind::AddrInUse => last = e,
                Err(e) => return Err(e),
            }
        }
        Err(last)
    }
}

/// A non-blocking listener on `addr`, SO_REUSEADDR set as tokio's `bind` does.
fn listen(addr: SocketAddr) -> io::Result<TcpListener> {
    let socket = Socket::new(Domain::for_address(addr), Type::STREAM, None)?;
    socket.set_reuse_address(true)?;
    socket.set_nonblocking(true)?;
    socket.bind(&addr.into())?;
    socket.listen(BACKLOG)?;
    TcpListener::from_std(socket.into())
}

/// `net.ipv4.ip_local_port_range` (Linux); `None` elsewhere.
fn ephemeral_range() -> Option<(u16, u16)> {
    let text = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range").ok()?;
    let mut it = text.split_whitespace().map(|x| x.parse::<u16>().ok());
    let (low, high) = (it.next()??, it.next()??);
    (low > 0 && low <= high).then_some((low, high))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::Ipv4Addr;

    #[tokio::test]
    async fn consecutive_binds_get_distinct_free_ports() {
        let mut ports = FreePorts::new();
        let ip = IpAddr::V4(Ipv4Addr::LOCALHOST);
        let a = ports.bind(ip).unwrap();
        let b = ports.bind(ip).unwrap();
        let (pa, pb) = (a.local_addr().unwrap(), b.local_addr().unwrap());
        assert_ne!(pa, pb);
        assert!(pa.port() > 0 && pb.port() > 0);
    }

    #[tokio::test]
    async fn a_port_in_use_is_skipped() {
        let ip = IpAddr::V4(Ipv4Addr::LOCALHOST);
        let held = ports_at(ip).await;
        // A picker whose next candidate is the held port.
        let (low, high) = ephemeral_range().unwrap_or(FALLBACK_RANGE);
        let mut ports = FreePorts {
            low,
            span: u32::from(high - low) + 1,
            next: u32::from(held.local_addr().unwrap().port() - low),
        };
        let got = ports.bind(ip).unwrap();
        assert_ne!(got.local_addr().unwrap(), held.local_addr().unwrap());
    }

    /// A listener on some port of the ephemeral range.
    async fn ports_at(ip: IpAddr) -> TcpListener {
        FreePorts::new().bind(ip).unwrap()
    }
}

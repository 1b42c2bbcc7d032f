//! Free ports for many listeners at once, on ports a killed node can take back.
//!
//! Binding port 0 lets the kernel search for a free port, and Linux scans its ephemeral
//! range from a random point at every bind, restricted to one half and one parity
//! first: once a few thousand listeners hold ports, each bind scans thousands of
//! buckets (10,000 nodes took over 20 s to bind this way). [`FreePorts`] walks a range
//! itself, from a random start, one candidate after the other, skipping ports in use:
//! one bind per node in the common case.
//!
//! A node's port must still be free when a healed `kill` binds it again. A port of the
//! ephemeral range is not: the kernel hands its ports out as the source port of any
//! outgoing connection on the host, and one that took the killed node's port made the
//! heal fail with "address in use" (seen with two test suites at once, one opening
//! thousands of connections). So nodes take ports of the [`BELOW_EPHEMERAL`] ports just
//! below the ephemeral range first, which only an explicit bind takes, and the
//! ephemeral range only once those are all in use.

use std::io;
use std::net::{IpAddr, SocketAddr};

use rand::Rng;
use socket2::{Domain, Socket, Type};
use tokio::net::TcpListener;

/// The kernel's range for "any free port" when it cannot be read.
const FALLBACK_RANGE: (u16, u16) = (32768, 60999);

/// How many ports below the ephemeral range nodes take first (an assumption: room for
/// 10,000 nodes beside other listeners; on Linux's default range, ports 20480-32767).
pub(crate) const BELOW_EPHEMERAL: u16 = 12_288;

/// The lowest port handed out (below it, ports are privileged).
const LOWEST: u16 = 1024;

/// Pending connections per listener, as tokio's own `bind` sets.
const BACKLOG: i32 = 1024;

/// Hands out listeners on free ports, in sequence: below the ephemeral range first.
#[derive(Debug)]
pub(crate) struct FreePorts {
    /// The ranges to walk, in order; a range with no free port left is dropped.
    ranges: Vec<PortWalk>,
}

/// A walk over the ports `low..low + span`, next at `low + next % span`.
#[derive(Debug)]
struct PortWalk {
    low: u16,
    span: u32,
    next: u32,
}

impl PortWalk {
    /// `low..=high` from a random port of it.
    fn random(low: u16, high: u16) -> Self {
        let span = u32::from(high.saturating_sub(low)) + 1;
        Self {
            low,
            span,
            next: rand::rng().random_range(0..span),
        }
    }

    /// A listener on the next free port of the walk; `Ok(None)` when every port is in
    /// use, the first error that is not "address in use" otherwise.
    fn bind(&mut self, ip: IpAddr) -> io::Result<Option<TcpListener>> {
        for _ in 0..self.span {
            let offset = u16::try_from(self.next % self.span).unwrap_or(0);
            self.next = self.next.wrapping_add(1);
            let addr = SocketAddr::new(ip, self.low.saturating_add(offset));
            match listen(addr) {
                Ok(l) => return Ok(Some(l)),
                Err(e) if e.kind() == io::ErrorKind::AddrInUse => {}
                Err(e) => return Err(e),
            }
        }
        Ok(None)
    }
}

impl Default for FreePorts {
    fn default() -> Self {
        Self::new()
    }
}

impl FreePorts {
    /// Starts at a random port below the system's ephemeral range, then goes on to the
    /// ephemeral range itself.
    pub(crate) fn new() -> Self {
        Self::around(ephemeral_range().unwrap_or(FALLBACK_RANGE))
    }

    /// The walks for the ephemeral range `(low, high)`.
    fn around((low, high): (u16, u16)) -> Self {
        let mut ranges = Vec::with_capacity(2);
        if low > LOWEST {
            let below = low.saturating_sub(BELOW_EPHEMERAL).max(LOWEST);
            ranges.push(PortWalk::random(below, low - 1));
        }
        ranges.push(PortWalk::random(low, high));
        Self { ranges }
    }

    /// A listener on `ip` and the next free port; "no free port left" when every range
    /// is taken, or the first error that is not "address in use".
    pub(crate) fn bind(&mut self, ip: IpAddr) -> io::Result<TcpListener> {
        while let Some(walk) = self.ranges.first_mut() {
            if let Some(l) = walk.bind(ip)? {
                return Ok(l);
            }
            self.ranges.remove(0);
        }
        Err(io::Error::new(
            io::ErrorKind::AddrInUse,
            "no free port left",
        ))
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
        let port = held.local_addr().unwrap().port();
        // A walk whose next candidate is the held port.
        let mut ports = FreePorts {
            ranges: vec![PortWalk {
                low: port,
                span: 64,
                next: 0,
            }],
        };
        let got = ports.bind(ip).unwrap().local_addr().unwrap().port();
        assert!(got > port && got < port + 64, "{got} after {port}");
    }

    /// A killed node's port must be free at its heal: outgoing connections take their
    /// source ports from the ephemeral range, so nodes take theirs below it.
    #[tokio::test]
    async fn nodes_take_ports_below_the_ephemeral_range_first() {
        let (low, _) = ephemeral_range().unwrap_or(FALLBACK_RANGE);
        let l = FreePorts::new()
            .bind(IpAddr::V4(Ipv4Addr::LOCALHOST))
            .unwrap();
        let port = l.local_addr().unwrap().port();
        assert!(
            port < low && port >= low.saturating_sub(BELOW_EPHEMERAL),
            "{port}"
        );
    }

    #[test]
    fn a_range_starting_at_the_lowest_port_has_no_room_below() {
        let ports = FreePorts::around((LOWEST, 5000));
        assert_eq!(ports.ranges.len(), 1);
        let ports = FreePorts::around((2000, 5000));
        assert_eq!((ports.ranges[0].low, ports.ranges[0].span), (LOWEST, 976));
    }

    /// A listener on a free port.
    async fn ports_at(ip: IpAddr) -> TcpListener {
        FreePorts::new().bind(ip).unwrap()
    }
}

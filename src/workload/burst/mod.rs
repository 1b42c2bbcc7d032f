//! Burst precision: how N creates leave the client together, and how the report knows
//! how together they left.
//!
//! A burst user does not send through goose's reqwest client, which owns its sockets:
//! it opens a connection of its own before the gate ([`conn`]: HTTP/1.1 over hyper,
//! plain or TLS, warmed with `GET /health`) and writes its whole create to a
//! [`gated_io::GatedIo`] socket that keeps the final byte of the stream in user space.
//! When every user is armed, one loop per core ([`gated_io::Release`]) writes its share
//! of the held bytes, one `send` per socket, at real-time priority when the process may
//! have it ([`boost`]), so the burst leaves in the time of N one-byte writes spread over
//! the cores rather than of N client tasks scheduled one after another. The client's figure is the release spread
//! (`send.burst_spread_ms`, and `send.burst_release_realtime`).
//!
//! The other half is on the service's side, in `stampede-serve`: its sockets ask the
//! kernel for receive timestamps (`serve/src/rx_stamp.rs`) and a create arrives when
//! the segment carrying its last byte did (`serve/src/arrivals.rs`), which gives the
//! report's `send.server_arrival_spread_ms` for an embedded run. `docs/design.md`
//! section 8 has the design, `docs/benchmarks.md` the measured spreads.

mod boost;
mod conn;
mod gated_io;

pub(crate) use conn::{BurstConn, Tls};
pub(crate) use gated_io::Release;

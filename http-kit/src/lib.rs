//! `stampede-http-kit`: what every HTTP listener of the project shares, below both
//! servers (mock-node, `stampede serve`) and the harness (a run's metrics endpoint).
//!
//! - The listener policy and bounded accept loop ([`serve_bounded`], [`ConnectionCap`],
//!   [`bounded_request`], [`HttpLimits`]): deadlines on each request head and body, an
//!   idle timeout, a connection cap under the descriptor limit.
//! - The same policy for a server that drives its connections itself, through the
//!   connection's own I/O ([`GuardedIo`]; tonic's `serve_with_incoming`), built on a
//!   stream whose I/O stops when a [`Tripwire`] fires ([`CheckedIo`]), which a server
//!   may stack with checks of its own.
//! - One redacting [`Secret`], the constant-time compare and the blank check.
//! - The Prometheus text line writer ([`write_header`], [`write_sample`]).
//! - Freed heap handed back to the OS once a period ([`spawn_trimmer`]).
//!
//! Dependencies: the accept loop drives hyper's connections itself (header-read timer,
//! idle timeout, eviction) and serves an axum `Router`, so this crate depends on tokio,
//! hyper, hyper-util and axum; the secret and the Prometheus writer use std alone. The
//! `tonic` feature lets a [`CheckedIo`] carry its check's connect info into tonic.
#![deny(missing_docs)]
#![warn(unreachable_pub)]

mod checked_io;
mod guarded;
mod listener;
mod memory_trim;
mod prometheus;
mod secret;

pub use checked_io::{CheckedIo, IoCheck, Tripwire, TripwireWatch};
pub use guarded::{GuardedIo, PolicyCheck};
pub use listener::{
    bounded_request, fd_room, raise_fd_limit, serve_bounded, Admitted, BodyDeadlineHit,
    BodyTimedOut, ConnMark, ConnectionCap, DeadlineBody, HttpLimits, RequestMark, LOCAL_API_LIMITS,
    RESERVED_FDS,
};
pub use memory_trim::{spawn_trimmer, trim, TRIM_EVERY};
pub use prometheus::{escape_label_value, write_header, write_sample};
pub use secret::{constant_time_eq, validate_not_blank, EmptySecret, Secret};

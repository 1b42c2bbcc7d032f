//! The one place the harness builds its HTTP clients, so that every request it sends
//! (creates, lifecycle calls, deletes, truth and belief reads, the set audit, chaos and
//! mock-node admin calls, cleanup) names the tool in `User-Agent`.

/// `User-Agent` of every request stampede sends: `stampede/<version>`.
pub const USER_AGENT: &str = concat!("stampede/", env!("CARGO_PKG_VERSION"));

/// A client builder with stampede's `User-Agent`; callers add their own deadlines.
pub fn builder() -> reqwest::ClientBuilder {
    reqwest::Client::builder().user_agent(USER_AGENT)
}

/// A client with stampede's `User-Agent` and reqwest's defaults otherwise.
pub fn client() -> reqwest::Client {
    // Fails only where `crate::http_client::client()` would panic (no TLS backend).
    builder()
        .build()
        .expect("an HTTP client with default settings builds")
}

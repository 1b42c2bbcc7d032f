//! The API key a run sends: the project's one redacting secret type (the HTTP kit's),
//! named here below every layer of the harness that reads or sends it.

pub use stampede_http_kit::Secret as ApiKey;

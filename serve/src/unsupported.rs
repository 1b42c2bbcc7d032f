//! The routes of E2B's API that `stampede serve` does not answer: each is answered 501
//! naming it as not supported, so that an SDK does not read a missing route as a
//! missing sandbox (a 404). A method that neither E2B nor serve has on a known path is
//! 405 with `Allow`; any other unknown route stays 404 `no such route`.

use axum::http::{header, HeaderValue, Method, StatusCode};
use axum::response::{IntoResponse, Response};

use super::error::ApiError;

/// E2B's operations (method, path template), as e2b-dev/infra `spec/openapi.yml` lists
/// them (all 64, served ones included: the router answers those before this is asked).
const E2B_OPERATIONS: &[(&str, &str)] = &[
    ("GET", "/health"),
    ("GET", "/teams"),
    ("GET", "/teams/{teamID}/metrics"),
    ("GET", "/teams/{teamID}/metrics/max"),
    ("GET", "/sandboxes"),
    ("POST", "/sandboxes"),
    ("GET", "/v2/sandboxes"),
    ("GET", "/sandboxes/metrics"),
    ("GET", "/sandboxes/{sandboxID}/logs"),
    ("GET", "/v2/sandboxes/{sandboxID}/logs"),
    ("GET", "/sandboxes/{sandboxID}"),
    ("DELETE", "/sandboxes/{sandboxID}"),
    ("GET", "/sandboxes/{sandboxID}/metrics"),
    ("POST", "/sandboxes/{sandboxID}/pause"),
    ("POST", "/sandboxes/{sandboxID}/resume"),
    ("POST", "/sandboxes/{sandboxID}/fork"),
    ("POST", "/sandboxes/{sandboxID}/connect"),
    ("POST", "/sandboxes/{sandboxID}/timeout"),
    ("PUT", "/sandboxes/{sandboxID}/network"),
    ("POST", "/sandboxes/{sandboxID}/refreshes"),
    ("POST", "/sandboxes/{sandboxID}/snapshots"),
    ("GET", "/snapshots"),
    ("POST", "/v3/templates"),
    ("GET", "/v2/templates"),
    ("POST", "/v2/templates"),
    ("GET", "/templates/{templateID}/files/{hash}"),
    ("GET", "/templates"),
    ("POST", "/templates"),
    ("GET", "/templates/{templateID}"),
    ("POST", "/templates/{templateID}"),
    ("DELETE", "/templates/{templateID}"),
    ("PATCH", "/templates/{templateID}"),
    ("POST", "/templates/{templateID}/builds/{buildID}"),
    ("POST", "/v2/templates/{templateID}/builds/{buildID}"),
    ("PATCH", "/v2/templates/{templateID}"),
    ("GET", "/templates/{templateID}/builds/{buildID}/status"),
    ("GET", "/templates/{templateID}/builds/{buildID}/logs"),
    ("POST", "/templates/tags"),
    ("DELETE", "/templates/tags"),
    ("GET", "/templates/{templateID}/tags"),
    ("GET", "/templates/aliases/{alias}"),
    ("GET", "/nodes"),
    ("GET", "/nodes/{nodeID}"),
    ("POST", "/nodes/{nodeID}"),
    ("POST", "/admin/teams/{teamID}/sandboxes/kill"),
    ("GET", "/admin/sandboxes/running-counts"),
    ("POST", "/admin/teams/{teamID}/builds/cancel"),
    ("POST", "/admin/teams/{teamID}/api-keys"),
    ("DELETE", "/admin/teams/{teamID}/api-keys/{apiKeyID}"),
    ("POST", "/access-tokens"),
    ("DELETE", "/access-tokens/{accessTokenID}"),
    ("GET", "/api-keys"),
    ("POST", "/api-keys"),
    ("PATCH", "/api-keys/{apiKeyID}"),
    ("DELETE", "/api-keys/{apiKeyID}"),
    ("GET", "/volumes"),
    ("POST", "/volumes"),
    ("GET", "/volumes/{volumeID}"),
    ("DELETE", "/volumes/{volumeID}"),
    ("GET", "/secrets"),
    ("POST", "/secrets"),
    ("GET", "/secrets/{secretID}"),
    ("POST", "/secrets/{secretID}"),
    ("DELETE", "/secrets/{secretID}"),
];

/// serve's operations that E2B's spec does not list: its own admin and metrics routes,
/// and the `/v2` create and connect that the current SDKs call (from the SDKs' bundled
/// API schema; not in the e2b-dev/infra snapshot followed here).
const SERVE_OWN_OPERATIONS: &[(&str, &str)] = &[
    ("GET", "/metrics"),
    ("GET", "/admin/counters"),
    ("GET", "/admin/evicted"),
    ("POST", "/v2/sandboxes"),
    ("POST", "/v2/sandboxes/{sandboxID}/connect"),
];

/// Whether `path` fits the template `tmpl` (a `{name}` segment fits any one segment).
fn fits(tmpl: &str, path: &str) -> bool {
    let (mut t, mut p) = (tmpl.split('/'), path.split('/'));
    loop {
        match (t.next(), p.next()) {
            (None, None) => return true,
            (Some(ts), Some(ps)) => {
                let any = is_param(ts) && !ps.is_empty();
                if !any && ts != ps {
                    return false;
                }
            }
            _ => return false,
        }
    }
}

/// Whether a segment of a path template is a parameter (`{name}`).
fn is_param(segment: &str) -> bool {
    segment.starts_with('{') && segment.ends_with('}')
}

/// The path template of E2B's or serve's that `path` is, as a router picks it: of the
/// templates `path` fits, the one whose first differing segment is literal (so
/// `/templates/tags` is not `/templates/{templateID}`, nor `/sandboxes/metrics`
/// `/sandboxes/{sandboxID}`).
fn path_template(path: &str) -> Option<&'static str> {
    E2B_OPERATIONS
        .iter()
        .chain(SERVE_OWN_OPERATIONS)
        .map(|(_, t)| *t)
        .filter(|t| fits(t, path))
        .min_by_key(|t| t.split('/').map(is_param).collect::<Vec<bool>>())
}

/// The E2B operation `method path` is, if it is one.
pub(crate) fn e2b_operation(method: &Method, path: &str) -> Option<(&'static str, &'static str)> {
    let tmpl = path_template(path)?;
    E2B_OPERATIONS
        .iter()
        .find(|(m, t)| *m == method.as_str() && *t == tmpl)
        .copied()
}

/// The methods that `path` is answered to (served, or 501 as E2B's), in the order of
/// the tables, each once; empty for a path neither E2B nor serve has.
fn methods_of(path: &str) -> Vec<&'static str> {
    let Some(tmpl) = path_template(path) else {
        return Vec::new();
    };
    let mut methods: Vec<&'static str> = Vec::new();
    for (m, t) in E2B_OPERATIONS.iter().chain(SERVE_OWN_OPERATIONS) {
        if *t == tmpl && !methods.contains(m) {
            methods.push(m);
        }
    }
    methods
}

/// How a request that no handler took is answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Unrouted {
    /// An E2B operation serve lacks: 501 naming it.
    Unsupported(ApiError),
    /// A known path with a method neither E2B nor serve has: 405 listing the methods.
    MethodNotAllowed {
        /// The answer's body.
        error: ApiError,
        /// The methods of the path, as the `Allow` header lists them.
        allow: String,
    },
    /// A path neither E2B nor serve has: 404 `no such route`.
    NoSuchRoute(ApiError),
}

#[cfg(test)]
impl Unrouted {
    /// The JSON error of the answer.
    pub(crate) fn error(&self) -> &ApiError {
        match self {
            Unrouted::Unsupported(e) | Unrouted::NoSuchRoute(e) => e,
            Unrouted::MethodNotAllowed { error, .. } => error,
        }
    }
}

impl IntoResponse for Unrouted {
    fn into_response(self) -> Response {
        match self {
            Unrouted::Unsupported(e) | Unrouted::NoSuchRoute(e) => e.into_response(),
            Unrouted::MethodNotAllowed { error, allow } => {
                let mut res = error.into_response();
                if let Ok(v) = HeaderValue::from_str(&allow) {
                    res.headers_mut().insert(header::ALLOW, v);
                }
                res
            }
        }
    }
}

/// The answer to a request no handler took (no route for the path, or none for the
/// method on a served path): 501 for an E2B operation stampede does not serve, 405 for
/// another method on a path that E2B or serve has, else 404 `no such route`.
pub(crate) fn unrouted(method: &Method, path: &str) -> Unrouted {
    if let Some((m, t)) = e2b_operation(method, path) {
        return Unrouted::Unsupported(ApiError::new(
            StatusCode::NOT_IMPLEMENTED,
            format!("{m} {t} is not supported by stampede serve"),
        ));
    }
    let methods = methods_of(path);
    if methods.is_empty() {
        return Unrouted::NoSuchRoute(ApiError::new(StatusCode::NOT_FOUND, "no such route"));
    }
    Unrouted::MethodNotAllowed {
        error: ApiError::new(
            StatusCode::METHOD_NOT_ALLOWED,
            format!("{method} is not a method of {path}"),
        ),
        allow: methods.join(", "),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_e2b_route_stampede_lacks_is_named_501() {
        let u = unrouted(&Method::PUT, "/sandboxes/abc/network");
        let e = u.error();
        assert_eq!(e.code, 501);
        assert!(
            e.message.contains("/sandboxes/{sandboxID}/network"),
            "{}",
            e.message
        );
        assert!(e.message.contains("not supported by stampede serve"));
    }

    #[test]
    fn a_route_e2b_lacks_is_404() {
        assert_eq!(unrouted(&Method::GET, "/nope").error().code, 404);
        assert_eq!(
            unrouted(&Method::GET, "/sandboxes//network").error().code,
            404
        );
    }

    #[test]
    fn another_method_on_a_known_path_is_405_listing_its_methods() {
        match unrouted(&Method::TRACE, "/teams") {
            Unrouted::MethodNotAllowed { error, allow } => {
                assert_eq!(error.code, 405);
                assert_eq!(allow, "GET");
            }
            other => panic!("{other:?}"),
        }
        match unrouted(&Method::PUT, "/templates/abc") {
            Unrouted::MethodNotAllowed { allow, .. } => {
                assert_eq!(allow, "GET, POST, DELETE, PATCH")
            }
            other => panic!("{other:?}"),
        }
        match unrouted(&Method::DELETE, "/v2/sandboxes") {
            Unrouted::MethodNotAllowed { allow, .. } => assert_eq!(allow, "GET, POST"),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_literal_segment_beats_a_parameter() {
        let named = |m: Method, p: &str| unrouted(&m, p).error().message.clone();
        assert!(named(Method::DELETE, "/templates/tags").starts_with("DELETE /templates/tags "));
        assert!(named(Method::POST, "/templates/tags").starts_with("POST /templates/tags "));
        assert!(named(Method::POST, "/templates/base").starts_with("POST /templates/{templateID} "));
        match unrouted(&Method::DELETE, "/sandboxes/metrics") {
            Unrouted::MethodNotAllowed { allow, .. } => assert_eq!(allow, "GET"),
            other => panic!("{other:?}"),
        }
    }

    /// `openapi/stampede-e2b.yaml` lists every E2B operation (so that schemathesis runs
    /// over all of them) and no operation beyond E2B's and serve's own.
    #[test]
    fn the_document_lists_every_e2b_operation() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../openapi/stampede-e2b.yaml");
        let text = std::fs::read_to_string(path).expect("the document");
        let doc: serde_yaml_ng::Value = serde_yaml_ng::from_str(&text).expect("YAML");
        let mut listed = std::collections::BTreeSet::new();
        for (p, ops) in doc["paths"].as_mapping().expect("paths") {
            for (m, _) in ops.as_mapping().expect("operations") {
                let m = m.as_str().expect("method").to_ascii_uppercase();
                listed.insert((m, p.as_str().expect("path").to_string()));
            }
        }
        for (m, t) in E2B_OPERATIONS {
            assert!(
                listed.contains(&(m.to_string(), t.to_string())),
                "{m} {t} not listed"
            );
        }
        for (m, t) in &listed {
            let known = E2B_OPERATIONS
                .iter()
                .chain(SERVE_OWN_OPERATIONS)
                .any(|(km, kt)| km == m && kt == t);
            assert!(known, "{m} {t} is neither E2B's nor serve's");
        }
    }
}

//! The routes of E2B's API that `stampede serve` does not answer: each is answered 501
//! naming it as not supported, so that an SDK does not read a missing route as a
//! missing sandbox (a 404). Any other unknown route stays 404 `no such route`.

use axum::http::{Method, StatusCode};

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

/// Whether `path` fits the template `tmpl` (a `{name}` segment fits any one segment).
fn fits(tmpl: &str, path: &str) -> bool {
    let (mut t, mut p) = (tmpl.split('/'), path.split('/'));
    loop {
        match (t.next(), p.next()) {
            (None, None) => return true,
            (Some(ts), Some(ps)) => {
                let any = ts.starts_with('{') && ts.ends_with('}') && !ps.is_empty();
                if !any && ts != ps {
                    return false;
                }
            }
            _ => return false,
        }
    }
}

/// The E2B operation `method path` is, if it is one.
pub(crate) fn e2b_operation(method: &Method, path: &str) -> Option<(&'static str, &'static str)> {
    E2B_OPERATIONS
        .iter()
        .find(|(m, t)| *m == method.as_str() && fits(t, path))
        .copied()
}

/// The answer to a request no route of the router took: 501 for an E2B operation
/// stampede does not serve, else 404 `no such route`.
pub(crate) fn unrouted(method: &Method, path: &str) -> ApiError {
    match e2b_operation(method, path) {
        Some((m, t)) => ApiError::new(
            StatusCode::NOT_IMPLEMENTED,
            format!("{m} {t} is not supported by stampede serve"),
        ),
        None => ApiError::new(StatusCode::NOT_FOUND, "no such route"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_e2b_route_stampede_lacks_is_named_501() {
        let e = unrouted(&Method::PUT, "/sandboxes/abc/network");
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
        assert_eq!(unrouted(&Method::GET, "/nope").code, 404);
        assert_eq!(unrouted(&Method::GET, "/sandboxes//network").code, 404);
    }
}

//! The loopback rule: stampede sends load only to this machine unless a profile
//! explicitly allows a host.

use std::net::IpAddr;

use super::issue::ProfileIssue;
use super::types::{PlacementSection, Profile};

/// Whether `host` is loopback: `localhost` (and `*.localhost`), 127.0.0.0/8 or `::1`
/// (brackets allowed). Anything else, including names that might resolve to loopback,
/// is not.
pub fn is_loopback_host(host: &str) -> bool {
    let h = host.trim().trim_end_matches('.').to_ascii_lowercase();
    let h = h
        .strip_prefix('[')
        .and_then(|x| x.strip_suffix(']'))
        .unwrap_or(&h);
    if h == "localhost" || h.ends_with(".localhost") {
        return true;
    }
    h.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

/// The host of `addr`: a URL's host, or the host of `host:port` / `[v6]:port` / a bare
/// host. `None` when nothing host-like is there.
pub fn host_of_address(addr: &str) -> Option<String> {
    let addr = addr.trim();
    if addr.is_empty() {
        return None;
    }
    if addr.contains("://") {
        let url = reqwest::Url::parse(addr).ok()?;
        return url.host_str().filter(|h| !h.is_empty()).map(str::to_string);
    }
    if let Some(rest) = addr.strip_prefix('[') {
        let end = rest.find(']')?;
        return Some(format!("[{}]", &rest[..end]));
    }
    if addr.parse::<IpAddr>().is_ok() {
        return Some(addr.to_string());
    }
    let host = match addr.rsplit_once(':') {
        Some((h, port)) if port.parse::<u16>().is_ok() => h,
        Some(_) => return None,
        None => addr,
    };
    (!host.is_empty() && !host.contains('/')).then(|| host.to_string())
}

/// Refuse any non-loopback target (external url, orchestrators, mock_admin) whose host
/// is not listed in the profile's `allow_targets`. The error names the first offender.
/// Only the profile is read; for file positions use [`validate_targets_in`].
pub fn validate_targets(profile: &Profile) -> Result<(), ProfileIssue> {
    validate_targets_in(profile, None)
}

/// [`validate_targets`] with the issue located in `source` when given.
pub fn validate_targets_in(
    profile: &Profile,
    source: Option<&super::load::Source>,
) -> Result<(), ProfileIssue> {
    let PlacementSection::External(e) = &profile.placement else {
        return Ok(());
    };
    let p = "placement.external";
    let mut targets = vec![(format!("{p}.url"), e.url.clone())];
    targets.extend(
        e.orchestrators
            .iter()
            .enumerate()
            .map(|(i, a)| (format!("{p}.orchestrators[{i}]"), a.clone())),
    );
    targets.extend(
        e.mock_admin
            .iter()
            .enumerate()
            .map(|(i, a)| (format!("{p}.mock_admin[{i}]"), a.clone())),
    );
    let allowed = |h: &str| {
        let h = h.trim_start_matches('[').trim_end_matches(']');
        profile.allow_targets.iter().any(|a| {
            a.trim_start_matches('[')
                .trim_end_matches(']')
                .eq_ignore_ascii_case(h)
        })
    };
    for (field, addr) in targets {
        let message = match host_of_address(&addr) {
            None => format!("`{addr}` has no host"),
            Some(h) if is_loopback_host(&h) || allowed(&h) => continue,
            Some(h) => format!(
                "host `{h}` is not loopback; list it under `allow_targets` to send load there"
            ),
        };
        let issue = match source {
            Some(src) => src.issue_at(&super::locate::Locator::new(&src.text), &field, message),
            None => ProfileIssue {
                file: String::new(),
                line: 0,
                col: 0,
                field,
                message,
            },
        };
        return Err(issue);
    }
    Ok(())
}

//! Checks of request parameters as E2B's `spec/openapi.yml` types them (E2B validates
//! every request against its spec before a handler runs): `uuid`, `date-time`, the
//! metadata filter and template references.

use std::collections::BTreeMap;
use std::time::SystemTime;

/// E2B's local cluster (`shared/pkg/consts/cluster.go`: `uuid.Nil`): every node of
/// stampede belongs to it.
pub const LOCAL_CLUSTER_ID: &str = "00000000-0000-0000-0000-000000000000";

/// A `format: uuid` value, lower-cased (8-4-4-4-12 hex digits).
pub fn parse_uuid(s: &str) -> Option<String> {
    let b = s.as_bytes();
    let ok = b.len() == 36
        && b.iter().enumerate().all(|(i, c)| match i {
            8 | 13 | 18 | 23 => *c == b'-',
            _ => c.is_ascii_hexdigit(),
        });
    ok.then(|| s.to_ascii_lowercase())
}

/// Whether a `clusterID` (absent = the local cluster) names the cluster of stampede's
/// nodes; `Err` when it is not a UUID.
pub fn is_local_cluster(cluster_id: Option<&str>) -> Result<bool, String> {
    match cluster_id {
        None => Ok(true),
        Some(c) => parse_uuid(c)
            .map(|u| u == LOCAL_CLUSTER_ID)
            .ok_or_else(|| format!("clusterID `{c}` is not a UUID")),
    }
}

/// A `format: date-time` value (RFC 3339: `YYYY-MM-DDTHH:MM:SS[.frac](Z|±HH:MM)`).
pub fn parse_date_time(s: &str) -> Option<SystemTime> {
    let b = s.as_bytes();
    if b.len() < 20 || !matches!(b[10], b'T' | b't') {
        return None;
    }
    let digits = |r: std::ops::Range<usize>| b[r].iter().all(u8::is_ascii_digit);
    let shape = digits(0..4)
        && b[4] == b'-'
        && digits(5..7)
        && b[7] == b'-'
        && digits(8..10)
        && digits(11..13)
        && b[13] == b':'
        && digits(14..16)
        && b[16] == b':'
        && digits(17..19);
    if !shape {
        return None;
    }
    let mut i = 19;
    if b.get(i) == Some(&b'.') {
        let start = i + 1;
        i = start;
        while b.get(i).is_some_and(u8::is_ascii_digit) {
            i += 1;
        }
        if i == start {
            return None;
        }
    }
    let (offset_secs, end) = match b.get(i) {
        Some(b'Z' | b'z') => (0i64, i + 1),
        Some(sign @ (b'+' | b'-')) if b.len() == i + 6 && b[i + 3] == b':' => {
            if !(digits(i + 1..i + 3) && digits(i + 4..i + 6)) {
                return None;
            }
            let hh: i64 = s[i + 1..i + 3].parse().ok()?;
            let mm: i64 = s[i + 4..i + 6].parse().ok()?;
            if hh > 23 || mm > 59 {
                return None;
            }
            let v = hh * 3600 + mm * 60;
            (if *sign == b'+' { v } else { -v }, i + 6)
        }
        _ => return None,
    };
    if end != b.len() {
        return None;
    }
    let utc = format!("{}T{}Z", &s[..10], &s[11..i]);
    let local = humantime::parse_rfc3339(&utc).ok()?;
    let shift = std::time::Duration::from_secs(offset_secs.unsigned_abs());
    if offset_secs >= 0 {
        local.checked_sub(shift)
    } else {
        local.checked_add(shift)
    }
}

/// One piece of a metadata filter: characters but `&`, `=` and `%`, or `%XX` escapes;
/// `+` is a space (Go's `url.QueryUnescape`, which E2B applies).
fn unescape(part: &str) -> Option<String> {
    let b = part.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'%' => {
                let hex = part.get(i + 1..i + 3)?;
                if !hex.bytes().all(|c| c.is_ascii_hexdigit()) {
                    return None;
                }
                out.push(u8::from_str_radix(hex, 16).ok()?);
                i += 3;
            }
            b'+' => {
                out.push(b' ');
                i += 1;
            }
            b'&' | b'=' => return None,
            c => {
                out.push(c);
                i += 1;
            }
        }
    }
    Some(String::from_utf8_lossy(&out).into_owned())
}

/// The `metadata` query filter: `key=value` pairs joined by `&`, keys and values
/// URL-escaped (E2B's `utils/sandboxes_list.go`, `parseFilters`). Every pair must have
/// exactly one `=`.
pub fn parse_metadata_filter(q: &str) -> Result<BTreeMap<String, String>, String> {
    let bad = || format!("error parsing metadata: invalid key value pair in `{q}`");
    let mut filters = BTreeMap::new();
    for pair in q.split('&') {
        let (k, v) = pair.split_once('=').ok_or_else(bad)?;
        filters.insert(unescape(k).ok_or_else(bad)?, unescape(v).ok_or_else(bad)?);
    }
    Ok(filters)
}

/// Whether a sandbox's metadata holds every pair of `filter`.
pub fn metadata_matches(
    metadata: &BTreeMap<String, String>,
    filter: &BTreeMap<String, String>,
) -> bool {
    filter.iter().all(|(k, v)| metadata.get(k) == Some(v))
}

/// A template reference as E2B's `shared/pkg/id/id.go` (`ParseName`) accepts it:
/// `[namespace/]name[:tag]`, name and namespace of `[a-z0-9_-]`, tag of `[a-z0-9_.-]`,
/// case-insensitive. (E2B also trims surrounding white space; stampede does not, so that
/// its OpenAPI pattern says exactly what is accepted.)
pub fn check_template_id(t: &str) -> Result<(), String> {
    let ident = |s: &str, extra: &[u8]| {
        !s.is_empty()
            && s.bytes()
                .all(|c| c.is_ascii_alphanumeric() || c == b'-' || c == b'_' || extra.contains(&c))
    };
    let (name, tag) = match t.split_once(':') {
        Some((n, tag)) => (n, Some(tag)),
        None => (t, None),
    };
    let (namespace, alias) = match name.split_once('/') {
        Some((ns, a)) => (Some(ns), a),
        None => (None, name),
    };
    let ok = ident(alias, b"")
        && namespace.is_none_or(|ns| ident(ns, b""))
        && tag.is_none_or(|tag| ident(tag, b"."));
    if ok {
        Ok(())
    } else {
        Err(format!("Invalid template reference: `{t}`"))
    }
}

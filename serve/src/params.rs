//! Checks of request parameters as E2B's `spec/openapi.yml` types them (E2B validates
//! every request against its spec before a handler runs): `uuid`, `date-time`, the
//! metadata filter and template references.

use std::collections::BTreeMap;
use std::time::SystemTime;

/// E2B's local cluster (`shared/pkg/consts/cluster.go`: `uuid.Nil`): every node of
/// stampede belongs to it.
pub(crate) const LOCAL_CLUSTER_ID: &str = "00000000-0000-0000-0000-000000000000";

/// A `format: uuid` value, lower-cased (8-4-4-4-12 hex digits).
pub(crate) fn parse_uuid(s: &str) -> Option<String> {
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
pub(crate) fn is_local_cluster(cluster_id: Option<&str>) -> Result<bool, String> {
    match cluster_id {
        None => Ok(true),
        Some(c) => parse_uuid(c)
            .map(|u| u == LOCAL_CLUSTER_ID)
            .ok_or_else(|| format!("clusterID `{c}` is not a UUID")),
    }
}

/// A `format: date-time` value (RFC 3339: `YYYY-MM-DDTHH:MM:SS[.frac](Z|±HH:MM)`, any
/// year 0000-9999 as Go's `time.Parse` takes it), as nanoseconds since the Unix epoch.
pub(crate) fn parse_date_time(s: &str) -> Option<i128> {
    let b = s.as_bytes();
    if b.len() < 20 || !matches!(b[10], b'T' | b't') {
        return None;
    }
    let num = |r: std::ops::Range<usize>| -> Option<i64> {
        let d = b.get(r.clone())?;
        d.iter()
            .all(u8::is_ascii_digit)
            .then(|| s[r].parse().ok())?
    };
    if b[4] != b'-' || b[7] != b'-' || b[13] != b':' || b[16] != b':' {
        return None;
    }
    let (year, month, day) = (num(0..4)?, num(5..7)?, num(8..10)?);
    let (hour, minute, second) = (num(11..13)?, num(14..16)?, num(17..19)?);
    let leap = year % 4 == 0 && (year % 100 != 0 || year % 400 == 0);
    let month_days = [
        31,
        if leap { 29 } else { 28 },
        31,
        30,
        31,
        30,
        31,
        31,
        30,
        31,
        30,
        31,
    ];
    let valid = (1..=12).contains(&month)
        && day >= 1
        && day <= month_days[(month - 1) as usize]
        && hour <= 23
        && minute <= 59
        && second <= 60;
    if !valid {
        return None;
    }
    let mut i = 19;
    let mut nanos: i128 = 0;
    if b.get(i) == Some(&b'.') {
        let start = i + 1;
        i = start;
        while b.get(i).is_some_and(u8::is_ascii_digit) {
            i += 1;
        }
        if i == start {
            return None;
        }
        for (k, c) in b[start..i].iter().take(9).enumerate() {
            nanos += i128::from(c - b'0') * 10i128.pow(8 - k as u32);
        }
    }
    let offset_secs: i64 = match b.get(i) {
        Some(b'Z' | b'z') if b.len() == i + 1 => 0,
        Some(sign @ (b'+' | b'-')) if b.len() == i + 6 && b[i + 3] == b':' => {
            let (hh, mm) = (num(i + 1..i + 3)?, num(i + 4..i + 6)?);
            if hh > 23 || mm > 59 {
                return None;
            }
            let v = hh * 3600 + mm * 60;
            if *sign == b'+' {
                v
            } else {
                -v
            }
        }
        _ => return None,
    };
    let days = days_from_civil(year, month, day);
    let secs = days * 86_400 + hour * 3600 + minute * 60 + second - offset_secs;
    Some(i128::from(secs) * 1_000_000_000 + nanos)
}

/// Days from 1970-01-01 to a proleptic Gregorian date (Howard Hinnant's algorithm).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// A time as nanoseconds since the Unix epoch (negative before it).
pub(crate) fn unix_nanos(t: SystemTime) -> i128 {
    match t.duration_since(SystemTime::UNIX_EPOCH) {
        Ok(d) => d.as_nanos() as i128,
        Err(e) => -(e.duration().as_nanos() as i128),
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
pub(crate) fn parse_metadata_filter(q: &str) -> Result<BTreeMap<String, String>, String> {
    let bad = || format!("error parsing metadata: invalid key value pair in `{q}`");
    let mut filters = BTreeMap::new();
    for pair in q.split('&') {
        let (k, v) = pair.split_once('=').ok_or_else(bad)?;
        filters.insert(unescape(k).ok_or_else(bad)?, unescape(v).ok_or_else(bad)?);
    }
    Ok(filters)
}

/// Whether a sandbox's metadata holds every pair of `filter`.
pub(crate) fn metadata_matches(
    metadata: &BTreeMap<String, String>,
    filter: &BTreeMap<String, String>,
) -> bool {
    filter.iter().all(|(k, v)| metadata.get(k) == Some(v))
}

/// A template reference as E2B's `shared/pkg/id/id.go` (`ParseName`) accepts it:
/// `[namespace/]name[:tag]`, name and namespace of `[a-z0-9_-]`, tag of `[a-z0-9_.-]`,
/// case-insensitive. (E2B also trims surrounding white space; stampede does not, so that
/// its OpenAPI pattern says exactly what is accepted.)
/// A list's `limit` query parameter: absent is `max` (E2B's default page size), otherwise
/// an integer in `1..=max`.
pub(crate) fn page_limit(raw: Option<&str>, max: usize) -> Result<usize, String> {
    let Some(l) = raw else { return Ok(max) };
    l.parse::<usize>()
        .ok()
        .filter(|l| (1..=max).contains(l))
        .ok_or_else(|| format!("limit must be an integer in 1..={max}"))
}

pub(crate) fn validate_template_id(t: &str) -> Result<(), String> {
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

#[cfg(test)]
mod tests {
    //! Request parameter checks of the service, pinned to E2B's behaviour.
    use std::time::{Duration, SystemTime};

    use super::{
        is_local_cluster, parse_date_time, parse_metadata_filter, parse_uuid, unix_nanos,
        validate_template_id,
    };

    /// `format: date-time` as Go's `time.Parse(time.RFC3339, ...)` reads it (E2B validates
    /// `startedAfter` with kin-openapi): offsets, fractions, any year from 0000.
    #[test]
    fn date_time_reads_rfc3339_of_any_year() {
        let at = |s| parse_date_time(s).unwrap_or_else(|| panic!("{s} refused"));
        let t = SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000);
        assert_eq!(at("2023-11-14T22:13:20Z"), unix_nanos(t));
        assert_eq!(at("2023-11-14T23:13:20+01:00"), unix_nanos(t));
        assert_eq!(
            at("2023-11-14t21:13:20.5-01:00"),
            unix_nanos(t) + 500_000_000
        );
        assert_eq!(at("1970-01-01T00:00:00Z"), 0);
        // 0001-01-01 is 719162 days before the epoch (proleptic Gregorian).
        assert_eq!(
            at("0001-01-01T00:00:00Z"),
            -719_162 * 86_400 * 1_000_000_000
        );
        assert_eq!(
            at("2024-02-29T00:00:00Z"),
            at("2024-03-01T00:00:00Z") - 86_400_000_000_000
        );
        for bad in [
            "yesterday",
            "2023-11-14",
            "2023-11-14T22:13:20",
            "2023-02-29T00:00:00Z",
            "2023-13-01T00:00:00Z",
            "2023-11-14T24:00:00Z",
            "2023-11-14T22:13:20.Z",
            "2023-11-14T22:13:20+0100",
            "2023-11-14T22:13:20Zjunk",
        ] {
            assert_eq!(parse_date_time(bad), None, "{bad}");
        }
    }

    /// E2B's `utils/sandboxes_list.go` (`parseFilters`): `k=v` pairs joined by `&`, each
    /// part URL-unescaped, every pair with exactly one `=`.
    #[test]
    fn metadata_filter_is_key_value_pairs() {
        let f = parse_metadata_filter("user=abc&app=my+app&k%26=v%3D1").unwrap();
        assert_eq!(f.len(), 3);
        assert_eq!(f["user"], "abc");
        assert_eq!(f["app"], "my app");
        assert_eq!(f["k&"], "v=1");
        assert_eq!(parse_metadata_filter("=").unwrap()[""], "");
        for bad in ["", "novalue", "a=b=c", "a=b&", "%zz=1"] {
            assert!(parse_metadata_filter(bad).is_err(), "{bad}");
        }
    }

    /// `format: uuid` and E2B's local cluster (`shared/pkg/consts/cluster.go`, the nil UUID).
    #[test]
    fn cluster_ids_are_uuids() {
        assert_eq!(
            parse_uuid("6F1D3C2A-0000-4000-8000-00000000000A").as_deref(),
            Some("6f1d3c2a-0000-4000-8000-00000000000a")
        );
        assert_eq!(parse_uuid("6f1d3c2a00004000800000000000000a"), None);
        assert_eq!(is_local_cluster(None), Ok(true));
        assert_eq!(
            is_local_cluster(Some("00000000-0000-0000-0000-000000000000")),
            Ok(true)
        );
        assert_eq!(
            is_local_cluster(Some("6f1d3c2a-0000-4000-8000-00000000000a")),
            Ok(false)
        );
        assert!(is_local_cluster(Some("local")).is_err());
    }

    /// E2B's `shared/pkg/id/id.go` (`ParseName`): `[namespace/]name[:tag]`.
    #[test]
    fn template_references_as_e2b_parses_them() {
        for ok in ["base", "Base", "team/base", "base:v1.2", "my_t-1/x:latest"] {
            assert!(validate_template_id(ok).is_ok(), "{ok}");
        }
        for bad in ["", "a/b/c", "a:b:c", "bad template", "a/", ":tag", "ü"] {
            assert!(validate_template_id(bad).is_err(), "{bad}");
        }
    }
}

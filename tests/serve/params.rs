//! Request parameter checks of the service, pinned to E2B's behaviour.

use std::time::{Duration, SystemTime};

use stampede::serve::params::{
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

//! What one `POST /sandboxes` may ask for, checked before any node is asked: a size some
//! known node can hold, and bounded metadata (the service keeps it for the sandbox's life).
//!
//! E2B's `spec/openapi.yml` types `cpuCount` and `memoryMB` as `int32` (`minimum: 1` and
//! `minimum: 128`) and `SandboxMetadata` as a string-to-string map without stated limits;
//! the metadata caps below are stampede's own.

use std::collections::BTreeMap;

use axum::http::StatusCode;

use super::error::ApiError;
use stampede_placement::PlacementCore;

/// Most metadata keys one sandbox may carry.
pub const MAX_METADATA_KEYS: usize = 64;
/// Longest metadata key, in bytes.
pub const MAX_METADATA_KEY_BYTES: usize = 256;
/// Longest metadata value, in bytes.
pub const MAX_METADATA_VALUE_BYTES: usize = 4096;
/// Most metadata bytes one sandbox may carry, keys and values together.
pub(crate) const MAX_METADATA_BYTES: usize = 16 * 1024;
/// Largest `cpuCount` / `memoryMB` E2B's spec can express (`format: int32`).
pub(crate) const SPEC_MAX_SIZE: u32 = i32::MAX as u32;

const MIB: u64 = 1024 * 1024;

/// The largest resources any known node reports: a sandbox above them can never be
/// placed. `None` = no node has reported that figure yet.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct LargestNode {
    /// Largest `metric_cpu_count`.
    pub cpu_count: Option<u32>,
    /// Largest `metric_memory_total_bytes`.
    pub memory_bytes: Option<u64>,
}

impl LargestNode {
    /// Over every node of `core` that reported metrics at a sync, whatever its status now.
    pub(crate) fn of(core: &PlacementCore) -> Self {
        let mut out = Self::default();
        for view in core.nodes() {
            let m = view.metrics();
            if m.cpu_count > 0 {
                out.cpu_count = out.cpu_count.max(Some(m.cpu_count));
            }
            if m.memory_total_bytes > 0 {
                out.memory_bytes = out.memory_bytes.max(Some(m.memory_total_bytes));
            }
        }
        out
    }
}

fn bad(message: String) -> ApiError {
    ApiError::new(StatusCode::BAD_REQUEST, message)
}

/// A size within E2B's `int32` range that some known node can hold (400 otherwise).
/// With no node known yet the size falls through to normal placement.
pub(crate) fn validate_size(
    vcpu: u32,
    memory_mb: u32,
    largest: LargestNode,
) -> Result<(), ApiError> {
    if vcpu == 0 {
        return Err(bad("cpuCount must be at least 1".into()));
    }
    if vcpu > SPEC_MAX_SIZE {
        return Err(bad(format!(
            "cpuCount {vcpu} is out of range (at most {SPEC_MAX_SIZE})"
        )));
    }
    if memory_mb > SPEC_MAX_SIZE {
        return Err(bad(format!(
            "memoryMB {memory_mb} is out of range (at most {SPEC_MAX_SIZE})"
        )));
    }
    if let Some(max) = largest.cpu_count {
        if vcpu > max {
            return Err(bad(format!(
                "cpuCount {vcpu} exceeds the largest node ({max} vCPU): no node can hold it"
            )));
        }
    }
    if let Some(max) = largest.memory_bytes {
        if u64::from(memory_mb) * MIB > max {
            return Err(bad(format!(
                "memoryMB {memory_mb} exceeds the largest node ({} MiB): no node can hold it",
                max / MIB
            )));
        }
    }
    Ok(())
}

/// Metadata within [`MAX_METADATA_KEYS`], [`MAX_METADATA_KEY_BYTES`],
/// [`MAX_METADATA_VALUE_BYTES`] and [`MAX_METADATA_BYTES`] (400 otherwise).
pub(crate) fn validate_metadata(metadata: &BTreeMap<String, String>) -> Result<(), ApiError> {
    if metadata.len() > MAX_METADATA_KEYS {
        return Err(bad(format!(
            "metadata has {} keys (at most {MAX_METADATA_KEYS})",
            metadata.len()
        )));
    }
    let mut total = 0usize;
    for (k, v) in metadata {
        if k.len() > MAX_METADATA_KEY_BYTES {
            let head: String = k.chars().take(32).collect();
            return Err(bad(format!(
                "metadata key `{head}...` is {} bytes (at most {MAX_METADATA_KEY_BYTES})",
                k.len()
            )));
        }
        if v.len() > MAX_METADATA_VALUE_BYTES {
            return Err(bad(format!(
                "metadata value of `{k}` is {} bytes (at most {MAX_METADATA_VALUE_BYTES})",
                v.len()
            )));
        }
        total += k.len() + v.len();
    }
    if total > MAX_METADATA_BYTES {
        return Err(bad(format!(
            "metadata is {total} bytes (at most {MAX_METADATA_BYTES})"
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const NODE: LargestNode = LargestNode {
        cpu_count: Some(16),
        memory_bytes: Some(64 * 1024 * MIB),
    };

    #[test]
    fn sizes_are_checked_against_the_largest_node() {
        assert!(validate_size(16, 65536, NODE).is_ok());
        assert!(validate_size(17, 1024, NODE).is_err());
        assert!(validate_size(1, 65537, NODE).is_err());
        assert!(validate_size(0, 1024, NODE).is_err());
        assert!(validate_size(u32::MAX, 1024, LargestNode::default()).is_err());
        // Nothing known: normal placement decides.
        assert!(validate_size(4096, 1 << 30, LargestNode::default()).is_ok());
    }

    #[test]
    fn metadata_is_capped() {
        let one = |k: &str, v: &str| BTreeMap::from([(k.to_string(), v.to_string())]);
        assert!(validate_metadata(&BTreeMap::new()).is_ok());
        assert!(validate_metadata(&one("team", "a")).is_ok());
        assert!(validate_metadata(&one(&"k".repeat(MAX_METADATA_KEY_BYTES + 1), "v")).is_err());
        assert!(validate_metadata(&one("k", &"v".repeat(MAX_METADATA_VALUE_BYTES + 1))).is_err());
        let many: BTreeMap<String, String> = (0..=MAX_METADATA_KEYS)
            .map(|i| (format!("k{i}"), String::new()))
            .collect();
        assert!(validate_metadata(&many).is_err());
        let big: BTreeMap<String, String> = (0..5)
            .map(|i| (format!("k{i}"), "v".repeat(MAX_METADATA_VALUE_BYTES)))
            .collect();
        assert!(validate_metadata(&big).is_err());
    }
}

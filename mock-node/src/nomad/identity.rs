//! Each virtual node's Nomad identity: a node UUID and a node name, like a Nomad client.
//!
//! E2B keys a discovered orchestrator by the first 8 characters of its Nomad node id
//! (`consts.NodeIDLength`) and deduplicates on them, so two virtual nodes whose ids
//! share a prefix would collapse into one. The first 8 hex digits are therefore a
//! bijection of the node index (an odd multiplier and a seed mask, both invertible
//! modulo 2^32): unique for every fleet below 2^32 nodes, whatever the seed. The rest
//! of the UUID is a seeded hash, stable across runs with the same seed.

use std::net::SocketAddr;

/// One node's identity as Nomad's API shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NomadIdentity {
    /// The Nomad node UUID (registrations' `NodeID`, node list's `ID`).
    pub node_id: String,
    /// The Nomad node name; equal to the id its ServiceInfo reports (E2B's job sets
    /// `NODE_ID=${node.unique.name}`).
    pub name: String,
    /// The address the node is reached at (never 0.0.0.0).
    pub advertised: SocketAddr,
}

fn mix64(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// A UUID-shaped id whose first 32 bits are `prefix`, the rest drawn from `salt`.
fn uuid_with_prefix(prefix: u32, salt: u64) -> String {
    let a = mix64(salt);
    let b = mix64(a);
    format!(
        "{prefix:08x}-{:04x}-4{:03x}-{:04x}-{:012x}",
        (a >> 48) as u16,
        (a >> 36) as u16 & 0x0fff,
        ((a >> 16) as u16 & 0x3fff) | 0x8000,
        b & 0xffff_ffff_ffff
    )
}

/// Nomad node UUID of node `k` in a fleet seeded with `seed`.
pub(crate) fn node_uuid(seed: u64, k: usize) -> String {
    // k < 2^32 for any fleet that fits in memory; truncation keeps the bijection there.
    let prefix = (k as u32).wrapping_mul(0x9E37_79B1) ^ (mix64(seed) as u32);
    uuid_with_prefix(prefix, seed ^ mix64(k as u64))
}

/// Allocation UUID of node `k`'s current incarnation (`service_id` changes at restart,
/// as a replaced allocation gets a new id in Nomad).
pub(crate) fn alloc_uuid(seed: u64, k: usize, service_id: &str) -> String {
    let h = service_id.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    });
    let salt = mix64(seed ^ h ^ (k as u64).rotate_left(32));
    uuid_with_prefix((salt >> 32) as u32, salt)
}

/// The address to advertise for a node bound at `bound`: the configured IP if any; for
/// an unspecified bind (0.0.0.0 / ::), the host's outbound IP; otherwise the bound one.
pub(crate) fn advertised(bound: SocketAddr, advertise_ip: Option<std::net::IpAddr>) -> SocketAddr {
    if let Some(ip) = advertise_ip {
        return SocketAddr::new(ip, bound.port());
    }
    if bound.ip().is_unspecified() {
        return SocketAddr::new(outbound_ip(bound.is_ipv6()), bound.port());
    }
    bound
}

/// The source IP the kernel picks for traffic leaving the host (a UDP "connect" sends
/// no packet); loopback when the host has no route.
fn outbound_ip(v6: bool) -> std::net::IpAddr {
    use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, UdpSocket};
    // Documentation ranges (RFC 5737 / RFC 3849): routed like any address, never used.
    let (local, probe): (SocketAddr, SocketAddr) = if v6 {
        (
            (Ipv6Addr::UNSPECIFIED, 0).into(),
            (Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 1), 9).into(),
        )
    } else {
        (
            (Ipv4Addr::UNSPECIFIED, 0).into(),
            (Ipv4Addr::new(192, 0, 2, 1), 9).into(),
        )
    };
    let fallback = if v6 {
        IpAddr::V6(Ipv6Addr::LOCALHOST)
    } else {
        IpAddr::V4(Ipv4Addr::LOCALHOST)
    };
    UdpSocket::bind(local)
        .and_then(|s| {
            s.connect(probe)?;
            s.local_addr()
        })
        .map(|a| a.ip())
        .ok()
        .filter(|ip| !ip.is_unspecified())
        .unwrap_or(fallback)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn short_ids_are_unique_for_a_large_fleet() {
        for seed in [0, 1, 42, u64::MAX] {
            let mut seen = HashSet::new();
            for k in 0..20_000 {
                let id = node_uuid(seed, k);
                assert_eq!(id.len(), 36, "{id}");
                assert!(
                    seen.insert(id[..8].to_string()),
                    "seed {seed} node {k}: {id}"
                );
            }
        }
    }

    #[test]
    fn ids_are_stable_and_restart_changes_the_allocation() {
        assert_eq!(node_uuid(7, 3), node_uuid(7, 3));
        assert_ne!(alloc_uuid(7, 3, "a"), alloc_uuid(7, 3, "b"));
    }

    #[test]
    fn unspecified_binds_are_never_advertised() {
        let a = advertised("0.0.0.0:5008".parse().expect("addr"), None);
        assert!(!a.ip().is_unspecified());
        assert_eq!(a.port(), 5008);
        let b = advertised(
            "0.0.0.0:5008".parse().expect("addr"),
            Some("10.1.2.3".parse().expect("ip")),
        );
        assert_eq!(b, "10.1.2.3:5008".parse().expect("addr"));
    }
}

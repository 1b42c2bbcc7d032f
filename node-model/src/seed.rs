//! The per-node seed the simulator and the real fleet both derive.

/// Seed of node `k`'s RNG, derived from the cluster seed (SplitMix64 of seed + k), so that
/// the simulator and the real fleet draw the same numbers for the same node.
pub fn node_seed(cluster_seed: u64, k: usize) -> u64 {
    let mut z = cluster_seed
        .wrapping_add(k as u64)
        .wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

//! Per-node counts as text: one bar per node on a small fleet, a compact distribution
//! (a histogram of the counts, the busiest and the idlest nodes) on a large one, where
//! a thousand bars say nothing.

use super::format::bar;

/// Above this many nodes the text reports show a [`compact`] distribution.
pub const MAX_NODE_BARS: usize = 40;

/// Buckets of the compact histogram.
const BUCKETS: u64 = 10;

/// Nodes named at each end of the compact distribution.
const ENDS: usize = 5;

/// Lines showing `counts` of the nodes `ids`: [`bars`] up to [`MAX_NODE_BARS`] nodes,
/// [`compact`] above.
pub fn distribution(ids: &[&str], counts: &[u64]) -> Vec<String> {
    if counts.len() > MAX_NODE_BARS {
        compact(ids, counts)
    } else {
        bars(ids, counts)
    }
}

/// One bar per node.
pub fn bars(ids: &[&str], counts: &[u64]) -> Vec<String> {
    let max = counts.iter().copied().max().unwrap_or(0);
    let width = ids.iter().map(|id| id.len()).max().unwrap_or(0);
    ids.iter()
        .zip(counts)
        .map(|(id, &c)| format!("{id:<width$} |{}| {c}", bar(c, max)))
        .collect()
}

/// A histogram of the counts in up to ten equal ranges (a bar per range, the nodes in
/// it), then the five busiest and the five idlest nodes.
pub fn compact(ids: &[&str], counts: &[u64]) -> Vec<String> {
    let (Some(&lo), Some(&hi)) = (counts.iter().min(), counts.iter().max()) else {
        return Vec::new();
    };
    let width = (hi - lo + 1).div_ceil(BUCKETS).max(1);
    let buckets = (hi - lo) / width + 1;
    let mut nodes = vec![0u64; buckets as usize];
    for &c in counts {
        nodes[((c - lo) / width) as usize] += 1;
    }
    let most = nodes.iter().copied().max().unwrap_or(0);
    let range = |b: u64| {
        let from = lo + b * width;
        let to = from + width - 1;
        if width == 1 {
            from.to_string()
        } else {
            format!("{from}..{to}")
        }
    };
    let label_width = (0..buckets).map(|b| range(b).len()).max().unwrap_or(0);
    let mut out = vec![format!(
        "{} nodes, sandboxes per node (range: nodes)",
        counts.len()
    )];
    for (b, &n) in nodes.iter().enumerate() {
        out.push(format!(
            "{:>label_width$} |{}| {n}",
            range(b as u64),
            bar(n, most)
        ));
    }
    let mut order: Vec<usize> = (0..counts.len()).collect();
    // Busiest first; ties in node order, so the lines are stable.
    order.sort_by(|&a, &b| counts[b].cmp(&counts[a]).then(a.cmp(&b)));
    let named = |it: &mut dyn Iterator<Item = &usize>| -> String {
        it.map(|&k| format!("{} {}", ids.get(k).copied().unwrap_or("?"), counts[k]))
            .collect::<Vec<_>>()
            .join(", ")
    };
    out.push(format!("busiest: {}", named(&mut order.iter().take(ENDS))));
    out.push(format!(
        "idlest: {}",
        named(&mut order.iter().rev().take(ENDS))
    ));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_fleets_get_bars_large_ones_a_histogram() {
        let ids: Vec<String> = (0..50).map(|k| format!("node-{k:02}")).collect();
        let ids: Vec<&str> = ids.iter().map(String::as_str).collect();
        let counts: Vec<u64> = (0..50).map(|k| 100 + k).collect();
        assert_eq!(distribution(&ids[..3], &counts[..3]).len(), 3);
        let lines = distribution(&ids, &counts);
        // Header, 10 ranges of 5 counts with 5 nodes each, busiest, idlest.
        assert_eq!(lines.len(), 13, "{lines:#?}");
        assert!(lines[1].starts_with("100..104 |") && lines[1].ends_with("| 5"));
        assert_eq!(
            lines[11],
            "busiest: node-49 149, node-48 148, node-47 147, node-46 146, node-45 145"
        );
        assert_eq!(
            lines[12],
            "idlest: node-00 100, node-01 101, node-02 102, node-03 103, node-04 104"
        );
    }

    #[test]
    fn equal_counts_are_one_bucket() {
        let ids = ["a"; 41];
        let lines = compact(&ids, &[0; 41]);
        assert_eq!(lines[1], format!("0 |{}| 41", bar(41, 41)));
        assert_eq!(lines.len(), 4);
    }
}

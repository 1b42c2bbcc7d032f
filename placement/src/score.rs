//! E2B's Best-of-K score: lower is better.

/// Score of placing `requested_vcpu` on a node:
/// `(requested + reserved + alpha * cpu_percent / 100) / (r * cpu_count)`.
///
/// `reserved_vcpu` is what the accounting mode believes is allocated. A node reporting
/// `cpu_count == 0` scores `+inf` and is never chosen (E2B returns `MaxFloat64` and keeps
/// the first candidate strictly below it).
pub fn score(
    requested_vcpu: u32,
    reserved_vcpu: u64,
    cpu_percent: u32,
    cpu_count: u32,
    r: f64,
    alpha: f64,
) -> f64 {
    if cpu_count == 0 {
        return f64::INFINITY;
    }
    let usage = f64::from(cpu_percent) / 100.0;
    let numerator = f64::from(requested_vcpu) + reserved_vcpu as f64 + alpha * usage;
    numerator / (r * f64::from(cpu_count))
}

#[cfg(test)]
mod tests {
    use super::score;

    #[test]
    fn worked_examples() {
        // (1 + 10 + 0.5 * 0.5) / (4 * 16) = 11.25 / 64
        assert_eq!(score(1, 10, 50, 16, 4.0, 0.5), 11.25 / 64.0);
        // Idle node: only the request counts.
        assert_eq!(score(2, 0, 0, 8, 4.0, 0.5), 2.0 / 32.0);
        // 400% CPU (4 busy cores) weighs like 2 reserved vCPUs at alpha 0.5.
        assert_eq!(score(1, 0, 400, 4, 4.0, 0.5), score(1, 2, 0, 4, 4.0, 0.5));
    }

    #[test]
    fn zero_cpu_count_is_infinite() {
        assert!(score(1, 0, 0, 0, 4.0, 0.5).is_infinite());
    }
}

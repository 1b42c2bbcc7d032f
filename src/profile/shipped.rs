//! The profiles under `profiles/`, built into the binary so that `stampede run nightly`
//! works from any folder. A file that exists at the given path always wins: a shipped
//! profile is overridden by giving a path.

use std::path::Path;

/// Every shipped profile: its name (the file name without `.yaml`) and its text.
pub const SHIPPED: [(&str, &str); 16] = [
    ("burst-500", include_str!("../../profiles/burst-500.yaml")),
    (
        "chaos-flaky",
        include_str!("../../profiles/chaos-flaky.yaml"),
    ),
    ("chaos-hang", include_str!("../../profiles/chaos-hang.yaml")),
    (
        "chaos-node-kill",
        include_str!("../../profiles/chaos-node-kill.yaml"),
    ),
    (
        "chaos-restart",
        include_str!("../../profiles/chaos-restart.yaml"),
    ),
    (
        "chaos-slow-create",
        include_str!("../../profiles/chaos-slow-create.yaml"),
    ),
    (
        "chaos-stale-heartbeat",
        include_str!("../../profiles/chaos-stale-heartbeat.yaml"),
    ),
    (
        "e2b-pr2201-frozen",
        include_str!("../../profiles/e2b-pr2201-frozen.yaml"),
    ),
    (
        "e2b-api-alone",
        include_str!("../../profiles/e2b-api-alone.yaml"),
    ),
    ("e2b-pr2201", include_str!("../../profiles/e2b-pr2201.yaml")),
    ("nightly", include_str!("../../profiles/nightly.yaml")),
    (
        "resume-storm",
        include_str!("../../profiles/resume-storm.yaml"),
    ),
    (
        "seed-000-five-node",
        include_str!("../../profiles/seed-000-five-node.yaml"),
    ),
    (
        "sim-churn-1000",
        include_str!("../../profiles/sim-churn-1000.yaml"),
    ),
    (
        "staging.example",
        include_str!("../../profiles/staging.example.yaml"),
    ),
    ("storm-200", include_str!("../../profiles/storm-200.yaml")),
];

/// The shipped profile `path` names, when it names one: a bare name (`nightly`,
/// `nightly.yaml`) or the checkout's path (`profiles/nightly.yaml`).
pub fn shipped(path: &Path) -> Option<(&'static str, &'static str)> {
    let text = path.to_str()?;
    let name = text
        .strip_prefix("profiles/")
        .or_else(|| text.strip_prefix("./profiles/"))
        .unwrap_or(text);
    let name = name.strip_suffix(".yaml").unwrap_or(name);
    SHIPPED.iter().copied().find(|(n, _)| *n == name)
}

/// The closest name to `path`'s among the shipped profiles and the files beside it
/// (`profiles/nightyl.yaml` -> `profiles/nightly.yaml`), within an edit distance of 3.
pub fn did_you_mean(path: &Path) -> Option<String> {
    let file = path.file_name()?.to_str()?;
    let stem = file.trim_end_matches(".yaml").trim_end_matches(".yml");
    let dir = path.parent().filter(|d| !d.as_os_str().is_empty());
    let mut candidates: Vec<String> = Vec::new();
    if let Ok(entries) = std::fs::read_dir(dir.unwrap_or(Path::new("."))) {
        for e in entries.flatten().take(1000) {
            if let Some(n) = e.file_name().to_str() {
                if n.ends_with(".yaml") || n.ends_with(".yml") {
                    let shown = dir.map_or(n.to_string(), |d| d.join(n).display().to_string());
                    candidates.push(shown);
                }
            }
        }
    }
    candidates.extend(SHIPPED.iter().map(|(n, _)| n.to_string()));
    candidates
        .into_iter()
        .map(|c| {
            let base = Path::new(&c)
                .file_name()
                .and_then(|f| f.to_str())
                .unwrap_or(&c)
                .trim_end_matches(".yaml")
                .trim_end_matches(".yml")
                .to_string();
            (distance(stem, &base), c)
        })
        .filter(|(d, _)| *d > 0 && *d <= 3)
        .min()
        .map(|(_, c)| c)
}

/// Levenshtein distance of two short names.
fn distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut prev = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let cur = row[j + 1];
            row[j + 1] = (prev + usize::from(ca != *cb)).min(row[j] + 1).min(cur + 1);
            prev = cur;
        }
    }
    row[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The table lists exactly the files under `profiles/`.
    #[test]
    fn the_table_lists_every_file_under_profiles() {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/profiles");
        let mut files: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.ends_with(".yaml"))
            .map(|n| n.trim_end_matches(".yaml").to_string())
            .collect();
        files.sort();
        let mut names: Vec<String> = SHIPPED.iter().map(|(n, _)| n.to_string()).collect();
        names.sort();
        assert_eq!(names, files);
    }

    #[test]
    fn names_and_checkout_paths_find_a_shipped_profile() {
        for p in ["nightly", "nightly.yaml", "profiles/nightly.yaml"] {
            assert_eq!(shipped(Path::new(p)).map(|s| s.0), Some("nightly"), "{p}");
        }
        assert!(shipped(Path::new("/elsewhere/nightly.yaml")).is_none());
        assert_eq!(
            did_you_mean(Path::new("nightyl")).as_deref(),
            Some("nightly")
        );
        assert_eq!(distance("burst-50", "burst-500"), 1);
    }
}

//! Every shipped profile's `description` reads as written: a plain YAML scalar ends at
//! ` #` (a comment), which once cut `E2B PR #2201 benchmark ...` down to `E2B PR`.

use std::path::Path;

use stampede::profile::load_and_validate;

/// The text after `description:` on its line, as written in the file.
fn raw_description(text: &str) -> Option<&str> {
    text.lines()
        .find_map(|l| l.strip_prefix("description:"))
        .map(str::trim)
}

#[test]
fn shipped_profile_descriptions_round_trip_whole() {
    let mut seen = 0;
    for entry in std::fs::read_dir("profiles").expect("profiles/") {
        let path = entry.expect("entry").path();
        if path.extension().and_then(|e| e.to_str()) != Some("yaml") {
            continue;
        }
        let text = std::fs::read_to_string(&path).expect("readable");
        let profile = load_and_validate(Path::new(&path)).expect("shipped profile is valid");
        let raw = raw_description(&text).unwrap_or_else(|| {
            panic!(
                "{}: every shipped profile has a description",
                path.display()
            )
        });
        // The raw value read as a YAML string on its own is the whole description...
        let whole: String = serde_yaml_ng::from_str(raw).expect("a YAML scalar");
        assert!(
            raw.starts_with('"') || raw.starts_with('\'') || whole == raw,
            "{}: unquoted description {raw:?} reads as {whole:?}: quote it",
            path.display()
        );
        assert_eq!(profile.description, whole, "{}", path.display());
        assert!(!profile.description.is_empty(), "{}", path.display());
        // ...and survives a write and a read of the profile.
        let again: stampede::profile::Profile =
            serde_yaml_ng::from_str(&serde_yaml_ng::to_string(&profile).expect("serializes"))
                .expect("re-reads");
        assert_eq!(again.description, profile.description, "{}", path.display());
        seen += 1;
    }
    assert!(seen >= 10, "found only {seen} shipped profiles");
}

/// The check above catches the `#` cut it is named after.
#[test]
fn an_unquoted_hash_cuts_a_description() {
    let raw = "E2B PR #2201 benchmark";
    let read: String = serde_yaml_ng::from_str(raw).expect("a YAML scalar");
    assert_eq!(read, "E2B PR");
    assert_ne!(read, raw);
}

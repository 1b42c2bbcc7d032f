//! The team's snapshot templates, as E2B keeps them (`snapshot_templates`,
//! `env_build_assignments` and `env_aliases` in `packages/db`; read by
//! `handlers/snapshot_template_{create,list}.go`).
//!
//! A snapshot template is a template made from a running sandbox: an id like a
//! template's, the sandbox it came from, at most one alias in the team's namespace, and
//! its builds, each under a tag (`default` unless the name said another). A named
//! snapshot whose alias already exists gets a new build on the existing template, not a
//! new template. A list shows each template once, by its newest build (of the tag asked
//! for, if one was), newest template first, paged by a cursor of its creation time and
//! id (E2B's `utils/pagination.go`).
//!
//! stampede serves one team, whose slug is [`TEAM_SLUG`] (an assumption: E2B's slug is
//! the team's own).

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use base64::Engine;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};

/// The namespace of the one team stampede serves (stampede's choice).
pub(crate) const TEAM_SLUG: &str = "stampede";

/// The tag of a build whose name gives none (E2B's `id.DefaultTag`).
pub(crate) const DEFAULT_TAG: &str = "default";

/// Snapshots per page, by default and at most: 100 (E2B's
/// `snapshotTemplatesDefaultLimit` / `snapshotTemplatesMaxLimit`).
pub(crate) const LIST_LIMIT: usize = 100;

/// E2B `SnapshotInfo`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct SnapshotInfo {
    /// `namespace/alias:tag` when the template has an alias, else `templateID:tag`.
    #[serde(rename = "snapshotID")]
    pub snapshot_id: String,
    /// The template's full names (`namespace/alias`).
    pub names: Vec<String>,
}

/// The longest snapshot name (or id) accepted, in bytes. E2B's `id.ParseName` checks the
/// characters only; its names live in a database column and on URLs, so a name of any
/// length is not what it keeps. 128 bytes holds `namespace/alias:tag` of the lengths E2B's
/// SDKs produce and keeps a list page small (100 names of at most 128 bytes).
pub(crate) const MAX_NAME_BYTES: usize = 128;

/// A snapshot name or id as E2B's `id.ParseName` reads it: `[namespace/]alias[:tag]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SnapshotName {
    /// `alias` (or a template id), lower-cased, without its namespace.
    pub alias: String,
    /// The tag, when one was given; `default` is kept as given here.
    pub tag: Option<String>,
}

impl SnapshotName {
    /// Parse `input`: namespace and alias of `[a-z0-9_-]`, tag of `[a-z0-9_.-]`,
    /// case-insensitive (lower-cased), and a namespace, if any, must be the team's
    /// (`id.ValidateNamespaceMatchesTeam`). Unlike E2B, surrounding white space is not
    /// trimmed, so that the OpenAPI pattern says exactly what is accepted.
    pub(crate) fn parse(input: &str) -> Result<Self, String> {
        if input.len() > MAX_NAME_BYTES {
            return Err(format!(
                "Invalid name: longer than {MAX_NAME_BYTES} bytes ({} bytes)",
                input.len()
            ));
        }
        let ident = |s: &str, extra: &[u8]| {
            !s.is_empty()
                && s.bytes().all(|c| {
                    c.is_ascii_alphanumeric() || c == b'-' || c == b'_' || extra.contains(&c)
                })
        };
        let (name, tag) = match input.split_once(':') {
            Some((n, t)) => (n, Some(t)),
            None => (input, None),
        };
        if let Some(t) = tag {
            if !ident(t, b".") {
                return Err(format!("Invalid name: invalid tag: {t}"));
            }
        }
        let (namespace, alias) = match name.split_once('/') {
            Some((ns, a)) => (Some(ns), a),
            None => (None, name),
        };
        if let Some(ns) = namespace {
            if !ident(ns, b"") {
                return Err(format!("Invalid name: invalid namespace: {ns}"));
            }
            let ns = ns.to_ascii_lowercase();
            if ns != TEAM_SLUG {
                return Err(format!(
                    "namespace '{ns}' must match your team '{TEAM_SLUG}'"
                ));
            }
        }
        if !ident(alias, b"") {
            return Err(format!("Invalid name: invalid template ID: {alias}"));
        }
        Ok(Self {
            alias: alias.to_ascii_lowercase(),
            tag: tag.map(str::to_ascii_lowercase),
        })
    }

    /// The build tag this name asks for (`default` when none).
    pub(crate) fn tag_or_default(&self) -> &str {
        self.tag.as_deref().unwrap_or(DEFAULT_TAG)
    }
}

/// A list page's position: after (older than) the template created at `time` with `id`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Cursor {
    time: SystemTime,
    id: String,
}

impl Cursor {
    /// E2B's token: base64url of `{RFC 3339, nanoseconds}__{id}`.
    pub(crate) fn encode(&self) -> String {
        let text = format!(
            "{}__{}",
            humantime::format_rfc3339_nanos(self.time),
            self.id
        );
        base64::engine::general_purpose::URL_SAFE.encode(text)
    }

    /// Read a token made by [`Cursor::encode`] (or by E2B); `None` when it is not one.
    pub(crate) fn decode(token: &str) -> Option<Self> {
        let bytes = base64::engine::general_purpose::URL_SAFE
            .decode(token)
            .ok()?;
        let text = String::from_utf8(bytes).ok()?;
        let (time, id) = text.split_once("__")?;
        // A third part is E2B's ascending order, which this list does not have.
        if id.contains("__") {
            return None;
        }
        let time = humantime::parse_rfc3339(time).ok()?;
        Some(Self {
            time: truncate_to_micros(time),
            id: id.to_string(),
        })
    }
}

/// E2B's database keeps microseconds; a cursor time is compared at that precision.
fn truncate_to_micros(t: SystemTime) -> SystemTime {
    let since = t.duration_since(UNIX_EPOCH).unwrap_or_default();
    UNIX_EPOCH + Duration::from_micros(u64::try_from(since.as_micros()).unwrap_or(u64::MAX))
}

/// One build of a template: its tag and the size of the sandbox it was taken of.
#[derive(Debug, Clone)]
struct Build {
    tag: String,
    size: SandboxSize,
}

/// The size a snapshot's sandboxes get (E2B's build `vcpu` and `ram_mb`, the source
/// sandbox's).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct SandboxSize {
    /// vCPU.
    pub vcpu: u32,
    /// Memory, MiB.
    pub ram_mb: u32,
}

#[derive(Debug, Clone)]
struct Template {
    alias: Option<String>,
    sandbox_id: String,
    created_at: SystemTime,
    /// Its builds, oldest first.
    builds: Vec<Build>,
}

impl Template {
    fn names(&self) -> Vec<String> {
        self.alias
            .iter()
            .map(|a| format!("{TEAM_SLUG}/{a}"))
            .collect()
    }

    fn info(&self, id: &str, tag: &str) -> SnapshotInfo {
        let names = self.names();
        let base = names.first().map_or(id, String::as_str);
        SnapshotInfo {
            snapshot_id: format!("{base}:{tag}"),
            names,
        }
    }
}

/// What a list asks for.
#[derive(Debug, Clone, Default)]
pub(crate) struct ListFilter {
    /// Only snapshots of this sandbox.
    pub sandbox_id: Option<String>,
    /// Only this template (by alias or id), and with a tag only builds of that tag.
    pub name: Option<SnapshotName>,
}

/// The snapshot templates of the team.
#[derive(Debug)]
pub(crate) struct Snapshots {
    templates: BTreeMap<String, Template>,
    rng: ChaCha8Rng,
}

impl Snapshots {
    /// An empty store whose template ids come from `seed` (a stream of their own, so
    /// that sandbox ids do not depend on snapshots).
    pub(crate) fn new(seed: u64) -> Self {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        rng.set_stream(2);
        Self {
            templates: BTreeMap::new(),
            rng,
        }
    }

    /// A fresh id like E2B's `id.Generate`: 20 lowercase alphanumerics.
    pub(crate) fn new_id(&mut self) -> String {
        const ALPHABET: &[u8] = b"abcdefghijklmnopqrstuvwxyz1234567890";
        loop {
            let id: String = (0..20)
                .map(|_| char::from(ALPHABET[self.rng.random_range(0..ALPHABET.len())]))
                .collect();
            if !self.templates.contains_key(&id) {
                return id;
            }
        }
    }

    fn by_alias(&self, alias: &str) -> Option<&str> {
        self.templates
            .iter()
            .find(|(_, t)| t.alias.as_deref() == Some(alias))
            .map(|(id, _)| id.as_str())
    }

    /// The template `name` means: its alias, or its id.
    fn resolve(&self, name: &SnapshotName) -> Option<String> {
        self.by_alias(&name.alias).map(str::to_string).or_else(|| {
            self.templates
                .contains_key(&name.alias)
                .then(|| name.alias.clone())
        })
    }

    /// Whether `template` names one of the team's snapshot templates (by alias or id,
    /// any tag).
    pub(crate) fn knows(&self, template: &str) -> bool {
        SnapshotName::parse(template)
            .ok()
            .and_then(|name| self.resolve(&name))
            .is_some()
    }

    /// Remove the template `name` means (by alias or id) with all its builds; whether
    /// there was one. E2B's `DELETE /templates/{templateID}`.
    pub(crate) fn delete(&mut self, name: &SnapshotName) -> bool {
        match self.resolve(name) {
            Some(id) => self.templates.remove(&id).is_some(),
            None => false,
        }
    }

    /// The size of the sandboxes a create from `template` gets, when it names a snapshot
    /// (by alias or id; its newest build of the tag, `default` when none is given), as
    /// E2B's create takes them from the template's build.
    pub(crate) fn size_of(&self, template: &str) -> Option<SandboxSize> {
        let name = SnapshotName::parse(template).ok()?;
        let id = self.resolve(&name)?;
        let tag = name.tag_or_default();
        self.templates[&id]
            .builds
            .iter()
            .rev()
            .find(|b| b.tag == tag)
            .map(|b| b.size)
    }

    /// Record a build of `sandbox_id` (of `size`) taken at `now`: under `name`'s template when that
    /// alias exists, else a new template (aliased when named). The answer of E2B's
    /// create: `namespace/alias:tag` and the name, or `templateID:tag` and no names.
    pub(crate) fn record(
        &mut self,
        sandbox_id: &str,
        size: SandboxSize,
        name: Option<&SnapshotName>,
        now: SystemTime,
    ) -> SnapshotInfo {
        let tag = name.map_or(DEFAULT_TAG, SnapshotName::tag_or_default);
        let existing = name.and_then(|n| self.by_alias(&n.alias).map(str::to_string));
        let id = existing.unwrap_or_else(|| {
            let id = self.new_id();
            self.templates.insert(
                id.clone(),
                Template {
                    alias: name.map(|n| n.alias.clone()),
                    sandbox_id: sandbox_id.to_string(),
                    created_at: truncate_to_micros(now),
                    builds: Vec::new(),
                },
            );
            id
        });
        let template = self.templates.get_mut(&id).expect("just found or made");
        template.builds.push(Build {
            tag: tag.to_string(),
            size,
        });
        match name {
            Some(n) => {
                let full = format!("{TEAM_SLUG}/{}", n.alias);
                SnapshotInfo {
                    snapshot_id: format!("{full}:{tag}"),
                    names: vec![full],
                }
            }
            None => SnapshotInfo {
                snapshot_id: format!("{id}:{tag}"),
                names: Vec::new(),
            },
        }
    }

    /// One page of the templates `filter` keeps, newest first, after `cursor`, at most
    /// `limit`; the cursor of the next page when there is one.
    pub(crate) fn list(
        &self,
        filter: &ListFilter,
        cursor: Option<&Cursor>,
        limit: usize,
        now: SystemTime,
    ) -> (Vec<SnapshotInfo>, Option<Cursor>) {
        let only = match &filter.name {
            Some(n) => match self.resolve(n) {
                Some(id) => Some(id),
                None => return (Vec::new(), None),
            },
            None => None,
        };
        let tag = filter.name.as_ref().and_then(|n| n.tag.as_deref());
        // The first page starts after everything (E2B: now and the highest id).
        let start = cursor.map_or((now, None), |c| (c.time, Some(c.id.as_str())));
        let before = |t: SystemTime, id: &str| match start.1 {
            Some(cid) => (t, id) < (start.0, cid),
            None => t <= start.0,
        };
        let mut rows: Vec<(&String, &Template, &str)> = self
            .templates
            .iter()
            .filter(|(id, t)| {
                only.as_deref().is_none_or(|o| o == id.as_str())
                    && filter
                        .sandbox_id
                        .as_deref()
                        .is_none_or(|s| s == t.sandbox_id)
                    && before(t.created_at, id)
            })
            .filter_map(|(id, t)| {
                let build = t
                    .builds
                    .iter()
                    .rev()
                    .find(|b| tag.is_none_or(|want| want == b.tag))?;
                Some((id, t, build.tag.as_str()))
            })
            .collect();
        rows.sort_by(|a, b| (b.1.created_at, b.0).cmp(&(a.1.created_at, a.0)));
        let more = rows.len() > limit;
        rows.truncate(limit);
        let next = more
            .then(|| rows.last())
            .flatten()
            .map(|(id, t, _)| Cursor {
                time: t.created_at,
                id: (*id).clone(),
            });
        let page = rows
            .into_iter()
            .map(|(id, t, build)| t.info(id, build))
            .collect();
        (page, next)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 2,000 snapshots with 100 KiB names took serve from 16 to 223 MB: a name longer
    /// than the cap is refused, one at the cap is taken.
    #[test]
    fn a_name_longer_than_the_cap_is_refused() {
        let at_cap = "a".repeat(MAX_NAME_BYTES);
        assert!(SnapshotName::parse(&at_cap).is_ok());
        let over = "a".repeat(MAX_NAME_BYTES + 1);
        let err = SnapshotName::parse(&over).expect_err("over the cap");
        assert!(err.contains("longer than"), "{err}");
        assert!(SnapshotName::parse(&"a".repeat(100 << 10)).is_err());
    }

    /// No route deleted a snapshot: a deleted one is gone from lists and creates, by
    /// alias or by id, and a second delete finds nothing.
    #[test]
    fn a_deleted_snapshot_is_gone() {
        let mut store = Snapshots::new(7);
        let size = SandboxSize {
            vcpu: 2,
            ram_mb: 512,
        };
        let now = SystemTime::now();
        let named = store.record("isb1", size, Some(&name("keep-me")), now);
        let anon = store.record("isb2", size, None, now);
        let anon_id = anon.snapshot_id.split(':').next().expect("id").to_string();
        assert!(store.delete(&name("keep-me")));
        assert!(!store.delete(&name("keep-me")));
        assert!(store.size_of(&named.snapshot_id).is_none());
        assert!(store.delete(&name(&anon_id)));
        let (page, _) = store.list(&ListFilter::default(), None, 100, now);
        assert!(page.is_empty(), "{page:?}");
    }

    fn name(s: &str) -> SnapshotName {
        SnapshotName::parse(s).expect("valid")
    }

    const SIZE: SandboxSize = SandboxSize {
        vcpu: 2,
        ram_mb: 512,
    };

    #[test]
    fn names_parse_as_e2b_reads_them() {
        assert_eq!(
            name("Stampede/My-Snap:V1"),
            SnapshotName {
                alias: "my-snap".into(),
                tag: Some("v1".into())
            }
        );
        assert_eq!(name("snap").tag_or_default(), "default");
        for bad in [
            "",
            "a b",
            "other/snap",
            "snap:",
            "snap:a/b",
            "/snap",
            " snap",
        ] {
            assert!(SnapshotName::parse(bad).is_err(), "{bad:?} accepted");
        }
    }

    #[test]
    fn a_named_snapshot_reuses_its_template_and_lists_once_by_its_newest_build() {
        let mut s = Snapshots::new(7);
        let t0 = UNIX_EPOCH + Duration::from_secs(1_000);
        let first = s.record("isbx", SIZE, Some(&name("snap")), t0);
        assert_eq!(first.snapshot_id, "stampede/snap:default");
        assert_eq!(first.names, vec!["stampede/snap".to_string()]);
        let second = s.record(
            "isbx",
            SandboxSize { vcpu: 4, ..SIZE },
            Some(&name("snap:v2")),
            t0 + Duration::from_secs(1),
        );
        assert_eq!(second.snapshot_id, "stampede/snap:v2");
        let bare = s.record("iother", SIZE, None, t0 + Duration::from_secs(2));
        assert!(bare.snapshot_id.ends_with(":default") && bare.names.is_empty());

        let now = t0 + Duration::from_secs(60);
        let (all, next) = s.list(&ListFilter::default(), None, LIST_LIMIT, now);
        assert_eq!(next, None);
        assert_eq!(
            all.iter()
                .map(|i| i.snapshot_id.as_str())
                .collect::<Vec<_>>(),
            vec![bare.snapshot_id.as_str(), "stampede/snap:v2"],
            "one entry per template, newest first, by its newest build"
        );
        let tagged = ListFilter {
            name: Some(name("snap:default")),
            ..ListFilter::default()
        };
        let (page, _) = s.list(&tagged, None, LIST_LIMIT, now);
        assert_eq!(page[0].snapshot_id, "stampede/snap:default");
        let of_sandbox = ListFilter {
            sandbox_id: Some("iother".into()),
            ..ListFilter::default()
        };
        assert_eq!(
            s.list(&of_sandbox, None, LIST_LIMIT, now).0,
            vec![bare.clone()]
        );
        let unknown = ListFilter {
            name: Some(name("nothing")),
            ..ListFilter::default()
        };
        assert!(s.list(&unknown, None, LIST_LIMIT, now).0.is_empty());

        // A create from a snapshot gets the size of the build its reference names.
        assert_eq!(s.size_of("snap"), Some(SIZE));
        assert_eq!(s.size_of("stampede/snap:v2").map(|z| z.vcpu), Some(4));
        assert_eq!(s.size_of(&bare.snapshot_id), Some(SIZE));
        assert_eq!(s.size_of("snap:v3"), None);
        assert_eq!(s.size_of("base"), None);
    }

    #[test]
    fn pages_follow_the_cursor_without_repeats() {
        let mut s = Snapshots::new(7);
        let t0 = UNIX_EPOCH + Duration::from_secs(1_000);
        for k in 0..5 {
            s.record("isbx", SIZE, None, t0 + Duration::from_millis(k));
        }
        let now = t0 + Duration::from_secs(60);
        let mut seen = Vec::new();
        let mut cursor = None;
        for _ in 0..10 {
            let (page, next) = s.list(&ListFilter::default(), cursor.as_ref(), 2, now);
            seen.extend(page.into_iter().map(|i| i.snapshot_id));
            let Some(next) = next else { break };
            let token = next.encode();
            cursor = Some(Cursor::decode(&token).expect("own token reads back"));
        }
        let unique: std::collections::BTreeSet<_> = seen.iter().collect();
        assert_eq!((seen.len(), unique.len()), (5, 5));
        assert_eq!(Cursor::decode("not a token"), None);
    }
}

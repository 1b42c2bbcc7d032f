//! Makes a fresh database what E2B's API expects, from the revision's own files: its
//! migrations (`packages/db/migrations`, applied with goose and `-table _migrations` as
//! `packages/db/Makefile` does; the API checks the version), its local-dev seed
//! (`packages/local-dev/seed-local-database.go`: a user, a team, the team's API key),
//! then, written by stampede: a public template `base` whose build records the host CPU
//! mock-node reports (E2B's CPU-compatibility filter compares the two), and the team's
//! concurrent-sandbox limit raised so that a burst is not refused by the tier.

use std::path::Path;

use super::build::{go, go_command, BuildError};
use super::database::{psql, StoreError};

/// Concurrent sandboxes the team may run: far above any shipped profile (an
/// assumption of the harness: the limit is not what the run measures).
pub const TEAM_CONCURRENT_LIMIT: u64 = 1_000_000;

/// Errors of provisioning.
#[derive(Debug, thiserror::Error)]
pub enum ProvisionError {
    /// A Go step failed.
    #[error(transparent)]
    Build(#[from] BuildError),
    /// A SQL step failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The revision lacks a file this step reads.
    #[error("{what}: {} not found at this revision", path.display())]
    Missing {
        /// The step.
        what: &'static str,
        /// The file.
        path: std::path::PathBuf,
    },
    /// The seed's team key cannot be read from the revision's files.
    #[error("cannot read the local-dev seed's team API key from {file} (its shape changed at this revision)")]
    SeedKey {
        /// The file read.
        file: String,
    },
}

/// Applies the revision's migrations to `pg`; returns how many migration files it has.
pub async fn migrate(tree: &Path, pg: &str, logs: &Path) -> Result<usize, ProvisionError> {
    let db = tree.join("packages/db");
    let migrations = db.join("migrations");
    if !migrations.is_dir() {
        return Err(ProvisionError::Missing {
            what: "migrations",
            path: migrations,
        });
    }
    let count = std::fs::read_dir(&migrations)
        .map(|d| {
            d.flatten()
                .filter(|e| {
                    e.path()
                        .extension()
                        .is_some_and(|x| x == "sql" || x == "go")
                })
                .count()
        })
        .unwrap_or(0);
    let gomod = std::fs::read_to_string(db.join("go.mod")).unwrap_or_default();
    // Newer revisions declare goose as a Go tool (`go tool goose`); older ones only
    // require the module.
    let mut args: Vec<&str> = if gomod.contains("pressly/goose/v3/cmd/goose") {
        vec!["tool", "goose"]
    } else {
        vec!["run", "github.com/pressly/goose/v3/cmd/goose"]
    };
    args.extend([
        "-table",
        "_migrations",
        "-dir",
        "migrations",
        "postgres",
        pg,
        "up",
    ]);
    go(
        &db,
        &args,
        &logs.join("migrate.log"),
        "goose up (E2B's migrations)",
    )
    .await?;
    Ok(count)
}

/// Runs the revision's local-dev seed against `pg` and returns the team API key it
/// created (read from the seed's own source and E2B's key prefix, never printed).
pub async fn seed(tree: &Path, pg: &str, logs: &Path) -> Result<String, ProvisionError> {
    let dir = tree.join("packages/local-dev");
    let file = dir.join("seed-local-database.go");
    if !file.is_file() {
        return Err(ProvisionError::Missing {
            what: "local-dev seed",
            path: file,
        });
    }
    let log = logs.join("seed.log");
    let out = go_command(&dir)
        .env("POSTGRES_CONNECTION_STRING", pg)
        .args(["run", "seed-local-database.go"])
        .output()
        .await
        .map_err(|source| BuildError::Io {
            what: "running go (the local-dev seed)".into(),
            source,
        })?;
    let _ = std::fs::write(&log, [out.stdout, out.stderr].concat());
    if !out.status.success() {
        return Err(BuildError::Tool {
            what: "the local-dev seed".into(),
            hint: None,
            log,
        }
        .into());
    }
    let text = std::fs::read_to_string(&file).unwrap_or_default();
    let value = quoted_const(&text, "teamTokenValue").ok_or_else(|| ProvisionError::SeedKey {
        file: file.display().to_string(),
    })?;
    let keys = tree.join("packages/shared/pkg/keys/constants.go");
    let prefix = std::fs::read_to_string(&keys)
        .ok()
        .and_then(|t| quoted_const(&t, "ApiKeyPrefix"))
        .ok_or_else(|| ProvisionError::SeedKey {
            file: keys.display().to_string(),
        })?;
    Ok(format!("{prefix}{value}"))
}

/// The string of a Go `NAME = "value"` declaration.
fn quoted_const(text: &str, name: &str) -> Option<String> {
    text.lines().find_map(|l| {
        let t = l.trim();
        let rest = t.strip_prefix(name)?.trim_start();
        let rest = rest.strip_prefix('=')?.trim_start().strip_prefix('"')?;
        Some(rest[..rest.find('"')?].to_string())
    })
}

/// Registers the public template `sandbox.template` for the seed's team, its build
/// giving the profile's vCPU and memory (E2B's create reads them from the build, not
/// the request) and recording the host CPU as mock-node reports it, and raises the
/// team's tier limit.
pub async fn template_and_limits(
    pg: &str,
    sandbox: &crate::profile::SandboxSpec,
    logs: &Path,
) -> Result<(), ProvisionError> {
    let template = sandbox.template.as_str();
    let log = logs.join("template.log");
    let cols = psql(
        pg,
        "select string_agg(column_name, ',') from information_schema.columns where table_name = 'env_builds'",
        &log,
    )
    .await?;
    let has = |c: &str| cols.split(',').any(|x| x == c);
    let cpu = mock_node::host_cpu();
    let q = |s: &str| s.replace('\'', "''");
    let mut build_cols = vec![
        "id",
        "env_id",
        "status",
        "vcpu",
        "ram_mb",
        "free_disk_size_mb",
        "kernel_version",
        "firecracker_version",
        "updated_at",
        "finished_at",
    ];
    let mut build_vals = vec![
        "gen_random_uuid()".to_string(),
        format!("'{}'", q(template)),
        "'uploaded'".into(),
        sandbox.vcpu.to_string(),
        sandbox.ram_mb.to_string(),
        // Free disk: an assumption (mock-node does not look at it).
        "512".into(),
        "'vmlinux-6.1.102'".into(),
        "'v1.12.1_d990331'".into(),
        "now()".into(),
        "now()".into(),
    ];
    // A template build as E2B's template manager leaves it: the API dereferences the
    // total disk size when it starts a sandbox (`create_instance.go`), so a build
    // without one crashes the create after placement (1 GiB: an assumption).
    for (c, v) in [
        ("total_disk_size_mb", "1024".to_string()),
        ("envd_version", "'0.2.4'".to_string()),
        ("cpu_architecture", format!("'{}'", q(&cpu.architecture))),
        ("cpu_family", format!("'{}'", q(&cpu.family))),
        ("cpu_model", format!("'{}'", q(&cpu.model))),
        ("cpu_model_name", format!("'{}'", q(&cpu.model_name))),
        ("team_id", "(select id from t)".into()),
    ] {
        if has(c) {
            build_cols.push(c);
            build_vals.push(v);
        }
    }
    let id_col = build_vals.remove(0);
    build_cols.remove(0);
    let tpl = q(template);
    let sql = format!(
        "with t as (select team_id as id from team_api_keys limit 1), \
         e as (insert into envs (id, public, team_id, updated_at) select '{tpl}', true, id, now() from t on conflict (id) do nothing returning id), \
         b as (insert into env_builds (id, {cols}) select {id_col}, {vals} from e returning id, env_id), \
         a as (insert into env_build_assignments (env_id, build_id, tag) select env_id, id, 'default' from b returning env_id) \
         insert into env_aliases (alias, env_id, is_renamable) select '{tpl}', env_id, false from a; \
         update tiers set concurrent_instances = {TEAM_CONCURRENT_LIMIT} \
         where id in (select tier from teams where id in (select team_id from team_api_keys));",
        cols = build_cols.join(", "),
        vals = build_vals.join(", "),
    );
    psql(pg, &sql, &log).await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_a_go_string_constant() {
        let text = "var (\n\tteamID = uuid.MustParse(\"x\")\n\tteamTokenValue = \"abc123\"\n)";
        assert_eq!(
            quoted_const(text, "teamTokenValue").as_deref(),
            Some("abc123")
        );
        assert_eq!(quoted_const(text, "missing"), None);
    }
}

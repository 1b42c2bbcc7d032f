//! PostgreSQL and Redis for one API run, on loopback, in the run folder: PostgreSQL
//! from Debian's server binaries (`initdb` into the folder, trust auth on 127.0.0.1),
//! Redis with persistence off. Or a user's own (`--postgres URL --redis URL`), which are
//! used as given and never stopped.

use std::path::{Path, PathBuf};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::process::Command;

use super::child::{ChildError, Procs};

/// How long PostgreSQL or Redis may take to accept connections (an assumption: both
/// take well under a second on an idle machine; a loaded CI host needs more).
const READY_DEADLINE: Duration = Duration::from_secs(60);

/// Errors of the data stores.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// PostgreSQL's server binaries cannot be found.
    #[error("no PostgreSQL server binaries (initdb, postgres) under {searched}: install Debian's `postgresql` or give --pg-bin DIR")]
    NoPostgres {
        /// Where they were looked for.
        searched: String,
    },
    /// `redis-server` cannot be found.
    #[error("no redis-server on PATH: install Debian's `redis-server` or give --redis URL")]
    NoRedis,
    /// A process failed to start.
    #[error(transparent)]
    Child(#[from] ChildError),
    /// A setup command failed.
    #[error("{what} failed ({status}); its output is in {}", log.display())]
    Command {
        /// What was run.
        what: String,
        /// Its exit status.
        status: String,
        /// Its output.
        log: PathBuf,
    },
    /// A setup command could not run.
    #[error("{what}")]
    Io {
        /// What was being done.
        what: String,
        /// Cause.
        #[source]
        source: std::io::Error,
    },
    /// A store did not become ready in time.
    #[error("{what} did not accept connections within {READY_DEADLINE:?}; its log is in {}", log.display())]
    NotReady {
        /// Which store.
        what: &'static str,
        /// Its log.
        log: PathBuf,
    },
}

/// Where the data stores are.
#[derive(Debug, Clone)]
pub struct Stores {
    /// PostgreSQL connection string (`postgresql://...`).
    pub postgres: String,
    /// Redis address as E2B's `REDIS_URL` takes it (`127.0.0.1:6379`).
    pub redis: String,
}

/// A free TCP port on 127.0.0.1 (bound, then released: the caller binds it next).
pub fn free_port() -> std::io::Result<u16> {
    let l = std::net::TcpListener::bind("127.0.0.1:0")?;
    Ok(l.local_addr()?.port())
}

/// The folder holding `initdb` and `postgres`: `pg_bin` if given, else the newest
/// `/usr/lib/postgresql/*/bin`, else the folder of `initdb` on PATH.
pub fn postgres_bin(pg_bin: Option<&Path>) -> Result<PathBuf, StoreError> {
    let ok = |d: &Path| d.join("initdb").is_file() && d.join("postgres").is_file();
    if let Some(d) = pg_bin {
        return if ok(d) {
            Ok(d.to_path_buf())
        } else {
            Err(StoreError::NoPostgres {
                searched: d.display().to_string(),
            })
        };
    }
    let mut versions: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let v = e.file_name().to_str()?.parse().ok()?;
            Some((v, e.path().join("bin")))
        })
        .filter(|(_, d)| ok(d))
        .collect();
    versions.sort();
    if let Some((_, d)) = versions.pop() {
        return Ok(d);
    }
    if let Some(d) =
        which("initdb").and_then(|p| p.canonicalize().ok()?.parent().map(Path::to_path_buf))
    {
        if ok(&d) {
            return Ok(d);
        }
    }
    Err(StoreError::NoPostgres {
        searched: "/usr/lib/postgresql/*/bin and PATH".into(),
    })
}

/// `name` on PATH.
pub fn which(name: &str) -> Option<PathBuf> {
    std::env::var_os("PATH")
        .iter()
        .flat_map(std::env::split_paths)
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

/// The user PostgreSQL runs as when the harness is root (initdb refuses root).
fn postgres_user() -> Option<(u32, u32)> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return None;
    }
    for name in ["postgres", "nobody"] {
        let cname = std::ffi::CString::new(name).expect("no NUL");
        // SAFETY: getpwnam reads the passwd database; the pointer is used at once,
        // before any other call that could reuse its static buffer.
        let pw = unsafe { libc::getpwnam(cname.as_ptr()) };
        if !pw.is_null() {
            // SAFETY: non-null, checked above.
            let (uid, gid) = unsafe { ((*pw).pw_uid, (*pw).pw_gid) };
            return Some((uid, gid));
        }
    }
    None
}

fn chown_tree(dir: &Path, uid: u32, gid: u32) -> std::io::Result<()> {
    std::os::unix::fs::chown(dir, Some(uid), Some(gid))?;
    for e in std::fs::read_dir(dir)? {
        let p = e?.path();
        if p.is_dir() {
            chown_tree(&p, uid, gid)?;
        } else {
            std::os::unix::fs::chown(&p, Some(uid), Some(gid))?;
        }
    }
    Ok(())
}

/// Starts PostgreSQL on a free loopback port (its logs in `dir`); returns its
/// connection string.
pub async fn start_postgres(
    procs: &mut Procs,
    dir: &Path,
    pg_bin: Option<&Path>,
) -> Result<String, StoreError> {
    let bin = postgres_bin(pg_bin)?;
    let io = |what: &str| {
        let what = what.to_string();
        move |source| StoreError::Io { what, source }
    };
    let user = postgres_user();
    // initdb refuses root: PostgreSQL then runs as its own user, in a folder of its own
    // under the system's temp folder (the run folder's parents, e.g. a home folder,
    // need not be open to it), registered with the run so that it is removed with it.
    let root = match user {
        None => dir.join("pg"),
        Some(_) => {
            static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
            let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            std::env::temp_dir().join(format!(
                "{}{}-{n}",
                super::child::PG_TEMP_PREFIX,
                std::process::id()
            ))
        }
    };
    let data = root.join("data");
    std::fs::create_dir_all(&root).map_err(io("creating the PostgreSQL folder"))?;
    if let Some((uid, gid)) = user {
        procs.own_dir(&root)?;
        chown_tree(&root, uid, gid).map_err(io("handing the PostgreSQL folder to its user"))?;
    }
    let log = dir.join("initdb.log");
    let mut initdb = Command::new(bin.join("initdb"));
    initdb
        .arg("-D")
        .arg(&data)
        .args(["-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-sync"]);
    as_user(&mut initdb, user);
    run_logged(initdb, &log, "initdb").await?;
    let port = free_port().map_err(io("finding a free port"))?;
    let log = dir.join("postgres.log");
    let out = std::fs::File::create(&log).map_err(io("creating postgres.log"))?;
    let err = out.try_clone().map_err(io("creating postgres.log"))?;
    if let Some((uid, gid)) = user {
        let _ = std::os::unix::fs::chown(&log, Some(uid), Some(gid));
    }
    let mut cmd = Command::new(bin.join("postgres"));
    cmd.arg("-D")
        .arg(&data)
        .args(["-p", &port.to_string(), "-k"])
        .arg(&root)
        .args(["-c", "listen_addresses=127.0.0.1"])
        .stdout(out)
        .stderr(err);
    as_user(&mut cmd, user);
    // SIGINT is PostgreSQL's fast shutdown.
    procs.spawn("postgres", cmd, libc::SIGINT, Duration::from_secs(10))?;
    wait_tcp(port, None, READY_DEADLINE)
        .await
        .then_some(())
        .ok_or(StoreError::NotReady {
            what: "PostgreSQL",
            log: log.clone(),
        })?;
    // Accepting TCP is not accepting queries: ask until it answers.
    let url = format!("postgresql://postgres@127.0.0.1:{port}/postgres?sslmode=disable");
    let deadline = tokio::time::Instant::now() + READY_DEADLINE;
    loop {
        if psql(&url, "select 1", &dir.join("pg-ready.log"))
            .await
            .is_ok()
        {
            return Ok(url);
        }
        if tokio::time::Instant::now() > deadline {
            return Err(StoreError::NotReady {
                what: "PostgreSQL",
                log,
            });
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

fn as_user(cmd: &mut Command, user: Option<(u32, u32)>) {
    if let Some((uid, gid)) = user {
        cmd.uid(uid).gid(gid);
    }
}

/// Starts Redis (no persistence) on a free loopback port; returns `127.0.0.1:PORT`.
pub async fn start_redis(procs: &mut Procs, dir: &Path) -> Result<String, StoreError> {
    let bin = which("redis-server").ok_or(StoreError::NoRedis)?;
    let io = |what: &str| {
        let what = what.to_string();
        move |source| StoreError::Io { what, source }
    };
    let port = free_port().map_err(io("finding a free port"))?;
    let root = dir.join("redis");
    std::fs::create_dir_all(&root).map_err(io("creating the Redis folder"))?;
    let log = root.join("redis.log");
    let out = std::fs::File::create(&log).map_err(io("creating redis.log"))?;
    let mut cmd = Command::new(bin);
    cmd.args([
        "--bind",
        "127.0.0.1",
        "--port",
        &port.to_string(),
        "--save",
        "",
        "--appendonly",
        "no",
        "--protected-mode",
        "yes",
        "--dir",
    ])
    .arg(&root)
    .stdout(out.try_clone().map_err(io("creating redis.log"))?)
    .stderr(out);
    procs.spawn("redis", cmd, libc::SIGTERM, Duration::from_secs(5))?;
    if !wait_tcp(port, Some((b"PING\r\n", b"+PONG")), READY_DEADLINE).await {
        return Err(StoreError::NotReady { what: "Redis", log });
    }
    Ok(format!("127.0.0.1:{port}"))
}

/// Waits until 127.0.0.1:`port` accepts (and, with `probe`, answers the probe with the
/// expected prefix); false past `deadline`.
pub async fn wait_tcp(port: u16, probe: Option<(&[u8], &[u8])>, deadline: Duration) -> bool {
    let end = tokio::time::Instant::now() + deadline;
    while tokio::time::Instant::now() < end {
        let attempt = async {
            let mut s = tokio::net::TcpStream::connect(("127.0.0.1", port))
                .await
                .ok()?;
            if let Some((ask, want)) = probe {
                s.write_all(ask).await.ok()?;
                let mut buf = vec![0u8; want.len()];
                s.read_exact(&mut buf).await.ok()?;
                return (buf == want).then_some(());
            }
            Some(())
        };
        if let Ok(Some(())) = tokio::time::timeout(Duration::from_secs(2), attempt).await {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    false
}

/// Runs one SQL text with `psql` (stop on the first error); its output goes to `log`.
pub async fn psql(url: &str, sql: &str, log: &Path) -> Result<String, StoreError> {
    let psql = which("psql").ok_or(StoreError::NoPostgres {
        searched: "PATH (psql)".into(),
    })?;
    let mut cmd = Command::new(psql);
    cmd.args([
        "-X",
        "-q",
        "-A",
        "-t",
        "-v",
        "ON_ERROR_STOP=1",
        "-d",
        url,
        "-c",
        sql,
    ]);
    let out = run_captured(cmd, "psql").await?;
    let _ = std::fs::write(log, [out.stdout.as_slice(), out.stderr.as_slice()].concat());
    if !out.status.success() {
        return Err(StoreError::Command {
            what: "psql".into(),
            status: out.status.to_string(),
            log: log.to_path_buf(),
        });
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

async fn run_captured(mut cmd: Command, what: &str) -> Result<std::process::Output, StoreError> {
    cmd.stdin(std::process::Stdio::null()).kill_on_drop(true);
    cmd.output().await.map_err(|source| StoreError::Io {
        what: format!("running {what}"),
        source,
    })
}

/// Runs `cmd` to completion with its output in `log`; an error names `what` and `log`.
pub async fn run_logged(cmd: Command, log: &Path, what: &str) -> Result<(), StoreError> {
    let out = run_captured(cmd, what).await?;
    let _ = std::fs::write(log, [out.stdout.as_slice(), out.stderr.as_slice()].concat());
    if out.status.success() {
        Ok(())
    } else {
        Err(StoreError::Command {
            what: what.to_string(),
            status: out.status.to_string(),
            log: log.to_path_buf(),
        })
    }
}

//! `report.json` and the report directory `reports/<profile>-<UTC time>/`.

use std::fs;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use super::html::write_html;
use super::junit::write_junit;
use super::markdown::write_markdown;
use super::model::Report;

/// Write `report` as pretty-printed JSON (stable field order) with a final newline.
pub fn write_json(report: &Report, mut w: impl Write) -> io::Result<()> {
    serde_json::to_writer_pretty(&mut w, report).map_err(io::Error::other)?;
    writeln!(w)
}

/// Largest `report.json` read (by `trend`, `compare`): a report carries figures, not
/// raw samples, so the ones written here are kilobytes; 64 MiB leaves three orders of
/// magnitude of room and keeps a hostile file from taking the memory of a CI runner.
pub const MAX_REPORT_BYTES: u64 = 64 << 20;

/// Read a `report.json`, refusing one over [`MAX_REPORT_BYTES`] and a schema version
/// this build does not know.
pub fn read_json(path: &Path) -> Result<Report, ReadReportError> {
    use std::io::Read as _;
    let read_err = |source| ReadReportError::Read {
        path: path.to_path_buf(),
        source,
    };
    let file = mock_node::open_regular(path, "a report").map_err(read_err)?;
    let mut text = String::new();
    file.take(MAX_REPORT_BYTES + 1)
        .read_to_string(&mut text)
        .map_err(read_err)?;
    if text.len() as u64 > MAX_REPORT_BYTES {
        return Err(ReadReportError::TooLarge {
            path: path.to_path_buf(),
        });
    }
    let report: Report = serde_json::from_str(&text).map_err(|source| ReadReportError::Parse {
        path: path.to_path_buf(),
        source,
    })?;
    if report.schema_version != super::model::SCHEMA_VERSION {
        return Err(ReadReportError::Version {
            path: path.to_path_buf(),
            found: report.schema_version,
        });
    }
    Ok(report)
}

/// Why a `report.json` could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ReadReportError {
    /// The file could not be read.
    #[error("{}: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        source: io::Error,
    },
    /// The file is not a report.
    #[error("{}:{}:{}: not a stampede report: {source}", path.display(), source.line(), source.column())]
    Parse {
        /// The file.
        path: PathBuf,
        /// The JSON error.
        source: serde_json::Error,
    },
    /// The file is larger than any report ([`MAX_REPORT_BYTES`]).
    #[error("{}: larger than {} MiB, not a stampede report", path.display(), MAX_REPORT_BYTES >> 20)]
    TooLarge {
        /// The file.
        path: PathBuf,
    },
    /// A report of another layout version.
    #[error("{}: report schema_version {found}, this stampede reads {}", path.display(), super::model::SCHEMA_VERSION)]
    Version {
        /// The file.
        path: PathBuf,
        /// The version found.
        found: u32,
    },
}

/// The current UTC time in RFC 3339 with whole seconds (`2026-11-30T02:12:50Z`), for
/// [`Report::started_at`].
pub fn now_rfc3339() -> String {
    humantime::format_rfc3339_seconds(SystemTime::now()).to_string()
}

/// `yyyymmddThhmmssZ` of an RFC 3339 UTC time (`2026-11-30T02:12:50Z` ->
/// `20261130T021250Z`); `None` when `rfc3339` is not such a time.
pub fn compact_utc(rfc3339: &str) -> Option<String> {
    let t = humantime::parse_rfc3339_weak(rfc3339.trim_end_matches('Z')).ok()?;
    let s = humantime::format_rfc3339_seconds(t).to_string();
    Some(s.replace(['-', ':'], ""))
}

/// Checks, before a run, that a report can be written under `parent`: it is (or can be
/// created as) a directory in which a file can be created. The probe file is removed.
pub fn check_report_parent(parent: &Path) -> io::Result<()> {
    let at = |e: io::Error| io::Error::new(e.kind(), format!("{}: {e}", parent.display()));
    if parent.exists() && !parent.is_dir() {
        return Err(at(io::Error::new(
            io::ErrorKind::AlreadyExists,
            "the report directory is a file, not a directory",
        )));
    }
    fs::create_dir_all(parent).map_err(at)?;
    let probe = parent.join(format!(".stampede-write-probe-{}", std::process::id()));
    fs::File::create(&probe).map_err(at)?;
    fs::remove_file(&probe).map_err(at)
}

/// Write `report.json`, `report.md`, `report.html` and `junit.xml` into a new directory
/// `<parent>/<profile>-<UTC yyyymmddThhmmssZ>/` and return it. The time is the run's
/// `started_at`, except for a simulation (whose `started_at` may be a fixed value
/// for reproducibility), which uses the current time; a `-2`, `-3`... suffix is
/// added when the directory exists already.
pub fn write_report_dir(report: &Report, parent: &Path) -> io::Result<PathBuf> {
    let started = (!report.simulated)
        .then(|| compact_utc(&report.started_at))
        .flatten();
    let stamp = started
        .or_else(|| compact_utc(&now_rfc3339()))
        .unwrap_or_else(|| "unknown-time".into());
    let name: String = report
        .profile
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "._-".contains(c) {
                c
            } else {
                '_'
            }
        })
        .collect();
    let base = parent.join(format!("{name}-{stamp}"));
    // The errors name the directory: "File exists (os error 17)" alone does not say
    // that the report directory given is a file.
    fn at(path: &Path) -> impl Fn(io::Error) -> io::Error + '_ {
        move |e| io::Error::new(e.kind(), format!("{}: {e}", path.display()))
    }
    if parent.exists() && !parent.is_dir() {
        return Err(io::Error::new(
            io::ErrorKind::AlreadyExists,
            format!(
                "{}: the report directory is a file, not a directory",
                parent.display()
            ),
        ));
    }
    fs::create_dir_all(parent).map_err(at(parent))?;
    let mut dir = base.clone();
    let mut n = 1;
    loop {
        match fs::create_dir(&dir) {
            Ok(()) => break,
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists && n < 1000 => {
                n += 1;
                dir = PathBuf::from(format!("{}-{n}", base.display()));
            }
            Err(e) => return Err(at(&dir)(e)),
        }
    }
    let written = write_file(&dir.join("report.json"), |w| write_json(report, w))
        .and_then(|()| write_file(&dir.join("report.md"), |w| write_markdown(report, w)))
        .and_then(|()| write_file(&dir.join("report.html"), |w| write_html(report, w)))
        .and_then(|()| write_file(&dir.join("junit.xml"), |w| write_junit(report, w)));
    if let Err(e) = written {
        // A directory with part of a report would pass for a report: remove it whole
        // (it was created above, so everything in it is this report's).
        let _ = fs::remove_dir_all(&dir);
        return Err(e);
    }
    Ok(dir)
}

/// Writes `path` atomically: into a temporary name in the same directory, flushed to
/// disk, then renamed over `path`. On failure the temporary file is removed, so no
/// partial `path` is ever seen, and the error names `path`.
fn write_file(
    path: &Path,
    f: impl FnOnce(&mut io::BufWriter<fs::File>) -> io::Result<()>,
) -> io::Result<()> {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp = path.with_file_name(format!(".{name}.tmp-{}", std::process::id()));
    let result = (|| {
        let mut w = io::BufWriter::new(fs::File::create(&tmp)?);
        f(&mut w)?;
        let file = w.into_inner().map_err(io::IntoInnerError::into_error)?;
        file.sync_all()?;
        fs::rename(&tmp, path)
    })();
    result.map_err(|e| {
        let _ = fs::remove_file(&tmp);
        io::Error::new(
            e.kind(),
            format!("cannot write the report at {}: {e}", path.display()),
        )
    })
}

#[cfg(test)]
mod size_cap_tests {
    use super::*;

    /// `trend` read a 200 MB report into 596 MB: a file over the cap is refused before
    /// it is parsed, with an error naming it.
    #[test]
    fn a_report_larger_than_the_cap_is_refused_with_a_clear_error() {
        let path = std::env::temp_dir().join(format!("stampede-big-report-{}", std::process::id()));
        let f = std::fs::File::create(&path).expect("create");
        f.set_len(MAX_REPORT_BYTES + 1).expect("sparse file");
        let e = read_json(&path).expect_err("refused");
        assert!(matches!(e, ReadReportError::TooLarge { .. }), "{e}");
        assert!(e.to_string().contains("larger than 64 MiB"), "{e}");
        let _ = std::fs::remove_file(&path);
    }
}

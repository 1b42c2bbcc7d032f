//! `stampede run` when its surroundings fail, with the real binaries as processes: a
//! closed stdout, a report that cannot be written, a profile that is a FIFO, staging
//! folders of killed runs, a fault that cannot be healed, and the sandboxes of a run
//! killed mid-burst (found and deleted by `stampede cleanup`).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::support::staging as staging_support;
use staging_support::*;

/// A small embedded run that passes its checks: a second of 20 creates/s on three nodes.
fn tiny_profile(dir: &Path) -> PathBuf {
    let p = dir.join("tiny.yaml");
    std::fs::write(
        &p,
        "name: tiny\nseed: 1\ncluster:\n  nodes: 3\n  node:\n    cpu_count: 16\n    \
         create_latency: {dist: constant, value: 1ms}\nplacement:\n  embedded:\n    \
         accounting: [optimistic]\n    sync_interval: 1s\nworkload:\n  shape:\n    \
         rate: {per_second: 20, duration: 1s}\n  sandbox: {template: base, vcpu: 1, ram_mb: 256, timeout: 300s}\n\
         report:\n  goose_html: false\nchecks:\n  error_rate: {max: 0.5}\n",
    )
    .expect("profile written");
    p
}

/// Waits for `child` to exit within `within`, killing it (and failing) otherwise.
fn exit_within(child: &mut std::process::Child, within: Duration) -> std::process::ExitStatus {
    let deadline = Instant::now() + within;
    loop {
        if let Some(s) = child.try_wait().expect("try_wait") {
            return s;
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("no exit within {within:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn read_all(r: Option<impl std::io::Read>) -> String {
    let mut s = String::new();
    if let Some(mut r) = r {
        let _ = r.read_to_string(&mut s);
    }
    s
}

/// Every file under `dir`, recursively.
fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(files_under(&p));
        } else {
            out.push(p);
        }
    }
    out
}

/// `stampede run | head -1` exited 2 ("writing the report: Broken pipe") after writing
/// its report, and goose's print panicked on a worker thread. A closed stdout now costs
/// the summary only: the run writes its report and exits with its verdict.
#[test]
fn a_closed_stdout_keeps_the_report_and_the_verdict() {
    let dir = tempdir("closed-stdout");
    let profile = tiny_profile(&dir);
    let reports = dir.join("reports");
    let mut child = stampede()
        .args(["run", "--report-dir"])
        .arg(&reports)
        .arg(&profile)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("stampede run starts");
    // The reader goes away before anything is written: every write gets EPIPE.
    drop(child.stdout.take());
    let stderr = child.stderr.take();
    let reader = std::thread::spawn(move || read_all(stderr));
    let status = exit_within(&mut child, Duration::from_secs(120));
    let stderr = reader.join().expect("stderr reader");
    assert_eq!(status.code(), Some(0), "{status:?}\n{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert_eq!(report_dirs(&reports).len(), 1, "the report was written");
    let _ = std::fs::remove_dir_all(&dir);
}

/// On a full disk a truncated `report.json` was left behind for a glob to pick up. A
/// write that fails (here: the file size limit, `RLIMIT_FSIZE`, below the report's
/// size) leaves no report file at all and names the path it could not write.
#[cfg(target_os = "linux")]
#[test]
fn a_report_that_cannot_be_written_leaves_no_partial_file() {
    use std::os::unix::process::CommandExt;
    let dir = tempdir("report-fsize");
    let profile = tiny_profile(&dir);
    let reports = dir.join("reports");
    let mut cmd = stampede();
    cmd.args(["run", "--quiet", "--report-dir"])
        .arg(&reports)
        .arg(&profile)
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    // SAFETY: only async-signal-safe calls between fork and exec.
    unsafe {
        cmd.pre_exec(|| {
            // Writes past 2 KiB fail with EFBIG instead of killing the process.
            libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
            let lim = libc::rlimit {
                rlim_cur: 2048,
                rlim_max: 2048,
            };
            if libc::setrlimit(libc::RLIMIT_FSIZE, &lim) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let mut child = cmd.spawn().expect("stampede run starts");
    let stderr = child.stderr.take();
    let reader = std::thread::spawn(move || read_all(stderr));
    let status = exit_within(&mut child, Duration::from_secs(120));
    let stderr = reader.join().expect("stderr reader");
    assert_eq!(status.code(), Some(2), "{status:?}\n{stderr}");
    assert!(
        stderr.contains("cannot write the report at") && stderr.contains("report.json"),
        "{stderr}"
    );
    let left = files_under(&reports);
    assert!(left.is_empty(), "files left behind: {left:?}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A profile that is a FIFO blocked `run` forever in `open` (and a SIGTERM then printed
/// that it was writing a partial report and never exited). It is refused at once.
#[cfg(unix)]
#[test]
fn a_profile_that_is_a_fifo_is_refused_without_blocking() {
    let dir = tempdir("fifo-profile");
    let fifo = dir.join("profile.yaml");
    let made = Command::new("mkfifo").arg(&fifo).status().expect("mkfifo");
    assert!(made.success());
    for verb in [&["run", "--quiet"][..], &["validate"][..]] {
        let mut child = stampede()
            .args(verb)
            .arg(&fifo)
            .current_dir(&dir)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("stampede starts");
        let stderr = child.stderr.take();
        let reader = std::thread::spawn(move || read_all(stderr));
        let status = exit_within(&mut child, Duration::from_secs(20));
        let stderr = reader.join().expect("stderr reader");
        assert!(!status.success(), "{verb:?}: {status:?}");
        assert!(
            stderr.contains("not a regular file (a FIFO)"),
            "{verb:?}: {stderr}"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// SIGKILLed runs left `.goose-<pid>/` folders that later runs never removed. A run
/// removes those whose process is gone, and only those.
#[test]
fn stale_goose_staging_of_dead_runs_is_removed() {
    let dir = tempdir("stale-goose");
    let profile = tiny_profile(&dir);
    let reports = dir.join("reports");
    std::fs::create_dir_all(&reports).unwrap();
    // A pid that is surely gone: a child that has exited and been reaped.
    let mut gone = Command::new("true").spawn().expect("true runs");
    let dead_pid = gone.id();
    gone.wait().expect("reaped");
    let dead = reports.join(format!(".goose-{dead_pid}"));
    std::fs::create_dir_all(&dead).unwrap();
    std::fs::write(dead.join("goose-x.html"), "x").unwrap();
    // This test's own process is alive: its folder is not stale.
    let alive = reports.join(format!(".goose-{}", std::process::id()));
    std::fs::create_dir_all(&alive).unwrap();
    let out = stampede()
        .args(["run", "--quiet", "--report-dir"])
        .arg(&reports)
        .arg(&profile)
        .output()
        .expect("stampede runs");
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!dead.exists(), "a dead run's staging is removed");
    assert!(alive.exists(), "a live process's staging is kept");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A `kill` fault whose node cannot take its port back (taken by another process while
/// the node was down) was marked healed: the run passed while the node stayed dead. The
/// run now reports the fault it could not heal and exits 2 (the harness failed).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fault_that_cannot_be_healed_fails_the_run_naming_it() {
    let dir = tempdir("unhealed");
    let c = start_cluster(&dir, &roomy_nodes("{dist: constant, value: 1ms}"), &[]);
    let p = dir.join("kill.yaml");
    std::fs::write(
        &p,
        format!(
            "name: unhealed\nseed: 3\nplacement:\n  external:\n    url: {}\n    mock_admin: [\"{}\"]\n\
             workload:\n  shape:\n    rate: {{per_second: 10, duration: 4s}}\n  \
             sandbox: {{template: base, vcpu: 1, ram_mb: 256, timeout: 300s}}\n\
             collect:\n  interval: 250ms\nreport:\n  goose_html: false\n\
             chaos:\n  - at: 200ms\n    fault: kill\n    nodes: [node-00]\n",
            c.api, c.admin
        ),
    )
    .unwrap();
    let reports = dir.join("reports");
    let mut run = start_run(&[], &p, &reports);
    let http = reqwest::Client::new();
    // Once node-00 is killed, another process takes its port.
    let deadline = Instant::now() + Duration::from_secs(60);
    let addr = loop {
        let nodes: Value = http
            .get(format!("{}/nodes", c.admin))
            .send()
            .await
            .expect("GET /nodes")
            .json()
            .await
            .expect("JSON");
        let n0 = &nodes["nodes"][0];
        if n0["status"] == "killed" {
            break n0["grpc_addr"].as_str().expect("grpc_addr").to_string();
        }
        assert!(run.proc.0.try_wait().unwrap().is_none(), "run ended early");
        assert!(Instant::now() < deadline, "node-00 never killed");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    // The status turns `killed` as the listener starts closing: listen once it is closed.
    // A listening socket keeps the node from binding its port back (it binds with
    // SO_REUSEADDR, which a listener still refuses). The squatter sets SO_REUSEADDR too:
    // connections the killed node closed first sit in TIME_WAIT on that port for a
    // minute, and a bind without it fails until they end. It accepts and closes every
    // connection at once, so the service's calls to the port fail at once rather than
    // wait in a backlog until the requests' 70 s deadline.
    let deadline = Instant::now() + Duration::from_secs(10);
    let addr: std::net::SocketAddr = addr.parse().expect("grpc_addr is an address");
    let listener = loop {
        let socket = tokio::net::TcpSocket::new_v4().expect("socket");
        socket.set_reuseaddr(true).expect("SO_REUSEADDR");
        match socket.bind(addr).and_then(|()| socket.listen(64)) {
            Ok(listener) => break listener,
            Err(e) => assert!(Instant::now() < deadline, "port {addr} never freed: {e}"),
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    let squatter = tokio::spawn(async move {
        loop {
            if let Ok((conn, _)) = listener.accept().await {
                drop(conn);
            }
        }
    });
    let status = wait_exit(&mut run, Duration::from_secs(120)).await;
    let stderr = run.stderr.lock().unwrap().clone();
    assert_eq!(status.code(), Some(2), "{status:?}\n{stderr}");
    assert!(
        stderr.contains("could not heal fault") && stderr.contains("kill on node-00"),
        "{stderr}"
    );
    let report = new_report(&reports, &[]);
    assert_eq!(report["incomplete"], true);
    // The fleet still says so: the fault is in force and node-00 is down.
    let faults: Value = http
        .get(format!("{}/faults", c.admin))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let kill = faults["faults"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["kind"] == "kill")
        .cloned()
        .expect("the kill is listed");
    assert_eq!(kill["active"], true, "{kill}");
    // The port is free again once the squatter's task, and its listener, are gone.
    squatter.abort();
    assert!(squatter.await.is_err_and(|e| e.is_cancelled()));
    // mock-node retries the heal by itself once the port is free.
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let faults: Value = http
            .get(format!("{}/faults", c.admin))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        if faults["faults"]
            .as_array()
            .unwrap()
            .iter()
            .all(|f| f["active"] == false)
        {
            break;
        }
        assert!(Instant::now() < deadline, "the heal was not retried");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// The tag line a run prints first: `run tag: stampede-run=<tag> ...`.
fn run_tag(stderr: &str) -> Option<String> {
    stderr.lines().find_map(|l| {
        l.strip_prefix("run tag: stampede-run=")
            .and_then(|r| r.split_whitespace().next())
            .map(str::to_string)
    })
}

/// Sandboxes the API lists with `stampede-run=<tag>`.
async fn listed_by_tag(api: &str, tag: &str) -> usize {
    let listed: Value = reqwest::Client::new()
        .get(format!("{api}/sandboxes?metadata=stampede-run%3D{tag}"))
        .header("X-API-Key", KEY)
        .send()
        .await
        .expect("GET /sandboxes")
        .json()
        .await
        .expect("JSON");
    listed.as_array().map_or(0, Vec::len)
}

fn cleanup(api: &str, args: &[&str]) -> (Option<i32>, String, String) {
    let out = stampede()
        .args(["cleanup", "--api", api])
        .args(args)
        .env("STAMPEDE_API_KEY", KEY)
        .output()
        .expect("stampede cleanup runs");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// A run SIGKILLed mid-burst left every sandbox it placed, tagged but found by nothing.
/// The run prints its tag first; a later run warns of the leftovers; `stampede cleanup`
/// lists them with `--dry-run` and deletes them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cleanup_removes_what_a_killed_run_left() {
    let dir = tempdir("killed-leftovers");
    // Creates end over 3 s: the kill lands while most are in flight.
    let c = start_cluster(
        &dir,
        &roomy_nodes("{dist: uniform, min: 10ms, max: 3s}"),
        &[],
    );
    let reports = dir.join("reports");
    let profile = burst_profile(&dir, &c, 200);
    let mut run = start_run(&[], &profile, &reports);
    wait_for_line(&mut run, "run tag: ", Duration::from_secs(60)).await;
    let tag = run_tag(&run.stderr.lock().unwrap()).expect("the tag is printed");
    // Killed once the API has answered some creates (and so lists them).
    let deadline = Instant::now() + Duration::from_secs(120);
    while listed_by_tag(&c.api, &tag).await == 0 {
        assert!(Instant::now() < deadline, "no sandbox created within 120 s");
        assert!(run.proc.0.try_wait().unwrap().is_none(), "run ended early");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    run.proc.0.kill().expect("SIGKILL");
    let _ = run.proc.0.wait();
    // Creates in flight at the kill may still land: wait for the count to settle.
    let mut left = on_nodes(&c.admin).await;
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        tokio::time::sleep(Duration::from_millis(300)).await;
        let now = on_nodes(&c.admin).await;
        if now == left {
            break;
        }
        left = now;
        assert!(Instant::now() < deadline, "the count never settled");
    }
    assert!(left > 0);

    // A later run sees them. The API lists those it recorded; a create cut off with its
    // client may have landed on a node unrecorded (an orphan, for the service's sync).
    let small = burst_profile(&dir, &c, 5);
    let (status, _report, stderr) = run_to_end(&[], &small, &reports).await;
    assert_eq!(status.code(), Some(0), "{stderr}");
    let warning = stderr
        .lines()
        .find(|l| l.contains("sandboxes of earlier stampede runs are still running"))
        .unwrap_or_else(|| panic!("no leftovers warning: {stderr}"));
    assert!(warning.contains(&tag), "{warning}");
    let listed: u64 = warning
        .strip_prefix("warning: ")
        .and_then(|w| w.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .expect("a count in the warning");
    assert!(
        listed > 0 && listed <= left,
        "{listed} listed, {left} on nodes"
    );

    let (code, out, err) = cleanup(&c.api, &["--tag", &tag, "--dry-run"]);
    assert_eq!(code, Some(0), "{out}{err}");
    assert_eq!(
        out.lines()
            .filter(|l| l.starts_with("would delete "))
            .count() as u64,
        listed,
        "{out}"
    );
    assert!(
        on_nodes(&c.admin).await >= listed,
        "a dry run deletes nothing"
    );

    let (code, out, err) = cleanup(&c.api, &["--tag", &tag]);
    assert_eq!(code, Some(0), "{out}{err}");
    assert!(
        out.contains(&format!("deleted {listed} of {listed} sandboxes")),
        "{out}"
    );
    // The API lists none of the run's sandboxes any more, nor any stampede run's.
    let (code, out, _) = cleanup(&c.api, &["--tag", &tag, "--dry-run"]);
    assert_eq!(code, Some(0));
    assert!(out.contains("dry run: 0 sandboxes"), "{out}");
    let (code, out, _) = cleanup(&c.api, &["--older-than", "0s", "--dry-run"]);
    assert_eq!(code, Some(0));
    assert!(out.contains("dry run: 0 sandboxes"), "{out}");
    let _ = std::fs::remove_dir_all(&dir);
}

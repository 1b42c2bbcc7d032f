//! mock-node's `ServiceInfo` under h2load (nghttp2's HTTP/2 load generator, a separate
//! process: `-c 8 -m 16 -t 1`) against the bare tonic server answering the mock node's
//! own first reply, the same bytes on the wire. The servers run on this process's
//! server runtime (one worker); their CPU is read as in [`crate::load::server_cpu`].
//!
//! A Create is not measured this way: h2load sends one body again and again, and a
//! mock node answers a repeated sandbox id ALREADY_EXISTS, so the reply bytes could not
//! be the same; the `grpc` part measures Create with unique ids.

use std::io::Write;
use std::net::SocketAddr;
use std::process::Command;

use prost::Message;
use stampede_proto::info_service_client::InfoServiceClient;
use tokio::runtime::Runtime;

use crate::load::{runtime, server_cpu, SERVER_THREADS};
use crate::table::{Row, Table};

/// h2load's connections and streams per connection.
const CONNECTIONS: usize = 8;
const STREAMS: usize = 16;

/// One h2load round's outcome.
struct Round {
    per_second: f64,
    per_cpu_second: f64,
    failed: usize,
}

/// The encoded size of the server's ServiceInfo reply (one call, outside the round).
fn reply_len(server: &Runtime, addr: SocketAddr) -> usize {
    server.block_on(async {
        let mut c = InfoServiceClient::connect(format!("http://{addr}"))
            .await
            .expect("connect");
        c.service_info(())
            .await
            .expect("info")
            .into_inner()
            .encoded_len()
    })
}

/// Runs h2load against `addr`; `None` when h2load is not installed.
fn h2load(addr: SocketAddr, n: usize, body: &std::path::Path) -> Option<(f64, usize)> {
    let out = Command::new("h2load")
        .args(["-n", &n.to_string()])
        .args(["-c", &CONNECTIONS.to_string()])
        .args(["-m", &STREAMS.to_string()])
        .args(["-t", "1"])
        .args(["-H", "content-type: application/grpc"])
        .args(["-H", "te: trailers"])
        .arg("-d")
        .arg(body)
        .arg(format!("http://{addr}/InfoService/ServiceInfo"))
        .output()
        .ok()?;
    let text = String::from_utf8_lossy(&out.stdout);
    // "finished in 1.23s, 81234.56 req/s, 1.2MB/s"
    let rate = text
        .lines()
        .find(|l| l.starts_with("finished in"))
        .and_then(|l| l.split(", ").nth(1))
        .and_then(|r| r.strip_suffix(" req/s"))
        .and_then(|r| r.parse::<f64>().ok())
        .unwrap_or(f64::NAN);
    // "requests: N total, N started, N done, N succeeded, F failed, ..."
    let succeeded = text
        .lines()
        .find(|l| l.starts_with("requests:"))
        .and_then(|l| l.split(", ").find(|p| p.ends_with(" succeeded")))
        .and_then(|p| p.split_whitespace().next())
        .and_then(|v| v.parse::<usize>().ok())
        .unwrap_or(0);
    Some((rate, n - succeeded.min(n)))
}

/// `rounds` alternations of bare and mock under h2load; one rate row and one server-CPU
/// row. Prints a note instead when h2load is missing.
pub fn run(n: usize, rounds: usize, table: &mut Table) {
    if Command::new("h2load").arg("--version").output().is_err() {
        eprintln!("h2load is not installed (Debian: nghttp2-client): part skipped");
        return;
    }
    let server = runtime(SERVER_THREADS, 1);
    // An empty protobuf message (google.protobuf.Empty) in one gRPC frame.
    let body = std::env::temp_dir().join(format!("stampede-bench-empty-{}", std::process::id()));
    std::fs::File::create(&body)
        .and_then(|mut f| f.write_all(&[0, 0, 0, 0, 0]))
        .expect("h2load body file");
    let what = "mock-node ServiceInfo under h2load -c 8 -m 16";
    let mut sizes = (0, 0);
    let mut rate = Row::new(what, "", "req/s");
    let mut cpu = Row::new(&format!("{what}, server CPU"), "", "req/CPU-s");
    for _ in 0..rounds {
        for bare in [true, false] {
            let (addr, fleet) = crate::grpc::start(&server, bare);
            let len = reply_len(&server, addr);
            let before = server_cpu();
            let got = h2load(addr, n, &body);
            let used = server_cpu().saturating_sub(before).as_secs_f64();
            if let Some(f) = fleet {
                server.block_on(f.shutdown());
            }
            let Some((per_second, failed)) = got else {
                continue;
            };
            let r = Round {
                per_second,
                per_cpu_second: (n - failed.min(n)) as f64 / used,
                failed,
            };
            let (rates, cpus) = if bare {
                sizes.0 = len;
                (&mut rate.base, &mut cpu.base)
            } else {
                sizes.1 = len;
                (&mut rate.subject, &mut cpu.subject)
            };
            rates.push(r.per_second);
            cpus.push(r.per_cpu_second);
            rate.errors += r.failed;
        }
    }
    let _ = std::fs::remove_file(&body);
    let baseline = format!(
        "bare tonic, the mock's reply ({} B; mock {} B)",
        sizes.0, sizes.1
    );
    rate.baseline.clone_from(&baseline);
    cpu.baseline = baseline;
    cpu.errors = rate.errors;
    table.push(rate);
    table.push(cpu);
}

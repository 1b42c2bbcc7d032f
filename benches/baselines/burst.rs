//! `profiles/burst-500.yaml` run end to end (every accounting mode), `bursts` times:
//! the spread of the creates' arrival at the service against the client's send spread.

use std::collections::BTreeMap;
use std::path::PathBuf;

use stampede::run::{run_profile, RunOptions};

use crate::load::runtime;
use crate::table::{Row, Table};

/// Runs the burst profile `bursts` times and adds one row per mode and one overall.
pub fn run(bursts: usize, table: &mut Table) {
    let profile = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("profiles/burst-500.yaml");
    let dir = std::env::temp_dir().join(format!("stampede-bench-burst-{}", std::process::id()));
    // As `stampede run` does: one runtime with a worker per core.
    let rt = runtime("bench-burst", 2);
    let mut per_mode: BTreeMap<String, (Vec<f64>, Vec<f64>)> = BTreeMap::new();
    for b in 0..bursts {
        let opts = RunOptions {
            report_dir: Some(dir.join(b.to_string())),
            quiet: true,
            ..RunOptions::default()
        };
        let out = rt
            .block_on(run_profile(&profile, opts))
            .expect("burst-500 runs");
        for r in &out.report.runs {
            let (client, server) = per_mode.entry(r.label.clone()).or_default();
            client.push(r.send.burst_spread_ms.unwrap_or(f64::NAN));
            server.push(r.send.server_arrival_spread_ms.unwrap_or(f64::NAN));
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    let mut all = (Vec::new(), Vec::new());
    for (mode, (client, server)) in per_mode {
        all.0.extend(&client);
        all.1.extend(&server);
        table.push(Row {
            what: format!("burst-500 arrival spread at the service ({mode})"),
            baseline: "client send spread".to_string(),
            unit: "ms",
            base: client,
            subject: server,
            errors: 0,
        });
    }
    table.push(Row {
        what: "burst-500 arrival spread at the service (all modes)".to_string(),
        baseline: "client send spread".to_string(),
        unit: "ms",
        base: all.0,
        subject: all.1,
        errors: 0,
    });
}

#!/usr/bin/env bash
# Ten-minute soak of an external `stampede run` at 50 creates/s (10 s lifetimes) against
# `mock-node --nodes 10` and `stampede serve`, each a process of its own. Prints the
# VmRSS of the three every 30 s (`t_s run_mb serve_mb mock_mb`), then the run's growth
# in MB/min after a 2-minute warm-up (a least-squares slope over the later samples taken
# while the workload sends).
# Needs release builds: cargo build --release --workspace --bin stampede --bin mock-node.
# Run it niced: nice -n 10 scripts/soak-rss.sh [SECONDS]
set -euo pipefail
secs=${1:-600}
# shellcheck source=scripts/lib/stack.sh
. "$(dirname "$0")/lib/stack.sh"
cat >"$tmp/soak.yaml" <<YAML
name: soak
seed: 1
placement:
  external:
    url: http://127.0.0.1:$port
workload:
  shape:
    rate: {per_second: 50, duration: ${secs}s}
  lifetime: {dist: constant, value: 10s}
  sandbox: {template: base, vcpu: 1, ram_mb: 512, timeout: 60s}
collect:
  interval: 1s
YAML
STAMPEDE_API_KEY=e2b_stampede_local_key "$bin/stampede" run --quiet --api "http://127.0.0.1:$port" --mock-admin "$admin" \
  --report-dir "$tmp/reports" "$tmp/soak.yaml" >"$tmp/run" 2>"$tmp/run.err" &
run=$!; pids+=($run)
t=0
: >"$tmp/samples"
while kill -0 "$run" 2>/dev/null; do
  line="$t $(rss $run) $(rss $serve) $(rss $mock)"
  echo "$line" | tee -a "$tmp/samples"
  sleep 30; t=$((t + 30))
done
wait "$run" || { echo "run exit $?" >&2; tail -5 "$tmp/run.err" >&2; }
# Samples from the warm-up's end while the workload still sends: past SECONDS the run
# winds down (its users and their clients are dropped) and its RSS falls.
awk -v secs="$secs" '$1 >= 120 && $1 < secs && $2 != "nan" { n++; sx += $1; sy += $2; sxx += $1*$1; sxy += $1*$2 }
     END { if (n > 1) printf "run RSS growth after warm-up: %.3f MB/min (%d samples)\n",
           60 * (n*sxy - sx*sy) / (n*sxx - sx*sx), n }' "$tmp/samples"

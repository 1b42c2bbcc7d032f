#!/usr/bin/env bash
# Ten-minute soak of an external `stampede run` at 50 creates/s (10 s lifetimes) against
# `mock-node --nodes 10` and `stampede serve`, each a process of its own. Prints the
# VmRSS of the three every 30 s (`t_s run_mb serve_mb mock_mb`), then the run's growth
# in MB/min after a 2-minute warm-up (a least-squares slope over the later samples).
# Needs release builds: cargo build --release --bin stampede --bin mock-node.
# Run it niced: nice -n 10 scripts/soak-rss.sh [SECONDS]
set -euo pipefail
secs=${1:-600}
here=$(cd "$(dirname "$0")/.." && pwd)
bin=$here/target/release
tmp=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$tmp"; }
trap cleanup EXIT
ulimit -n "$(ulimit -Hn)"
"$bin/mock-node" --nodes 10 --cpu-count 4096 --memory-mib 4194304 --max-sandboxes 5000 \
  >"$tmp/fleet" 2>"$tmp/fleet.err" &
mock=$!; pids+=($mock)
for _ in $(seq 100); do grep -q "mock-node ready" "$tmp/fleet" && break; sleep 0.1; done
admin=$(sed -n 's/.*admin=\([^ ]*\).*/\1/p' "$tmp/fleet")
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
"$bin/stampede" serve --mock-admin "$admin" --listen "127.0.0.1:$port" >"$tmp/serve" 2>"$tmp/serve.err" &
serve=$!; pids+=($serve)
for _ in $(seq 100); do grep -q "stampede serve:" "$tmp/serve" && break; sleep 0.1; done
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
STAMPEDE_API_KEY=e2b_stampede_local_key "$bin/stampede" run --quiet --mock-admin "$admin" \
  --report-dir "$tmp/reports" "$tmp/soak.yaml" >"$tmp/run" 2>"$tmp/run.err" &
run=$!; pids+=($run)
rss() { awk '/VmRSS/ {printf "%.1f", $2 / 1024}' "/proc/$1/status" 2>/dev/null || echo nan; }
t=0
: >"$tmp/samples"
while kill -0 "$run" 2>/dev/null; do
  line="$t $(rss $run) $(rss $serve) $(rss $mock)"
  echo "$line" | tee -a "$tmp/samples"
  sleep 30; t=$((t + 30))
done
wait "$run" || echo "run exit $?" >&2
awk '$1 >= 120 && $2 != "nan" { n++; sx += $1; sy += $2; sxx += $1*$1; sxy += $1*$2 }
     END { if (n > 1) printf "run RSS growth after warm-up: %.3f MB/min (%d samples)\n",
           60 * (n*sxy - sx*sy) / (n*sxx - sx*sx), n }' "$tmp/samples"

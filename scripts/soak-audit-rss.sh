#!/usr/bin/env bash
# An embedded `stampede run` (service and mock nodes in the one process) at RATE creates/s
# (default 200) for SECONDS (default 120), 10 s lifetimes, with the set audit's `lost` and
# `duplicated` checks on; `--no-audit` runs the same profile without them. Prints the
# process's VmRSS and open descriptors once a second from the workload's gate
# (`t_s rss_kib fds`), then its growth in bytes per create between FROM and TO seconds
# (defaults 40 and 115): the end-to-end difference and a least-squares slope over the
# samples between, both over RATE * (TO - FROM) creates.
# With MSTATS=1 it also prints the live heap at FROM and TO (`heap t_s in_use_kib
# rss_anon_kib`: glibc's in-use bytes over all arenas, from malloc_stats called through
# gdb, beside the resident anonymous memory), which tells what the process holds from
# what its allocator keeps, and the window's descriptor range.
# Needs a release build: cargo build --release --bin stampede.
# Run it niced: nice -n 10 scripts/soak-audit-rss.sh [--no-audit] [SECONDS] [RATE]
set -euo pipefail
audit=1
if [ "${1:-}" = "--no-audit" ]; then audit=0; shift; fi
secs=${1:-120}
rate=${2:-200}
from=${FROM:-40}
to=${TO:-115}
here=$(cd "$(dirname "$0")/.." && pwd)
bin=${STAMPEDE_BIN:-$here/target/release/stampede}
tmp=$(mktemp -d)
run=
cleanup() { [ -n "$run" ] && kill "$run" 2>/dev/null; rm -rf "$tmp"; }
trap cleanup EXIT
checks=""
if [ "$audit" = 1 ]; then
  checks=$'checks:\n  lost: {max: 0}\n  duplicated: {max: 0}'
fi
cat >"$tmp/soak.yaml" <<YAML
name: soak-audit
seed: 1
cluster:
  nodes: 10
  node:
    cpu_count: 1024
    max_starting: 64
    create_latency: {dist: lognormal, median: 20ms, sigma: 0.5}
placement:
  embedded:
    accounting: [optimistic]
workload:
  shape:
    rate: {per_second: $rate, duration: ${secs}s}
  sandbox: {template: base, vcpu: 1, ram_mb: 256, timeout: 300s}
  lifetime: {dist: constant, value: 10s}
  max_in_flight: 256
collect:
  interval: 1s
$checks
YAML
RUST_LOG=${RUST_LOG:-info} "$bin" run --quiet --report-dir "$tmp/reports" "$tmp/soak.yaml" >"$tmp/out" 2>"$tmp/err" &
run=$!
: >"$tmp/samples"
# The workload's clock starts at its gate, which the run logs as it opens.
for _ in $(seq 600); do grep -qs "workload gate open" "$tmp/err" && break; sleep 0.05; done
grep -qs "workload gate open" "$tmp/err" || { echo "no gate in 30 s" >&2; tail -5 "$tmp/err" >&2; exit 1; }
t=0
while kill -0 "$run" 2>/dev/null && [ "$t" -le "$secs" ]; do
  kib=$(awk '/VmRSS/ {print $2}' "/proc/$run/status" 2>/dev/null || echo nan)
  fds=$(find "/proc/$run/fd" -mindepth 1 -maxdepth 1 2>/dev/null | wc -l)
  echo "$t $kib $fds" | tee -a "$tmp/samples"
  if [ -n "${MSTATS:-}" ] && { [ "$t" = "$from" ] || [ "$t" = "$to" ]; }; then
    off=$(stat -c %s "$tmp/err")
    anon=$(awk '/RssAnon/ {print $2}' "/proc/$run/status")
    gdb -p "$run" -batch -ex 'call (void)malloc_stats()' >/dev/null 2>&1 || true
    tail -c +$((off + 1)) "$tmp/err" | awk -v t="$t" -v anon="$anon" \
      '/^in use bytes/ { u = $5 } END { printf "heap %d %d %d\n", t, u / 1024, anon }' |
      tee -a "$tmp/heap"
  fi
  sleep 1; t=$((t + 1))
done
wait "$run" && code=0 || code=$?
echo "run exit $code"; tail -3 "$tmp/out"
[ "$code" -le 1 ] || { tail -5 "$tmp/err" >&2; exit 1; }
awk -v from="$from" -v to="$to" -v rate="$rate" '
  $2 == "nan" { next }
  $1 == from { a = $2 } $1 == to { b = $2 }
  $1 >= from && $1 <= to { n++; sx += $1; sy += $2; sxx += $1*$1; sxy += $1*$2
    if (lo == "" || $3 < lo) lo = $3; if ($3 > hi) hi = $3 }
  END {
    creates = rate * (to - from)
    if (a == "" || b == "" || n < 2) { print "too few samples"; exit 1 }
    printf "RSS %.1f MiB at %d s, %.1f MiB at %d s: %.0f bytes per create end to end\n",
      a / 1024, from, b / 1024, to, (b - a) * 1024 / creates
    printf "slope %.0f bytes per create (%d samples)\n",
      (n*sxy - sx*sy) / (n*sxx - sx*sx) * 1024 / rate, n
    printf "descriptors %d-%d\n", lo, hi
  }' "$tmp/samples"

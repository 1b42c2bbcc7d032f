#!/usr/bin/env bash
# A burst's release spread on the wire against the harness's own figures.
#
# Runs `stampede run` on profiles/burst-500.yaml with the burst's count set to COUNT
# (and each node's sandbox cap raised to hold it), while tcpdump captures loopback.
# For each mode-run the capture gives the first and last first-transmission of the
# creates' held final byte (a one-byte segment carrying `}` to the service's port;
# TCP's tail-loss probes resend some of them later and are not counted), printed beside
# the report's `burst_spread_ms` (the client's release loop) and
# `server_arrival_spread_ms` (the service's kernel receive stamps).
#
# Each run is followed, in the same invocation, by the bare baseline (bare_release.c,
# built here with cc): COUNT one-byte sends on loopback from one loop, from one loop per
# core, and in one io_uring submission, all at SCHED_FIFO, with a receiver thread in
# epoll; plus the COUNT releases multiplexed 100 to a connection (one send of 100
# frames per connection), the floor of a multiplexed transport.
#
# tcpdump gets a 64 MiB buffer: with the default one it dropped a third of a burst of
# 5,000 on the loaded machine. Needs root (tcpdump) and python3. Usage:
#   benches/capture/burst-wire.sh [COUNT] [RUNS] [STAMPEDE_BINARY]
# (defaults 500, 1, target/release/stampede). Prints one line per mode-run and, at
# the end, the median and range of the wire spread over all mode-runs and of each bare
# baseline over the runs.
set -euo pipefail
count=${1:-500}
runs=${2:-1}
root=$(cd "$(dirname "$0")/../.." && pwd)
bin=${3:-$root/target/release/stampede}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# Enough room on 10 nodes for every create of the burst.
cap=$(( (count + 9) / 10 * 2 ))
sed -e "s/burst: {count: 500}/burst: {count: $count}/" \
    -e "s/max_sandboxes: 200/max_sandboxes: $cap/" \
    -e "s/^name: burst-500/name: burst-$count/" \
    "$root/profiles/burst-500.yaml" >"$work/profile.yaml"
cc -O2 -pthread -o "$work/bare_release" "$root/benches/capture/bare_release.c"
echo "load before: $(cat /proc/loadavg)"
for r in $(seq 1 "$runs"); do
    tcpdump -i lo -s 96 -B 65536 -w "$work/cap-$r.pcap" -U 'tcp and less 120' 2>"$work/tcpdump-$r.log" &
    dump=$!
    # tcpdump is ready once it says it is listening.
    for _ in $(seq 1 100); do
        grep -q listening "$work/tcpdump-$r.log" 2>/dev/null && break
        sleep 0.05
    done
    "$bin" run "$work/profile.yaml" --quiet --report-dir "$work/report-$r" >"$work/run-$r.log" 2>&1 || {
        echo "run $r failed:"; tail -5 "$work/run-$r.log"; }
    sleep 0.5
    kill -INT "$dump"
    wait "$dump" || true
    python3 "$root/benches/capture/wire_spread.py" "$work/cap-$r.pcap" \
        "$(find "$work/report-$r" -name report.json | head -1)" "$count" | tee -a "$work/lines"
    for mode in send lanes uring mux; do
        "$work/bare_release" "$count" "$mode" 1 100 | tee -a "$work/lines"
    done
done
echo "load after: $(cat /proc/loadavg)"
python3 - "$work/lines" <<'PY'
import statistics, sys
wire = []
for line in open(sys.argv[1]):
    if line.startswith("mode ") and "complete=yes" in line:
        fields = dict(f.split("=") for f in line.split()[2:])
        wire.append(float(fields["wire_ms"]))
bare = {}
for line in open(sys.argv[1]):
    if line.startswith("bare "):
        fields = dict(f.split("=") for f in line.split()[1:])
        bare.setdefault(fields["mode"], []).append(float(fields["spread_ms"]))
if wire:
    print(f"wire spread over {len(wire)} complete mode-runs: median {statistics.median(wire):.2f} ms, "
          f"range {min(wire):.2f}..{max(wire):.2f} ms")
for mode, v in bare.items():
    print(f"bare {mode} over {len(v)} runs: median {statistics.median(v):.2f} ms, "
          f"range {min(v):.2f}..{max(v):.2f} ms")
PY

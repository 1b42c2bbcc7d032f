#!/usr/bin/env bash
# What the costliest filter mock-node's limits accept costs its Nomad API at 1,000 nodes,
# and what 64 of them at once do to a node: `GET /v1/nodes` with 8 distinct patterns of
# the largest `[^x]{1,N}y<k>` the pattern limit takes (found by a binary search on
# 200/400), joined by `or` up to the 4 KiB filter limit; none matches, so every
# expression runs on every node.
#  - CPU per request: the mock-node process's user+system time (/proc/<pid>/stat) over
#    20 sequential requests, divided by 20, less the same for 20 unfiltered lists;
#  - 64 at once: their statuses (200 or 503 when the filter queue is full) and the
#    latency of node 0's HTTP health check on its gRPC port (the executor that answers
#    ServiceInfo) polled every 5 ms while they run, against the same poll without them.
# Needs a release build: cargo build --release -p mock-node.
# Usage: scripts/nomad-filter-cost.sh [NODES]
set -euo pipefail
nodes=${1:-1000}
here=$(cd "$(dirname "$0")/.." && pwd)
tmp=$(mktemp -d)
fleet=
cleanup() { [ -n "$fleet" ] && kill "$fleet" 2>/dev/null; rm -rf "$tmp"; }
trap cleanup EXIT
ulimit -n "$(ulimit -Hn)"
"$here/target/release/mock-node" --nodes "$nodes" >"$tmp/out" 2>"$tmp/err" &
fleet=$!
for _ in $(seq 1200); do grep -q "mock-node ready" "$tmp/out" && break; sleep 0.1; done
nomad=$(sed -n "s/.*nomad=\([^ ]*\).*/\1/p" "$tmp/out")
node0=$(sed -n "s/.*nodes=[^@]*@\([^,]*\).*/\1/p" "$tmp/out")
[ -n "$nomad" ] && [ -n "$node0" ] || { cat "$tmp/err" >&2; exit 1; }
python3 - "$nomad" "$node0" "$fleet" <<'PY'
import os, statistics, sys, threading, time, urllib.error, urllib.parse, urllib.request
base, node0, pid = sys.argv[1] + "/v1/nodes", sys.argv[2], sys.argv[3]
tick = os.sysconf("SC_CLK_TCK")
def cpu():
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / tick
def get(url, timeout=60):
    try:
        with urllib.request.urlopen(url, timeout=timeout) as r:
            r.read()
            return r.status
    except urllib.error.HTTPError as e:
        return e.code
def filt(expr):
    return base + "?filter=" + urllib.parse.quote(expr)
pattern = lambda n, k: f'Name matches "[^x]{{1,{n}}}y{k}"'
lo, hi = 1, 4096
while lo < hi:
    mid = (lo + hi + 1) // 2
    s = get(filt(pattern(mid, 0)))
    while s == 503:
        time.sleep(0.05); s = get(filt(pattern(mid, 0)))
    lo, hi = (mid, hi) if s == 200 else (lo, mid - 1)
parts, size, k = [], 0, 0
while size + len(pattern(lo, k % 8)) + 4 <= 4096:
    parts.append(pattern(lo, k % 8)); size += len(parts[-1]) + 4; k += 1
worst = " or ".join(parts)
def per_request(url):
    c0 = cpu(); t0 = time.perf_counter(); statuses = [get(url) for _ in range(20)]
    return (cpu() - c0) / 20 * 1000, (time.perf_counter() - t0) / 20 * 1000, statuses
plain_cpu, plain_wall, _ = per_request(base)
worst_cpu, worst_wall, st = per_request(filt(worst))
assert all(s == 200 for s in st), st
def poll(stop, out):
    while not stop():
        t0 = time.perf_counter(); get(f"http://{node0}/health", 5); out.append((time.perf_counter() - t0) * 1000)
        time.sleep(0.005)
quiet = []; until = time.time() + 1
poll(lambda: time.time() > until, quiet)
results, threads = [], [threading.Thread(target=lambda: results.append(get(filt(worst)))) for _ in range(64)]
busy = []; done = threading.Event()
poller = threading.Thread(target=poll, args=(done.is_set, busy)); poller.start()
t0 = time.perf_counter()
for t in threads: t.start()
for t in threads: t.join()
flood_wall = time.perf_counter() - t0
done.set(); poller.join()
print(f"pattern [^x]{{1,{lo}}}, {len(parts)} expressions, {len(worst)} bytes")
print(f"CPU per request: unfiltered {plain_cpu:.1f} ms, worst filter {worst_cpu:.1f} ms (wall {plain_wall:.1f} / {worst_wall:.1f} ms)")
print(f"64 at once: {results.count(200)} x 200, {results.count(503)} x 503, others {len(results) - results.count(200) - results.count(503)}, {flood_wall:.2f} s")
print(f"node health: quiet median {statistics.median(quiet):.1f} max {max(quiet):.1f} ms; during the flood median {statistics.median(busy):.1f} max {max(busy):.1f} ms ({len(busy)} polls)")
PY

#!/usr/bin/env bash
# How long mock-node's Nomad API takes to answer `GET /v1/nodes` at 1,000 nodes with a
# hostile filter (4 KiB of `matches` expressions on a pattern that is costly to compile)
# against the same list unfiltered: median of 20 of each, in ms.
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
[ -n "$nomad" ] || { cat "$tmp/err" >&2; exit 1; }
python3 - "$nomad" <<'PY'
import statistics, sys, time, urllib.parse, urllib.request
base = sys.argv[1] + "/v1/nodes"
expr = 'Name matches "(a|aa)*(b|bb)*[a-z]{1,100}x{2,50}(c|d|e)*zz"'
hostile = " or ".join([expr] * 60)
assert len(hostile) <= 4096, len(hostile)
def ms(url):
    t0 = time.perf_counter()
    with urllib.request.urlopen(url) as r:
        r.read()
        assert r.status == 200, r.status
    return (time.perf_counter() - t0) * 1000
plain = [ms(base) for _ in range(20)]
bad = [ms(base + "?filter=" + urllib.parse.quote(hostile)) for _ in range(20)]
print(f"filter bytes {len(hostile)}")
print(f"unfiltered  median {statistics.median(plain):.1f} ms  max {max(plain):.1f} ms")
print(f"hostile     median {statistics.median(bad):.1f} ms  max {max(bad):.1f} ms")
PY

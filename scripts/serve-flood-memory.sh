#!/usr/bin/env bash
# The resident memory of `stampede serve` through floods of 2,000 concurrent creates:
# one line per second, `t_s rss_mb`, on stdout. Three floods 20 s apart, then 40 s idle.
# Needs release builds: cargo build --release --bin stampede --bin mock-node.
# Usage: scripts/serve-flood-memory.sh [FLOODS] [CONCURRENT]
set -euo pipefail
floods=${1:-3}
concurrent=${2:-2000}
here=$(cd "$(dirname "$0")/.." && pwd)
bin=$here/target/release
tmp=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$tmp"; }
trap cleanup EXIT
ulimit -n "$(ulimit -Hn)"
"$bin/mock-node" --nodes 10 --cpu-count 4096 --memory-mib 4194304 --max-sandboxes 5000 \
  --max-starting 0 >"$tmp/fleet" 2>"$tmp/fleet.err" &
pids+=($!)
for _ in $(seq 100); do grep -q "mock-node ready" "$tmp/fleet" && break; sleep 0.1; done
admin=$(sed -n 's/.*admin=\([^ ]*\).*/\1/p' "$tmp/fleet")
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
"$bin/stampede" serve --mock-admin "$admin" --listen "127.0.0.1:$port" >"$tmp/serve" 2>"$tmp/serve.err" &
serve=$!
pids+=($serve)
for _ in $(seq 100); do grep -q "stampede serve:" "$tmp/serve" && break; sleep 0.1; done
# RSS once a second while the floods run.
( t=0; while kill -0 "$serve" 2>/dev/null; do
    rss=$(awk '/VmRSS/ {print $2}' "/proc/$serve/status")
    printf '%d %.1f\n' "$t" "$(echo "$rss / 1024" | bc -l)"; t=$((t + 1)); sleep 1; done ) &
pids+=($!)
sleep 5
for _ in $(seq "$floods"); do
  python3 - "$port" "$concurrent" <<'PY' >&2
import asyncio, sys
port, n = int(sys.argv[1]), int(sys.argv[2])
body = b'{"templateID":"base","timeout":2}'
req = (b"POST /sandboxes HTTP/1.1\r\nHost: x\r\nX-API-Key: e2b_stampede_local_key\r\n"
       b"Content-Type: application/json\r\nConnection: close\r\nContent-Length: "
       + str(len(body)).encode() + b"\r\n\r\n" + body)
async def one():
    r, w = await asyncio.open_connection("127.0.0.1", port)
    w.write(req); await w.drain()
    line = await r.readline(); w.close()
    return line.split(b" ")[1] if line else b"none"
async def main():
    got = await asyncio.gather(*(one() for _ in range(n)), return_exceptions=True)
    codes = {}
    for g in got:
        k = g if isinstance(g, bytes) else type(g).__name__
        codes[k] = codes.get(k, 0) + 1
    print("flood:", codes)
asyncio.run(main())
PY
  sleep 20
done
sleep 40

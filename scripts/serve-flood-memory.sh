#!/usr/bin/env bash
# The resident memory of `stampede serve` through floods of 2,000 concurrent creates:
# one line per second, `t_s rss_mb`, on stdout. Three floods 20 s apart, then 40 s idle.
# Needs release builds: cargo build --release --workspace --bin stampede --bin mock-node.
# Usage: scripts/serve-flood-memory.sh [FLOODS] [CONCURRENT]
set -euo pipefail
floods=${1:-3}
concurrent=${2:-2000}
# shellcheck source=scripts/lib/stack.sh
MOCK_ARGS="--max-starting 0" . "$(dirname "$0")/lib/stack.sh"
# RSS once a second while the floods run.
( t=0; while kill -0 "$serve" 2>/dev/null; do
    echo "$t $(rss "$serve")"; t=$((t + 1)); sleep 1; done ) &
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

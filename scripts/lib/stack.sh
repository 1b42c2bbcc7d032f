# Sourced by the memory scripts (soak-rss.sh, serve-flood-memory.sh): starts release
# builds of `mock-node --nodes 10` (room for thousands of sandboxes; extra arguments in
# MOCK_ARGS) and `stampede serve` on a free loopback port, each a process of its own,
# and stops both on exit.
# Sets: here (the checkout), bin, tmp (removed on exit), pids (killed on exit), mock,
# serve, admin (mock-node's admin URL), port (the service's). Defines `rss PID`
# (VmRSS in MB, `nan` once PID is gone).
# Needs release builds: cargo build --release --workspace --bin stampede --bin mock-node.
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
bin=$here/target/release
tmp=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$tmp"; }
trap cleanup EXIT
ulimit -n "$(ulimit -Hn)"
# shellcheck disable=SC2086 # MOCK_ARGS is a list of words
"$bin/mock-node" --nodes 10 --cpu-count 4096 --memory-mib 4194304 --max-sandboxes 5000 \
  ${MOCK_ARGS:-} >"$tmp/fleet" 2>"$tmp/fleet.err" &
mock=$!; pids+=("$mock")
for _ in $(seq 100); do grep -qs "mock-node ready" "$tmp/fleet" && break; sleep 0.1; done
admin=$(sed -n 's/.*admin=\([^ ]*\).*/\1/p' "$tmp/fleet")
[ -n "$admin" ] || { cat "$tmp/fleet.err" >&2; exit 1; }
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
"$bin/stampede" serve --mock-admin "$admin" --listen "127.0.0.1:$port" >"$tmp/serve" 2>"$tmp/serve.err" &
serve=$!; pids+=("$serve")
for _ in $(seq 100); do grep -qs "stampede serve:" "$tmp/serve" && break; sleep 0.1; done
grep -q "stampede serve:" "$tmp/serve" || { cat "$tmp/serve.err" >&2; exit 1; }
rss() { awk '/VmRSS/ {printf "%.1f", $2 / 1024}' "/proc/$1/status" 2>/dev/null || echo nan; }

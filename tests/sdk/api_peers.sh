#!/usr/bin/env bash
# Start a mock-node fleet and `stampede serve` on loopback (ports chosen by the OS), run
# schemathesis with openapi/stampede-e2b.yaml and every check, then the official E2B
# Python and JS SDK suites; stop both servers whatever happens.
#
# Usage: tests/sdk/api_peers.sh STAMPEDE_BIN PYTHON NODE_MODULES_PARENT
#   PYTHON: an interpreter with `schemathesis` and `e2b` installed
#   NODE_MODULES_PARENT: a directory whose node_modules holds `e2b`
set -euo pipefail
bin=$1
py=$2
js_dir=$3
root="$(cd "$(dirname "$0")/../.." && pwd)"
work=$(mktemp -d)
pids=()
cleanup() {
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
    for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
    rm -rf "$work"
}
trap cleanup EXIT

# Waits (at most 30 s) until FILE has a line matching REGEX; prints the match.
wait_for() {
    local file=$1 regex=$2
    for _ in $(seq 300); do
        if grep -Eo "$regex" "$file" 2>/dev/null | head -1 | grep .; then return 0; fi
        sleep 0.1
    done
    echo "timed out waiting for /$regex/ in $file:" >&2
    cat "$file" >&2
    return 1
}

# A fleet that never refuses for capacity: the document is what is under test here,
# not placement under load (schemathesis creates several hundred sandboxes).
"$bin" mock-node --nodes 4 --base-port 0 --overcommit 0 --max-sandboxes 1000000 \
    --max-starting 0 >"$work/mock.log" 2>&1 &
pids+=($!)
admin=$(wait_for "$work/mock.log" 'admin=http://[0-9.:]+' | cut -d= -f2)

api_key="e2b_stampede_ci_$(od -An -N8 -tx1 /dev/urandom | tr -d ' \n')"
admin_token="admin_stampede_ci_$(od -An -N8 -tx1 /dev/urandom | tr -d ' \n')"
# A sync period longer than the run: a sandbox that schemathesis creates with a short
# timeout stays listed until it is killed, so its links can be followed.
STAMPEDE_API_KEY=$api_key STAMPEDE_ADMIN_TOKEN=$admin_token \
    "$bin" serve --listen 127.0.0.1:0 --mock-admin "$admin" --sync-interval 1h \
    >"$work/serve.log" 2>&1 &
pids+=($!)
url=$(wait_for "$work/serve.log" 'http://127\.0\.0\.1:[0-9]+')
echo "mock-node admin: $admin"
echo "stampede serve:  $url"

echo "=== schemathesis ($("$py" -m schemathesis.cli --version))"
# From the temporary directory: schemathesis keeps a cache in its working directory.
# A fixed seed keeps the generated cases repeatable; explore others with SCHEMATHESIS_SEED.
# SCHEMATHESIS_SPEC runs another document (E2B's own spec/openapi.yml, docs/reference.md).
# The stateful phase still follows the server's answers, so which scenarios run varies.
# `ensure_resource_availability` is replaced by tests/sdk/schemathesis_hooks.py's
# `sandbox_availability`, which also knows that a pause or a timeout takes a sandbox out of
# the running set (E2B then answers 404 on its running-sandbox routes).
[ "${SKIP_SCHEMATHESIS:-}" = 1 ] || (cd "$work" && \
    SCHEMATHESIS_HOOKS="$root/tests/sdk/schemathesis_hooks.py" "$py" -m schemathesis.cli \
    --config-file "$root/tests/sdk/schemathesis.toml" run \
    "${SCHEMATHESIS_SPEC:-$root/openapi/stampede-e2b.yaml}" --url "$url" --checks all --no-color \
    --exclude-checks ensure_resource_availability \
    --seed "${SCHEMATHESIS_SEED:-2201}" --max-examples "${SCHEMATHESIS_MAX_EXAMPLES:-50}" \
    -H "X-API-Key: $api_key" -H "X-Admin-Token: $admin_token")

echo "=== e2b Python SDK"
E2B_API_URL=$url E2B_API_KEY=$api_key MOCK_ADMIN=$admin "$py" "$root/tests/sdk/e2b_python.py"

echo "=== e2b JS SDK"
cp "$root/tests/sdk/e2b_js.mjs" "$js_dir/e2b_js.mjs"
(cd "$js_dir" && E2B_API_URL=$url E2B_API_KEY=$api_key MOCK_ADMIN=$admin node e2b_js.mjs)

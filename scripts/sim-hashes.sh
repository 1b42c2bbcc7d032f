#!/usr/bin/env bash
# Simulates every profile under profiles/ with the given stampede binary and prints the
# sha256 of each report.json (a profile the simulator refuses prints its exit code).
# Two builds that should write the same reports print the same lines (`--out`, the old
# name of `--report-dir`, so that older builds take it too).
# Usage: scripts/sim-hashes.sh [STAMPEDE_BINARY] (default target/release/stampede)
set -euo pipefail
bin=${1:-target/release/stampede}
root=$(cd "$(dirname "$0")/.." && pwd)
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
for profile in "$root"/profiles/*.yaml; do
    name=$(basename "$profile" .yaml)
    if "$bin" sim "$profile" --out "$out/$name" >"$out/$name.log" 2>&1; then
        status=pass
    else
        status="exit $?"
    fi
    report=$(find "$out/$name" -name report.json 2>/dev/null | head -1 || true)
    if [ -n "$report" ]; then
        echo "$(sha256sum <"$report" | cut -c1-64)  $name ($status)"
    else
        echo "no report  $name ($status: $(tail -1 "$out/$name.log"))"
    fi
done

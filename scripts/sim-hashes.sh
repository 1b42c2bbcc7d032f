#!/usr/bin/env bash
# Simulates every profile under profiles/ with the given stampede binary and prints the
# sha256 of each report.json (a profile the simulator refuses prints its exit code).
# Two builds that should write the same reports print the same lines (`--out`, the old
# name of `--report-dir`, so that older builds take it too).
#
# With --stage-off every profile is simulated with the API stage at zero and the refusal
# round trip at 1 ms (written into a copy of each profile that has embedded placement and
# sets neither), the settings from before those defaults were measured: a change of the
# defaults alone shows no difference there.
# Usage: scripts/sim-hashes.sh [STAMPEDE_BINARY] [--stage-off]
#        (default binary target/release/stampede)
set -euo pipefail
bin=target/release/stampede
stage_off=
for a in "$@"; do
    case $a in
        --stage-off) stage_off=1 ;;
        *) bin=$a ;;
    esac
done
root=$(cd "$(dirname "$0")/.." && pwd)
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
profiles=$root/profiles
if [ -n "$stage_off" ]; then
    mkdir "$out/profiles"
    python3 - "$root/profiles" "$out/profiles" <<'PY'
import pathlib, sys, yaml
src, dst = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
for p in sorted(src.glob("*.yaml")):
    doc = yaml.safe_load(p.read_text())
    emb = (doc.get("placement") or {}).get("embedded") if isinstance(doc, dict) else None
    if isinstance(emb, dict):
        emb.setdefault("api_stage", {"time": {"dist": "constant", "value": "0ms"}})
        emb.setdefault("rpc_round_trip", "1ms")
    (dst / p.name).write_text(yaml.safe_dump(doc, sort_keys=False))
PY
    profiles=$out/profiles
fi
for profile in "$profiles"/*.yaml; do
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

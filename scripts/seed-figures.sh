#!/usr/bin/env bash
# Simulates a profile once per seed and prints, per mode, the range of every figure a
# check can bound over those seeds: the faithful model's spread that the profile's
# bounds are derived from (docs/fidelity.md gives each bound's rule).
# Usage: scripts/seed-figures.sh PROFILE FIRST_SEED COUNT [STAMPEDE_BINARY]
#        (default binary target/release/stampede)
set -euo pipefail
profile=$1 first=$2 count=$3 bin=${4:-target/release/stampede}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
for ((s = first; s < first + count; s++)); do
    sed "s/^seed: .*/seed: $s/" "$profile" >"$out/p.yaml"
    "$bin" sim -q "$out/p.yaml" --report-dir "$out/r/$s" >/dev/null 2>&1 || true
    test -n "$(find "$out/r/$s" -name report.json)" || { echo "seed $s: no report" >&2; exit 1; }
done
python3 - "$out/r" <<'PY'
import json, pathlib, sys
rows = {}
for rep in pathlib.Path(sys.argv[1]).glob("*/**/report.json"):
    for run in json.loads(rep.read_text())["runs"]:
        skew, sot = run.get("skew") or {}, run.get("skew_over_time") or {}
        acc = run.get("accounting_error") or {}
        figs = {
            "cv": skew.get("cv"),
            "max_over_mean": skew.get("max_over_mean"),
            "running_cv_mean": sot.get("running_cv_mean"),
            "accounting_error": acc.get("mean_abs_vcpu"),
            "p99_ms": (run.get("latency") or {}).get("p99_ms"),
            "error_rate": run.get("error_rate"),
            "refusals": run.get("refusals"),
        }
        mode = run.get("label") or "?"
        for k, v in figs.items():
            if isinstance(v, (int, float)):
                rows.setdefault((mode, k), []).append(float(v))
print("| mode | figure | seeds | min | median | max |")
print("|---|---|---|---|---|---|")
for (mode, k), v in sorted(rows.items()):
    v.sort()
    print(f"| {mode} | {k} | {len(v)} | {v[0]:.4g} | {v[len(v) // 2]:.4g} | {v[-1]:.4g} |")
PY

#!/usr/bin/env bash
# A flame graph of one part's subject round, from the server runtime's threads.
#
#   benches/baselines/flamegraph.sh rest stampede_serve::listen docs/flamegraphs/service-create.svg
#   benches/baselines/flamegraph.sh h2load mock_node:: docs/flamegraphs/mock-node-service-info.svg
#
# Runs one round of PART (release bench binary, built first) under `perf record
# --call-graph dwarf`, keeps the samples of the `bench-server` threads in the subject's
# window (from the first to the last sample whose stack names MARKER, after the last
# pause of more than 0.3 s between such samples: the subject's round follows its
# baselines'), folds them with inferno (`cargo install inferno`) and writes the SVG.
# Sizes as for the bench: BENCH_REST_REQUESTS (default here 20000),
# BENCH_H2LOAD_REQUESTS (default here 150000).
set -euo pipefail
part=${1:?part (rest, h2load)}
marker=${2:?a symbol only the subject stacks have}
out=${3:?output .svg}
title=${TITLE:-"$part, the subject round, bench-server threads"}
export BENCH_ROUNDS=1
export BENCH_REST_REQUESTS=${BENCH_REST_REQUESTS:-20000}
export BENCH_H2LOAD_REQUESTS=${BENCH_H2LOAD_REQUESTS:-150000}
cargo bench --bench baselines --no-run --message-format=json 2>/dev/null >"${TMPDIR:-/tmp}/baselines-build.json"
bin=$(grep -o '"executable":"[^"]*baselines[^"]*"' "${TMPDIR:-/tmp}/baselines-build.json" | tail -1 | cut -d'"' -f4)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
perf record -F 1999 --call-graph dwarf,16384 -o "$tmp/perf.data" "$bin" --bench "$part" >/dev/null
perf script --no-inline -i "$tmp/perf.data" -F comm,tid,time,event,ip,sym,dso 2>/dev/null >"$tmp/perf.txt"
awk -v marker="$marker" '
    BEGIN { RS = ""; ORS = "\n\n" }
    {
        split($0, line, "\n"); n = split(line[1], head, " ");
        for (i = 1; i <= n; i++) if (head[i] ~ /^[0-9]+\.[0-9]+:$/) t = substr(head[i], 1, length(head[i]) - 1) + 0;
        server = ($0 ~ /^bench-server/);
        stack[NR] = $0; at[NR] = t; keep[NR] = server;
        if (server && index($0, marker) > 0) {
            if (seen && t - last > 0.3) start = t;
            if (!seen) { start = t; seen = 1 }
            last = t
        }
    }
    END { for (i = 1; i <= NR; i++) if (keep[i] && at[i] >= start && at[i] <= last) print stack[i] }
' "$tmp/perf.txt" >"$tmp/window.txt"
inferno-collapse-perf "$tmp/window.txt" >"$tmp/folded.txt"
mkdir -p "$(dirname "$out")"
inferno-flamegraph --minwidth 0.5 --title "$title" "$tmp/folded.txt" >"$out"
echo "$out: $(awk '{ s += $NF } END { print s }' "$tmp/folded.txt") samples" >&2

#!/usr/bin/env bash
# Issue 7, convergence: the dynamic scenarios of docs/symbiosis.md ("Dynamic run") at R = 1/64,
# the round before this change (one second-tier ghost shrunk candidate by candidate, the
# paper's pipeline; binary built from commit ed417ff) against side-by-side passes with early
# stopping, interleaved (old, new, old, new, ...) on the same on-disk database so that machine
# load hits both alike. Rows: benches/results/cache-kv-convergence.jsonl; timelines (for the
# "converged" metrics and plots): benches/results/cache-kv-convergence/<n>.json.
#
#   git archive ed417ff | tar -x -C /tmp/old && (cd /tmp/old && cargo build --release \
#     -p attune-cache-kv) && cp /tmp/old/target/release/attune-cache-kv target/ackv-ed417ff
#   cargo build --release -p attune-cache-kv && cp target/release/attune-cache-kv target/ackv-s5
#   benches/cache/kv_convergence.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
OLD=${OLD:-target/ackv-ed417ff}
NEW=${NEW:-target/ackv-s5}
BINS=${BINS:-$OLD $NEW}   # the binaries interleaved per scenario (kv_convergence_s6.sh sets it)
OUT=${OUT:-benches/results/cache-kv-convergence.jsonl}
TL=${TL:-benches/results/cache-kv-convergence}
REPEAT=${REPEAT:-2}
READS=${READS:-3000000}
mkdir -p "$TL"
n=$(ls "$TL" | wc -l)
for rep in $(seq 1 "$REPEAT"); do
  for scen in "0.2 hot10 hot30" "0.6 hot20 hot10"; do
    set -- $scen
    for bin in $BINS; do
      n=$((n + 1))
      "$bin" dynamic --env disk --dir target/cache-kv-db --ratio "$1" --compression zstd \
        --phase1 "$2" --phase2 "$3" --phase-reads "$READS" --sample-inv 64 \
        --timeline "$TL/$n.json" --json "$OUT"
    done
  done
done

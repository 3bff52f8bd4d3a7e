#!/usr/bin/env bash
# Convergence: the dynamic scenarios of docs/symbiosis.md ("Dynamic run") at R = 1/64 -- hot10 ->
# hot30 at M/D_u 0.2 and hot20 -> hot10 at 0.6, Zstd, on-disk database, O_DIRECT reads, READS
# reads per phase -- with the binaries in BINS interleaved per scenario (e.g. the harness built
# before a change, then after it) on the same on-disk database, so that machine load hits both
# alike (`attune-bench cache-kv dynamic`). REPEAT times. Rows: benches/results/$NAME.jsonl, each
# with the commit its binary was built from (`machine.git_commit`); timelines (for the
# "converged" metrics and plots): benches/results/$NAME/<n>.json; table:
#   python3 benches/cache/kv_convergence_report.py --name $NAME
#
#   git checkout BEFORE && cargo build --release -p attune-bench \
#     && cp target/release/attune-bench target/attune-bench-before
#   git checkout AFTER && cargo build --release -p attune-bench \
#     && cp target/release/attune-bench target/attune-bench-after
#   BINS="target/attune-bench-before target/attune-bench-after" benches/cache/kv_convergence.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
BINS=${BINS:-target/release/attune-bench}
NAME=${NAME:-cache-kv-convergence}
OUT=${OUT:-benches/results/$NAME.jsonl}
TL=${TL:-benches/results/$NAME}
REPEAT=${REPEAT:-2}
READS=${READS:-3000000}
mkdir -p "$TL"
n=$(ls "$TL" | wc -l)
for rep in $(seq 1 "$REPEAT"); do
  for scen in "0.2 hot10 hot30" "0.6 hot20 hot10"; do
    set -- $scen
    for bin in $BINS; do
      n=$((n + 1))
      "$bin" cache-kv dynamic --env disk --dir target/cache-kv-db --ratio "$1" \
        --compression zstd --phase1 "$2" --phase2 "$3" --phase-reads "$READS" --sample-inv 64 \
        --timeline "$TL/$n.json" --no-progress --out "$OUT" > /dev/null
    done
  done
done

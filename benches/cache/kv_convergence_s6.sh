#!/usr/bin/env bash
# Issue 7, sixth session: the dynamic scenarios of kv_convergence.sh (hot10 -> hot30 at M/D_u
# 0.2, hot20 -> hot10 at 0.6; Zstd, on-disk database, O_DIRECT reads, R = 1/64, 3 M reads per
# phase) rerun after Zstd contexts became reused per thread, REPEAT times interleaved per
# scenario, with the binaries given in BINS (default: this session's). Rows:
# benches/results/cache-kv-convergence-s6.jsonl, timelines cache-kv-convergence-s6/<n>.json;
# table: python3 benches/cache/kv_convergence_report.py --name cache-kv-convergence-s6
set -euo pipefail
cd "$(dirname "$0")/../.."
BINS=${BINS:-target/ackv-s6}
NAME=${NAME:-cache-kv-convergence-s6}
OUT=benches/results/$NAME.jsonl
TL=benches/results/$NAME
REPEAT=${REPEAT:-3}
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

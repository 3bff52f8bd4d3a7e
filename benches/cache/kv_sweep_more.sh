#!/usr/bin/env bash
# Engine sweep, the cells beyond the first nine: the Zstd/zipf/0.6 cell re-run, then hot30 and
# hot10 at M/D_u 0.2, 0.6, 1.0 and all five patterns at 0.4 and 0.8, in both compressions
# (`attune-bench cache-kv sweep`: M = 32 MiB, R = 1/64, 300 000 reads after 300 000 of warm-up,
# user layout in MemEnv, CPU time + device reads x C_k). kv_sweep_all_cells.sh runs every cell.
# Rows: OUT (default benches/results/cache-kv-sweep-more.jsonl); table:
#   python3 benches/cache/kv_sweep_report.py --sweep cache-kv-sweep-more.jsonl
set -euo pipefail
cd "$(dirname "$0")/../.."
BIN=${BIN:-target/release/attune-bench}   # copy it elsewhere if builds run meanwhile
OUT=${OUT:-benches/results/cache-kv-sweep-more.jsonl}
S="--sample-inv 64 --reads 300000 --warmup 300000 --no-progress --out $OUT"
"$BIN" cache-kv sweep --compressions zstd --patterns zipf --ratios 0.6 $S > /dev/null
for comp in lz4 zstd; do
  "$BIN" cache-kv sweep --compressions "$comp" --patterns hot30,hot10 --ratios 0.2,0.6,1.0 $S \
    > /dev/null
  "$BIN" cache-kv sweep --compressions "$comp" --patterns uniform,zipf,hot20,hot30,hot10 \
    --ratios 0.4,0.8 $S > /dev/null
done

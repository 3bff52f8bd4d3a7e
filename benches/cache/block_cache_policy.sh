#!/usr/bin/env bash
# The block cache's replacement policy, LRU against S3-FIFO
# (option block_cache_policy), side by side in one attune-bench run per request distribution:
# 1M YCSB records of one 100-byte field, an 8 MiB block cache (the data is about 70 MiB of
# LZ4 tables; with `--compression none` mapped tables are read in place and bypass the block
# cache), workloads C (point reads) and E (short scans, 5 % inserts), 1M operations after
# 200K of warm-up, 3 interleaved repeats. Rows: benches/results/block-cache-policy.jsonl
# (each row's `command` is the attune-bench line that produced it); table:
#   python3 benches/cache/block_cache_policy_report.py benches/results/block-cache-policy.jsonl
set -euo pipefail
cd "$(dirname "$0")/../.."
BENCH=${BENCH:-target/release/attune-bench}
DIR=${DIR:-/tmp/attune-block-cache-policy}
OUT=${OUT:-benches/results/block-cache-policy.jsonl}
mkdir -p "$DIR"
: >"$OUT"
for d in zipfian uniform; do
  nice -n 5 "$BENCH" kv ycsb \
    --engines "attune:block_cache_policy=lru,attune:block_cache_policy=s3fifo" \
    --records 1M --operations 1M --warmup-ops 200K --field-count 1 --field-length 100 \
    --workloads load,c,e --distribution "$d" --cache-size 8MiB --compression lz4 \
    --repeat 3 --dir "$DIR" --no-progress --out "$OUT"
done

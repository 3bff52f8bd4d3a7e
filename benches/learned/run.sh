#!/usr/bin/env bash
# Learned-index benchmarks (docs/learned-index.md "Measured in the engine"): Attune with
# models off / always / analyzer side by side with RocksDB 7.8 and LevelDB 1.23, same data, same
# memory budget and same phases in one attune-bench run per key set. Scaled for a 2-core shared
# machine (about 13 minutes here). Writes benches/results/learned-*.jsonl; every row carries the exact
# attune-bench command that produced it (`command`) and the machine (`machine`).
#
# Usage: benches/learned/run.sh [attune-bench binary]   (default: .venv/bin/attune-bench)
set -euo pipefail
# shellcheck source=benches/learned/common.sh
source "$(dirname "$0")/common.sh"
OPS=${OPS:-100000}
ALL="$OFF,$ALWAYS,attune:learned_index=analyzer,rocksdb,leveldb"
DELTAS="$OFF"
for d in 2 4 8 16 32; do DELTAS="$DELTAS,$ALWAYS;learned_delta=$d"; done
KEYSETS=(linear seg1 seg10 normal lognormal osm)
DISTS=c:uniform,c:zipfian,c:hotspot,c:exponential,c:latest,c:sequential

# 1. Read-only lookups: six key sets x six request distributions, sequential load; data flushed
#    and compacted into tables, then learned offline (`learn`: a no-op for off, RocksDB, LevelDB).
fresh $OUT/learned-readonly.jsonl
for ks in "${KEYSETS[@]}"; do
    run $OUT/learned-readonly.jsonl --engines "$ALL" --key-set "$ks" --records "$RECORDS" \
        --operations "$OPS" --repeat 2 --workloads "load,compact,learn,$DISTS"
done
# 1b. The error bound across all key sets: read-only lookups with δ = 2 and 4 against models off
#     (the δ sweep below showed smaller windows winning here).
fresh $OUT/learned-delta-keysets.jsonl
for ks in "${KEYSETS[@]}"; do
    run $OUT/learned-delta-keysets.jsonl \
        --engines "$OFF,$ALWAYS;learned_delta=2,$ALWAYS;learned_delta=4" --key-set "$ks" \
        --records "$RECORDS" --operations "$OPS" --repeat 2 \
        --workloads "load,compact,learn,$DISTS"
done
# 2. Random load order, uniform reads.
fresh $OUT/learned-randomload.jsonl
for ks in "${KEYSETS[@]}"; do
    run $OUT/learned-randomload.jsonl --engines "$OFF,$ALWAYS,rocksdb" \
        --key-set "$ks" --load-order random --records "$RECORDS" --operations "$OPS" \
        --workloads load,compact,learn,c:uniform
done
# 3. Range queries of 1, 10 and 100 records (uniform start keys).
fresh $OUT/learned-range.jsonl
run $OUT/learned-range.jsonl --engines "$ALL" --key-set osm --records "$RECORDS" \
    --operations 50000 --workloads load,compact,learn,scan1,scan10,scan100
# 4. Error bound sweep: lookups and model memory for delta 2..32.
fresh $OUT/learned-delta.jsonl
for ks in osm lognormal; do
    run $OUT/learned-delta.jsonl --key-set "$ks" --records "$RECORDS" --operations "$OPS" \
        --engines "$DELTAS" \
        --workloads load,compact,learn,c:uniform
done
# 5. YCSB A-F (YCSB's hashed keys, each workload's own distribution).
fresh $OUT/learned-ycsb.jsonl
run $OUT/learned-ycsb.jsonl --engines "$ALL" --key-set ycsb --records "$RECORDS" \
    --operations 50000 --workloads load,a,b,c,f,d,e
# 6. Write-percentage sweep (Bourbon §2.4.4), 200K and 1M records: benches/learned/writes.sh.
SCRATCH="$SCRATCH" RECORDS="$RECORDS" benches/learned/writes.sh "$BIN"
# 7. Larger scale, many tables: 1M records, 2 MiB tables for Attune (RocksDB's default 64 MiB
#    target file size stays; its L0/L1 hold several files anyway), delta 8 and 4, and level
#    learning (one model per level: it also replaces finding the file in the level).
fresh $OUT/learned-scale.jsonl
T=target_file_size=2MiB
run $OUT/learned-scale.jsonl --key-set osm --records 1000000 --operations 200000 --repeat 2 \
    --engines "$OFF;$T,$ALWAYS;$T,$ALWAYS;$T;learned_level=true,$ALWAYS;$T;learned_delta=4,rocksdb" \
    --workloads load,compact,learn,c:uniform,c:zipfian
# 8. Write cost of learning: the load phase alone, repeated 5 times interleaved.
fresh $OUT/learned-load.jsonl
run $OUT/learned-load.jsonl --key-set osm --records 500000 --repeat 5 --workloads load \
    --engines "$OFF,$ALWAYS,attune:learned_index=analyzer"
# 9. Limited memory: 1M records (116 MB of keys and values, 3.6x the budget) in a 32 MiB memory
#    cgroup (page cache included), 4 MiB block cache and 4 MiB write buffer for every engine;
#    few reads, since every miss goes to the disk. Attune maps at most half the memory limit of
#    tables (mmap_reads_limit=auto) and reads the rest with pread; `unlimited` maps them all.
fresh $OUT/learned-memlimit.jsonl
U=mmap_reads_limit=unlimited
"$BIN" kv ycsb --engines "$OFF,$ALWAYS,$OFF;$U,$ALWAYS;$U,rocksdb,leveldb" \
    --key-set osm --records 1000000 --operations 5000 --workloads load,compact,learn,c:uniform \
    --field-count 1 --field-length 100 --cache-size 4MiB --write-buffer-size 4MiB \
    --memory-limit 32MiB --compression none --no-progress --dir "$SCRATCH/db" \
    --out $OUT/learned-memlimit.jsonl || echo "run.sh: memory-limited run reported failures" >&2
rm -rf "$SCRATCH"

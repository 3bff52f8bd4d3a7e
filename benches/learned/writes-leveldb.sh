#!/usr/bin/env bash
# The 1M-record write sweep in the source's tree shape: LevelDB's level sizes (L1 = 10 MiB,
# each level 10x the one above), which WiscKey and Bourbon ran on, instead of attune-kv's
# RocksDB-like default (L1 = 256 MiB), under which the whole 116 MB data set is one level whose
# tables every L0->L1 compaction rewrites. In LevelDB's shape the data sits in a deep level
# whose tables live long and serve most lookups, while the tables of the levels above churn and
# serve few: the regime Bourbon's analyzer was designed for (docs/learned-index.md "The
# analyzer under writes"). Models off, offline, always, the analyzer and the analyzer with
# calibration, interleaved repeats: the sweep of 400,000 operations per phase, then a 50 % write
# phase of 1,000,000 operations, long enough that compactions reach the deep level and rewrite
# (so always relearns) its tables (about 20 minutes here with REPEAT=9).
# Writes benches/results/learned-writes-1m-leveldb{,-long}.jsonl.
#
# Usage: benches/learned/writes-leveldb.sh [attune-bench binary]   (REPEAT=9 by default)
set -euo pipefail
# shellcheck source=benches/learned/common.sh
source "$(dirname "$0")/common.sh"
T1="target_file_size=1MiB;max_bytes_for_level_base=10MiB"
ENGINES="$OFF;$T1,attune:learned_index=offline;$T1,$ALWAYS;$T1"
ENGINES="$ENGINES,attune:learned_index=analyzer;$T1"
ENGINES="$ENGINES,attune:learned_index=analyzer;learned_calibrate=true;$T1"
fresh $OUT/learned-writes-1m-leveldb.jsonl
run $OUT/learned-writes-1m-leveldb.jsonl --key-set osm --records 1000000 --operations 400000 \
    --write-buffer-size 1MiB --repeat "${REPEAT:-9}" --engines "$ENGINES" \
    --workloads load,compact,learn,write1,write10,write20,write50
fresh $OUT/learned-writes-1m-leveldb-long.jsonl
run $OUT/learned-writes-1m-leveldb-long.jsonl --key-set osm --records 1000000 \
    --operations 1000000 --write-buffer-size 1MiB --repeat "${REPEAT:-9}" --engines "$ENGINES" \
    --workloads load,compact,learn,write50

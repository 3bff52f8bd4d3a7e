#!/usr/bin/env bash
# Write-percentage sweep of the learned index (Bourbon §2.4.4; docs/learned-index.md
# "The analyzer under writes"): models off, offline, always and the analyzer with both benefit
# estimates, side by side in one attune-bench run per data size. Called by run.sh; runs alone
# too (about 15 minutes here). Writes benches/results/learned-writes{,-1m}.jsonl.
#
# Usage: benches/learned/writes.sh [attune-bench binary]   (default: .venv/bin/attune-bench)
set -euo pipefail
# shellcheck source=benches/learned/common.sh
source "$(dirname "$0")/common.sh"

# Write-percentage sweep (Bourbon §2.4.4): offline learning (learn once after loading, never
#    again), always-learn and the cost-benefit analyzer while writes create new tables. A 1 MiB
#    write buffer and 1 MiB tables make every L0->L1 compaction rewrite the level's ~25 files, so
#    at high write shares files live a few hundred thousand operations and learning many of them
#    does not pay; 400,000 operations per phase, three interleaved repeats. Both benefit
#    estimates of the analyzer run: `remaining` (the default) and Bourbon's `lifetime`, and the
#    default with calibration.
fresh $OUT/learned-writes.jsonl
T1=target_file_size=1MiB
WRITE_ENGINES="$OFF;$T1,attune:learned_index=offline;$T1,$ALWAYS;$T1,attune:learned_index=analyzer;$T1"
WRITE_ENGINES="$WRITE_ENGINES,attune:learned_index=analyzer;learned_benefit=lifetime;$T1"
# The analyzer with calibration (off by default), for on vs off in one run.
WRITE_ENGINES="$WRITE_ENGINES,attune:learned_index=analyzer;learned_calibrate=true;$T1"
run $OUT/learned-writes.jsonl --key-set osm --records "$RECORDS" --operations 400000 \
    --write-buffer-size 1MiB --repeat 3 --engines "$WRITE_ENGINES" \
    --workloads load,compact,learn,write1,write5,write10,write20,write50
# The same sweep at 1M records (116 MB, a level of ~110 tables of 1 MiB): files see fewer
#     lookups in their lives relative to their size, so learning pays less often.
fresh $OUT/learned-writes-1m.jsonl
run $OUT/learned-writes-1m.jsonl --key-set osm --records 1000000 --operations 400000 \
    --write-buffer-size 1MiB --repeat 3 --engines "$WRITE_ENGINES" \
    --workloads load,compact,learn,write1,write5,write10,write20,write50

# Sourced by the cache sweeps: run_cell RATIO DIST COMPRESSION WARMUP runs one cell of YCSB C on
# 1 KB records (records = 32 MiB / (M/D_u) / 1016 B) for $ENGINES in a 96 MiB cgroup with the page
# cache dropped before each phase, and appends its rows to $OUT with the cell's `ratio` added. The
# controller's per-window timeline and miss-ratio curve make a row ~10 KB; the tables use neither,
# so they are dropped to keep the committed files small. Needs BIN, OUT, DIR, OPS, ENGINES.
run_cell() {
  local ratio=$1 dist=$2 comp=$3 warmup=$4 records part="$OUT.part"
  records=$(python3 -c "print(int(32 * 2**20 / $ratio / 1016))")
  rm -f "$part"
  "$BIN" kv ycsb --workloads load,c --records "$records" --operations "$OPS" \
    --warmup-ops "$warmup" --distribution "$dist" --compression "$comp" --cache-size 32MiB \
    --write-buffer-size 16MiB --memory-limit 96MiB --cold --engines "$ENGINES" \
    --dir "$DIR" --no-progress --repeat "${REPEAT:-1}" --out "$part"
  python3 - "$part" "$ratio" >> "$OUT" <<'PY'
import json, sys
for line in open(sys.argv[1]):
    if line.strip():
        r = json.loads(line)
        r["ratio"] = float(sys.argv[2])
        t = (r.get("settings") or {}).get("cache_tiers")
        if t:
            t.pop("timeline", None)
            t.pop("mrc", None)
        print(json.dumps(r))
PY
  rm -f "$part"
}

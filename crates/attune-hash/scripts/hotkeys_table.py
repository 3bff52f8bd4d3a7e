"""Prints the hot-key cache table of docs/vip-hashing.md from benches/results/hot-key-cache.jsonl.

One row per request distribution and engine: YCSB workload C (100% reads) throughput, median
over the interleaved repeats, its ratio to plain Attune (8 MiB block cache) within each repeat,
reads per CPU second of the engine process, and the hot-key cache's hit rate.
Usage: python3 crates/attune-hash/scripts/hotkeys_table.py [results.jsonl]
"""

from __future__ import annotations

import json
import statistics
import sys
from collections import defaultdict
from pathlib import Path


def main() -> None:
    path = Path(sys.argv[1] if len(sys.argv) > 1 else "benches/results/hot-key-cache.jsonl")
    rows = [json.loads(x) for x in path.read_text().splitlines() if x.strip()]
    rows = [r for r in rows if r["workload"] == "c"]
    by = defaultdict(lambda: defaultdict(dict))  # dist -> repeat -> engine -> row
    for r in rows:
        by[r["params"]["distribution"]][r.get("repeat", 0)][r["engine"]] = r
    print("| distribution | engine | reads/s | vs attune | reads/CPU s | cache hit rate |")
    print("|---|---|---|---|---|---|")
    for dist, reps in by.items():
        engines = list(next(iter(reps.values())).keys())
        for e in engines:
            runs = [rep[e] for rep in reps.values() if e in rep]
            ops = statistics.median(r["ops_per_sec"] for r in runs)
            ratios = [
                rep[e]["ops_per_sec"] / rep["attune"]["ops_per_sec"]
                for rep in reps.values()
                if e in rep and "attune" in rep
            ]
            per_cpu = statistics.median(r["ops"] / r["cpu_seconds"] for r in runs)
            hk = [r["settings"].get("hot_key_cache") for r in runs]
            rates = [h["hits"] / max(1, h["hits"] + h["misses"]) for h in hk if h]
            rate = f"{statistics.median(rates):.0%}" if rates else "-"
            ratio = f"{statistics.median(ratios):.2f}" if ratios else "-"
            print(f"| {dist} | {e} | {ops:,.0f} | {ratio} | {per_cpu:,.0f} | {rate} |")


if __name__ == "__main__":
    main()

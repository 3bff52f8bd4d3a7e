#!/usr/bin/env python3
"""Table of the block-cache policy comparison (docs/symbiosis.md, "S3-FIFO in the engine").

Reads attune-bench ycsb rows (benches/cache/block_cache_policy.sh) and prints, per request
distribution, workload and policy: the median throughput over the repeats with its range,
the median block-cache hit ratio of the phase, the median p99 latency, and S3-FIFO's
throughput and hit ratio relative to LRU's.
"""

import json
import statistics
import sys


def main(path):
    with open(path) as f:
        rows = [json.loads(line) for line in f if line.strip()]
    cells = {}
    for r in rows:
        if r.get("workload") == "load":
            continue
        policy = r["engine"].split("block_cache_policy=")[-1]
        e = r["engine_stats"]
        lookups = e["block_cache_hits"] + e["block_cache_misses"]
        hit = e["block_cache_hits"] / lookups if lookups else 0.0
        key = (r["params"]["distribution"], r["workload"], policy)
        cells.setdefault(key, []).append((r["ops_per_sec"], hit, r["latency_us"]["p99"]))
    print(
        "| distribution | workload | policy | repeats | kops/s median [min, max] "
        "| block-cache hit ratio | p99 µs | vs LRU: throughput, hit ratio |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for key in sorted(cells):
        dist, wl, policy = key
        v = cells[key]
        ops = [x[0] for x in v]
        med = statistics.median(ops)
        hit = statistics.median(x[1] for x in v)
        p99 = statistics.median(x[2] for x in v)
        rel = ""
        base = cells.get((dist, wl, "lru"))
        if policy != "lru" and base:
            b_ops = statistics.median(x[0] for x in base)
            b_hit = statistics.median(x[1] for x in base)
            rel = f"{med / b_ops:.3f}×, {hit - b_hit:+.3f}"
        print(
            f"| {dist} | {wl.upper()} | {policy} | {len(v)} "
            f"| {med / 1e3:.1f} [{min(ops) / 1e3:.1f}, {max(ops) / 1e3:.1f}] "
            f"| {hit:.3f} | {p99:.1f} | {rel} |"
        )


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: block_cache_policy_report.py ROWS.jsonl")
    main(sys.argv[1])

"""RocksDB against Attune at the same budget on the engine sweep's cells.

Reads benches/results/cache-kv-vs-rocksdb.jsonl (attune-bench YCSB rows written by
benches/cache/kv_rocksdb_sweep.sh, each with the cell's `ratio`) and prints one markdown row per
cell (compression, pattern, M/D_u): YCSB C reads per second of each engine and the ratios of the
two Attune layouts (adaptive sizing) over RocksDB with all of M as block cache and with 50/50.
Wall-clock throughput, engines one after another on a shared machine; with `--repeat N` rows
(interleaved repeats) the median of each engine's runs is used and `n` says how many. The load
average of the cell's first Attune row is printed with it.

Usage: python3 benches/cache/kv_rocksdb_report.py [--file PATH]
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path

ENGINES = {
    "kernel": lambda e: e.startswith("attune:") and "cache_layout=kernel" in e,
    "user": lambda e: e.startswith("attune:") and "cache_layout=user" in e,
    "rocks_m": lambda e: e == "rocksdb:cache_size=32MiB",
    "rocks_half": lambda e: e == "rocksdb:cache_size=16MiB",
}


def kind(engine: str) -> str | None:
    for k, f in ENGINES.items():
        if f(engine):
            return k
    return None


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--file", default="benches/results/cache-kv-vs-rocksdb.jsonl")
    a = ap.parse_args()
    rows = [json.loads(x) for x in Path(a.file).read_text().splitlines() if x.strip()]
    cells: dict[tuple[str, str, float], dict[str, list[dict]]] = {}
    for r in rows:
        if r.get("workload") != "c":
            continue
        k = kind(r["engine"])
        if k is None:
            continue
        p = r.get("params") or {}
        key = (p.get("compression", "?"), p.get("distribution", "?"), r["ratio"])
        cells.setdefault(key, {}).setdefault(k, []).append(r)
    print(
        "| comp | pattern | M/D_u | n | load 1m | Attune kernel K/s (M_a MiB) | Attune user K/s "
        "(M_a MiB) | RocksDB 32 MiB K/s | RocksDB 16 MiB K/s | kernel / Rocks M | "
        "kernel / Rocks 50/50 | user / Rocks M | user / Rocks 50/50 |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    ratios: dict[str, list[float]] = {}
    for key in sorted(cells):
        c = cells[key]
        if not all(k in c for k in ENGINES):
            continue
        ops = {k: statistics.median(x["ops_per_sec"] for x in c[k]) for k in ENGINES}
        runs = min(len(c[k]) for k in ENGINES)

        def m_a(k: str, c: dict = c) -> str:
            bs = [
                ((x.get("settings") or {}).get("cache_tiers") or {}).get("app_bytes") for x in c[k]
            ]
            bs = [b for b in bs if b is not None]
            return "?" if not bs else "/".join(f"{b / 2**20:.0f}" for b in bs)

        rs = {
            "kernel/M": ops["kernel"] / ops["rocks_m"],
            "kernel/half": ops["kernel"] / ops["rocks_half"],
            "user/M": ops["user"] / ops["rocks_m"],
            "user/half": ops["user"] / ops["rocks_half"],
        }
        for n, v in rs.items():
            ratios.setdefault(n, []).append(v)
        load = (c["kernel"][0].get("machine") or {}).get("loadavg_1m", "?")
        print(
            f"| {key[0]} | {key[1]} | {key[2]} | {runs} | {load} | {ops['kernel'] / 1e3:.1f} "
            f"({m_a('kernel')}) | {ops['user'] / 1e3:.1f} ({m_a('user')}) | "
            f"{ops['rocks_m'] / 1e3:.1f} | {ops['rocks_half'] / 1e3:.1f} | "
            f"{rs['kernel/M']:.2f} | {rs['kernel/half']:.2f} | {rs['user/M']:.2f} | "
            f"{rs['user/half']:.2f} |"
        )
    print()
    for n, v in ratios.items():
        gm = statistics.geometric_mean(v)
        print(f"- {n}: {len(v)} cells, geometric mean {gm:.2f}, min {min(v):.2f}, max {max(v):.2f}")


if __name__ == "__main__":
    main()

"""Symbiosis on the kernel layout: adaptive against its own static splits, RocksDB and LevelDB.

Reads the YCSB rows written by benches/cache/kv_kernel_sweep.sh (one file or several, each row
with the cell's `ratio`) and prints one markdown row per cell (pattern, M/D_u): YCSB C reads per
second of Attune adaptive (wall time less the client thread's waits for a CPU, which other
processes on the shared machine cause: `ops_per_sec_unqueued`; the wall-clock ratio to the best
static split is printed beside it), the split it ended at, its throughput over the best of its three static
splits (M_a = 1 MiB, M/2, M), over RocksDB (32 MiB block cache) and over LevelDB (8 MiB), the
p99 read latency of adaptive and of the best static, and the last round's predicted H_k of the
split kept beside the H_k measured since open. Rows of adaptive with the start prior off
(`cache_start_prior=false`: the block cache starts at the minimum, as in the paper) add a column
with its throughput over the same best static split. The median ratio of the round's predicted L_e to
the last window's modelled L_e is printed after the table (the two use the costs of their time:
the round's may be the start-up probe's, the window's the live medians). Engines run one after another in one
process per engine and cell; with several runs of an engine in a cell (`--repeat`, or several
files) each engine's median run is used and `n` says how many. A summary of the target
(adaptive >= 0.97x the best static in every cell, >= 1.3x RocksDB) follows the table.

Usage: python3 benches/cache/kv_kernel_report.py FILE [FILE ...]
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
from pathlib import Path

PATTERNS = {
    "uniform": "uniform",
    "scrambled:0.99": "zipf",
    "hotspot:0.3:0.7": "hot30",
    "hotspot:0.2:0.8": "hot20",
    "hotspot:0.1:0.9": "hot10",
}


def kind(engine: str) -> str | None:
    if engine.startswith("attune:") and "cache_layout=kernel" in engine:
        sizing = engine.split("cache_sizing=")[-1].split(";")[0]
        if sizing != "adaptive":
            return f"static {sizing}"
        return "prior off" if "cache_start_prior=false" in engine else "adaptive"
    if engine.startswith("rocksdb"):
        return "rocksdb"
    if engine.startswith("leveldb"):
        return "leveldb"
    return None


def tput(r: dict) -> float:
    """Reads per second less the client's waits for a CPU (`ops_per_sec_unqueued`), or the
    wall-clock throughput for rows written before the harness recorded the waits."""
    return r.get("ops_per_sec_unqueued") or r["ops_per_sec"]


def median_row(rows: list[dict]) -> dict:
    """The run with the median throughput (the lower middle one for an even count)."""
    ranked = sorted(rows, key=tput)
    return ranked[(len(ranked) - 1) // 2]


def geomean(xs: list[float]) -> float:
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else float("nan")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("files", nargs="+")
    a = ap.parse_args()
    cells: dict[tuple[float, str], dict[str, list[dict]]] = {}
    for f in a.files:
        for line in Path(f).read_text().splitlines():
            if not line.strip():
                continue
            r = json.loads(line)
            k = kind(r.get("engine", ""))
            if r.get("workload") != "c" or k is None:
                continue
            p = r.get("params") or {}
            key = (r["ratio"], PATTERNS.get(p.get("distribution"), p.get("distribution")))
            cells.setdefault(key, {}).setdefault(k, []).append(r)
    print(
        "| M/D_u | pattern | n | adaptive K/s | M_a MiB | best static | adaptive / best static "
        "| (wall clock) | / RocksDB | / LevelDB | p99 µs adaptive / best static "
        "| H_k predicted / measured | prior off / best static |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    over_best, over_rocks, over_level, errs, off_best = [], [], [], [], []
    order = list(PATTERNS.values())
    for key in sorted(cells, key=lambda k: (k[0], order.index(k[1]) if k[1] in order else 9)):
        c = {k: median_row(v) for k, v in cells[key].items()}
        statics = {k: r for k, r in c.items() if k.startswith("static")}
        if "adaptive" not in c or not statics:
            continue
        ad = c["adaptive"]
        best_k = max(statics, key=lambda k: tput(statics[k]))
        best = statics[best_k]
        t = (ad.get("settings") or {}).get("cache_tiers") or {}
        ratio_best = tput(ad) / tput(best)
        wall_best = ad["ops_per_sec"] / max(r["ops_per_sec"] for r in statics.values())
        over_best.append(ratio_best)
        cols = []
        for peer, acc in (("rocksdb", over_rocks), ("leveldb", over_level)):
            if peer in c:
                x = tput(ad) / tput(c[peer])
                acc.append(x)
                cols.append(f"{x:.2f}")
            else:
                cols.append("–")
        pred, model = t.get("le_predicted_ns"), t.get("le_model_ns")
        if pred and model:
            errs.append(pred / model)
        hk = "–"
        for cand in t.get("last_round") or []:
            if cand[0] == t.get("app_bytes") and t.get("h_k") is not None:
                hk = f"{cand[2]:.2f} / {t['h_k']:.2f}"
        off = "–"
        if "prior off" in c:
            off_best.append(tput(c["prior off"]) / tput(best))
            off = f"{off_best[-1]:.3f}"
        n = min(len(v) for v in cells[key].values())
        p99 = f"{ad['latency_us']['p99']:.1f} / {best['latency_us']['p99']:.1f}"
        print(
            f"| {key[0]} | {key[1]} | {n} | {tput(ad) / 1000:.0f} | "
            f"{(t.get('app_bytes') or 0) >> 20} | {best_k.split()[1]} | {ratio_best:.3f} | "
            f"{wall_best:.3f} | {cols[0]} | {cols[1]} | {p99} | {hk} | {off} |"
        )
    if over_best:
        ok = sum(1 for x in over_best if x >= 0.97)
        print()
        print(
            f"Adaptive >= 0.97x the best static split in {ok} of {len(over_best)} cells "
            f"(min {min(over_best):.3f}, geometric mean {geomean(over_best):.3f})."
        )
    if off_best:
        ok = sum(1 for x in off_best if x >= 0.97)
        print(
            f"Start prior off: >= 0.97x the best static split in {ok} of {len(off_best)} cells "
            f"(min {min(off_best):.3f}, geometric mean {geomean(off_best):.3f})."
        )
    if over_rocks:
        ok = sum(1 for x in over_rocks if x >= 1.3)
        print(
            f"Over RocksDB: geometric mean {geomean(over_rocks):.2f}x "
            f"(min {min(over_rocks):.2f}, >= 1.3x in {ok} of {len(over_rocks)} cells)."
        )
    if over_level:
        print(
            f"Over LevelDB: geometric mean {geomean(over_level):.2f}x "
            f"(min {min(over_level):.2f}, max {max(over_level):.2f})."
        )
    if errs:
        print(
            f"Predicted over modelled L_e at the adopted split: median {statistics.median(errs):.2f} "
            f"(range {min(errs):.2f}-{max(errs):.2f})."
        )


if __name__ == "__main__":
    main()

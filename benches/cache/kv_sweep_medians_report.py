"""Median tables of engine sweep cells from `attune-bench cache-kv sweep` rows (docs/symbiosis.md).

Groups rows by (binary, compression, pattern, M/D_u) -- the binary is the commit it was built
from (`machine.git_commit`; older rows: the first word of `command`), so interleaved
before/after runs (benches/cache/kv_sweep_cells_ab.sh) stay apart -- and prints one line per group
with medians over its repeats. The ratio is the sweep's (kv_sweep_report.py): latency per read
= base CPU (median over the cell's configurations of CPU per read minus application misses x
C_a) + the configuration's L_e from its measured hit ratios; best static / adaptive over the
static splits minimum, M/2 and M (> 1 favours Symbiosis). "CPU-measured" is the tool's own
ratio on thread CPU time + device reads x C_k, noisier on a loaded machine. Also: M_a adopted
per repeat, the round's predicted L_e at the adopted split and at the best static split
against the measured ones, the second-tier footprint the round used, load averages.

Usage: python3 benches/cache/kv_sweep_medians_report.py FILE [FILE ...]
"""

from __future__ import annotations

import argparse
import json
import statistics
from collections import defaultdict
from pathlib import Path

STATIC = ("minimum", "M/2", "M")


def binary(r: dict) -> str:
    """Which build measured a row: its commit, or (rows from before the commit was recorded)
    the binary named first in its command."""
    commit = (r.get("machine") or {}).get("git_commit")
    return commit[:12] if commit and commit != "unknown" else r["command"].split()[0]


def base_ns(r: dict) -> float:
    ca = r["c_a_ns"]
    return statistics.median(
        c["measured"]["cpu_ns_per_read"]
        - (1 - c["measured"]["h_a"]) * c["measured"]["block_reads_per_read"] * ca
        for c in r["configs"]
    )


def cell(r: dict) -> dict:
    b = base_ns(r)
    les = [c["measured"]["le_ns"] * c["measured"]["block_reads_per_read"] for c in r["configs"]]
    lat = [b + x for x in les]
    ad = r["configs"][0]
    k = min(range(1, 4), key=lambda i: lat[i])
    best_bytes = r["configs"][k]["final_app_bytes"]
    pred = {a: le for a, _h_a, _h_k, le in ad.get("last_round") or []}
    fp = [x.get("second_footprint_bytes") for x in ad.get("round_log", [])]
    return {
        "ratio": min(lat[1:4]) / lat[0],
        "worse_end": max(lat[1], lat[3]) / lat[0],
        "over_m": lat[3] / lat[0],
        "cpu_ratio": r["adaptive_over_best_static"],
        "m_a": ad["final_app_bytes"] >> 20,
        "best": STATIC[k - 1],
        "le_ad": les[0],
        "le_best": les[k],
        "pred_ad": pred.get(ad["final_app_bytes"]),
        "pred_best": pred.get(best_bytes),
        "footprint": fp[0] if fp else None,
        "load": float(r["machine"]["loadavg_1m"]),
        "warm": ad["warmup_reads"],
    }


def fmt(x: float | None) -> str:
    return "-" if x is None else f"{x:.0f}"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("files", nargs="+")
    a = ap.parse_args()
    groups: dict[tuple, list[dict]] = defaultdict(list)
    for f in a.files:
        for line in Path(f).read_text().splitlines():
            if not line.strip():
                continue
            r = json.loads(line)
            if r.get("bench") != "cache-kv-sweep":
                continue
            key = (binary(r), r["compression"], r["pattern"], r["ratio"])
            groups[key].append(cell(r))
    print(
        "| binary | comp | pattern | M/D_u | n | load 1m | M_a adopted MiB (per repeat) | "
        "best static / adaptive, median (min) | CPU-measured, median | worse end / adaptive | "
        "M / adaptive | L_e adaptive: predicted / measured | best static split: L_e "
        "predicted / measured | first round's footprint (MB) |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    summary: dict[str, list[tuple[float, float, float]]] = defaultdict(list)
    for key in sorted(groups):
        cs = groups[key]
        med = statistics.median
        ratio = med(c["ratio"] for c in cs)
        summary[key[0]].append(
            (ratio, med(c["worse_end"] for c in cs), med(c["over_m"] for c in cs))
        )
        loads = [c["load"] for c in cs]
        fps = {c["footprint"] for c in cs}
        fp = (
            "-"
            if fps == {None}
            else "/".join(
                "-" if x is None else f"{x / 1e6:.2f}" for x in sorted(fps, key=lambda v: v or 0)
            )
        )
        print(
            f"| {key[0]} | {key[1]} | {key[2]} | {key[3]} | {len(cs)} | "
            f"{min(loads):.1f}-{max(loads):.1f} | {'/'.join(str(c['m_a']) for c in cs)} | "
            f"{ratio:.3f} ({min(c['ratio'] for c in cs):.3f}) | "
            f"{med(c['cpu_ratio'] for c in cs):.3f} | {med(c['worse_end'] for c in cs):.2f} | "
            f"{med(c['over_m'] for c in cs):.2f} | "
            f"{fmt(cs[-1]['pred_ad'])} / {med(c['le_ad'] for c in cs):.0f} | "
            f"{cs[-1]['best']}: {fmt(cs[-1]['pred_best'])} / "
            f"{med(c['le_best'] for c in cs):.0f} | {fp} |"
        )
    print()
    for b, xs in summary.items():
        r = [x[0] for x in xs]
        print(
            f"- {b}: {len(xs)} cells; best static / adaptive (medians) min {min(r):.3f}, mean "
            f"{statistics.mean(r):.3f}, cells >= 0.97: {sum(x >= 0.97 for x in r)}; worse end "
            f"/ adaptive mean {statistics.mean(x[1] for x in xs):.2f}; M / adaptive mean "
            f"{statistics.mean(x[2] for x in xs):.2f}"
        )


if __name__ == "__main__":
    main()

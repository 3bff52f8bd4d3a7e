"""Tables for docs/symbiosis.md ("Engine benchmark") from benches/results/cache-kv.jsonl.

Usage: python3 benches/cache/kv_report.py [FILE]. Prints one markdown table per access pattern
(read phase `c` only) and the ratios of adaptive sizing against the static splits of its layout.
With `--repeat N` rows, each engine's row is the repeat with the median throughput, and the
ratios use medians.
"""

from __future__ import annotations

import json
import sys
from collections import defaultdict

MIB = 1 << 20


def label(engine: str) -> tuple[str, str]:
    """(layout or engine, sizing) from an engine spec."""
    name, _, spec = engine.partition(":")
    kv = dict(p.split("=", 1) for p in spec.split(";") if "=" in p)
    if name == "rocksdb":
        return "rocksdb", f"cache {kv.get('cache_size', 'default')}"
    return kv.get("cache_layout", "kernel"), kv.get("cache_sizing", "adaptive")


def fmt(x, nd=0):
    return "-" if x is None else f"{x:,.{nd}f}"


def main(path: str) -> None:
    by_dist: dict[str, list[dict]] = defaultdict(list)
    with open(path) as f:
        for line in f:
            r = json.loads(line)
            if r["workload"] == "c":
                by_dist[r["params"]["distribution"]].append(r)
    for dist, all_rows in by_dist.items():
        groups: dict[str, list[dict]] = defaultdict(list)
        for r in all_rows:
            groups[r["engine"]].append(r)
        rows = []
        for g in groups.values():
            g.sort(key=lambda r: r["ops_per_sec"])
            rows.append(g[len(g) // 2])
        reps = max(len(g) for g in groups.values())
        print(f"\n#### Reads: {dist} (median of {reps} interleaved repeats)\n")
        print(
            "| engine | sizing | ops/s | p50 µs | p99 µs | final M_a MiB | H_a | H_k | "
            "L_e model ns | L_e measured ns | L_e predicted ns | rounds / adopted |"
        )
        print("|---|---|---|---|---|---|---|---|---|---|---|---|")
        ops: dict[tuple[str, str], float] = {}
        for r in rows:
            layout, sizing = label(r["engine"])
            ops[(layout, sizing)] = r["ops_per_sec"]
            t = r["settings"].get("cache_tiers") or {}
            m_a = t.get("app_bytes")
            print(
                f"| {layout} | {sizing} | {fmt(r['ops_per_sec'])} | "
                f"{r['latency_us']['p50']:.1f} | {r['latency_us']['p99']:.1f} | "
                f"{fmt(m_a / MIB if m_a else None, 1)} | {fmt(t.get('h_a'), 3)} | "
                f"{fmt(t.get('h_k'), 3)} | {fmt(t.get('le_model_ns'))} | "
                f"{fmt(t.get('le_measured_ns'))} | {fmt(t.get('le_predicted_ns'))} | "
                f"{t.get('rounds', '-')} / {t.get('adoptions', '-')} |"
            )
        print()
        for layout in ("user", "kernel"):
            ad = ops.get((layout, "adaptive"))
            statics = {s: v for (lay, s), v in ops.items() if lay == layout and s != "adaptive"}
            if not ad or not statics:
                continue
            best = max(statics.values())
            worst = min(statics.values())
            print(
                f"- {layout}: adaptive / best static = {ad / best:.2f}, "
                f"adaptive / worst static = {ad / worst:.2f} "
                f"(statics: {', '.join(f'{s} {v:,.0f}' for s, v in statics.items())})"
            )
        for r in rows:
            layout, sizing = label(r["engine"])
            tl = (r["settings"].get("cache_tiers") or {}).get("timeline") or []
            if sizing != "adaptive" or not tl:
                continue
            steps, last = [], None
            for w in tl:
                if w["app_bytes"] != last:
                    steps.append(f"{w['ms'] / 1000:.1f}s: {w['app_bytes'] / MIB:.0f} MiB")
                    last = w["app_bytes"]
            first, end = tl[0], tl[-1]
            t = r["settings"]["cache_tiers"]
            pred, model = t.get("le_predicted_ns"), t.get("le_model_ns")
            if pred is not None and model:
                print(
                    f"- {layout} adaptive simulator accuracy: predicted L_e {pred:,.0f} ns vs "
                    f"measured (model of observed hit ratios) {model:,.0f} ns at the M_a in use "
                    f"({abs(pred - model) / model:.1%}); ghost memory peak "
                    f"{t['ghost_bytes_peak'] / 1024:,.0f} KiB = "
                    f"{t['ghost_bytes_peak'] / t['budget_bytes']:.2%} of M; "
                    f"dropped accesses {t['accesses_dropped']}"
                )
            print(
                f"- {layout} adaptive timeline ({len(tl)} windows of the read phase, "
                f"L_e model {first['le_model_ns']:,.0f} -> {end['le_model_ns']:,.0f} ns): "
                + ", ".join(steps)
            )
        rocks = [v for (lay, _), v in ops.items() if lay == "rocksdb"]
        for layout in ("user", "kernel"):
            ad = ops.get((layout, "adaptive"))
            if ad and rocks:
                print(f"- {layout} adaptive / best RocksDB = {ad / max(rocks):.2f}")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "benches/results/cache-kv.jsonl")

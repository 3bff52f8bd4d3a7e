"""Tables for docs/symbiosis.md from attune-cache-kv rows (issue 7, engine level).

Reads benches/results/cache-kv-sweep.jsonl (`sweep` rows), cache-kv-dynamic.jsonl and
cache-kv-overhead.jsonl and prints markdown. Latency per read is the engine's thread CPU time per
read plus C_k per real device read (MemEnv; see crates/attune-cache-kv). Ratios > 1 favour
adaptive sizing.

Usage: python3 benches/cache/kv_sweep_report.py [--dir benches/results]
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path


def rows(path: Path) -> list[dict]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def mib(b: float) -> str:
    return f"{b / 2**20:.0f}"


def sweep(path: Path) -> None:
    rs = [r for r in rows(path) if r.get("bench") == "cache-kv-sweep"]
    if not rs:
        return
    print(
        "| comp (α) | pattern | M/D_u | adaptive ns (M_a MiB) | min | M/2 | M | "
        "best static / adaptive | worse end / adaptive | M (= default) / adaptive | "
        "pred. vs measured L_e at adopted | ghost peak % of M |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    best, worse, over_m = [], [], []
    for r in sorted(rs, key=lambda r: (r["compression"], r["pattern"], r["ratio"])):
        cfg = {c["sizing"]: c for c in r["configs"]}
        ad = cfg["adaptive"]
        lat = [c["measured"]["latency_ns"] for c in r["configs"]]
        pred = ad.get("le_predicted_ns")
        meas = ad["measured"]["le_ns"]
        err = "-" if pred is None else f"{pred:.0f} / {meas:.0f}"
        ghost = ad["ghost_bytes_peak"] / r["memory_bytes"] * 100
        best.append(r["adaptive_over_best_static"])
        worse.append(r["worse_end_over_adaptive"])
        over_m.append(r["m_over_adaptive"])
        print(
            f"| {r['compression']} ({r['alpha']:.2f}) | {r['pattern']} | {r['ratio']} | "
            f"{lat[0]:.0f} ({mib(ad['final_app_bytes'])}) | {lat[1]:.0f} | {lat[2]:.0f} | "
            f"{lat[3]:.0f} | {r['adaptive_over_best_static']:.3f} | "
            f"{r['worse_end_over_adaptive']:.2f} | {r['m_over_adaptive']:.2f} | {err} | "
            f"{ghost:.3f} |"
        )
    n = len(best)
    print()
    print(
        f"cells: {n}; best static / adaptive: min {min(best):.3f}, mean "
        f"{statistics.mean(best):.3f}, cells >= 0.97: {sum(b >= 0.97 for b in best)}; "
        f"worse end / adaptive: mean {statistics.mean(worse):.2f}, max {max(worse):.2f}; "
        f"M (default) / adaptive: mean {statistics.mean(over_m):.2f}"
    )
    print()


def dynamic(path: Path) -> None:
    rs = [r for r in rows(path) if r.get("bench") == "cache-kv-dynamic"]
    if not rs:
        return
    print(
        "| sizing | final M_a MiB | converged after switch (s) | p50/p95/p99 µs phase 1 | "
        "during adaptation | phase 2 after | rounds / adoptions |"
    )
    print("|---|---|---|---|---|---|---|")

    def pct(p: dict | None) -> str:
        if not p:
            return "-"
        return f"{p['p50'] / 1e3:.1f} / {p['p95'] / 1e3:.1f} / {p['p99'] / 1e3:.1f}"

    for r in rs:
        c = r["controller"][0]
        conv = r["converged_ms"]
        conv_s = "-" if conv is None else f"{conv / 1e3:.1f}"
        print(
            f"| {r['sizing']} | {mib(r['final_app_bytes'])} | {conv_s} | "
            f"{pct(r['latency_phase1'])} | {pct(r['latency_adapting'])} | "
            f"{pct(r['latency_phase2_after'])} | {c['rounds']} / {c['adoptions']} |"
        )
    print()


def overhead(path: Path) -> None:
    rs = [r for r in rows(path) if r.get("bench") == "cache-kv-overhead"]
    for r in rs:
        m = r["median_process_cpu_ns_per_read"]
        print(
            f"- {r['pattern']} M/D_u {r['ratio']} {r['compression']}, R = 1/{r['sample_inv']}, "
            f"{len(r['repeats'])} interleaved repeats, median process CPU per read: static "
            f"{m['static']:.0f} ns, adaptive outside rounds {m['adaptive_outside']:.0f} ns "
            f"({r['overhead_outside'] * 100:+.1f} %), adaptive during the first round "
            f"{m['adaptive_in_round']:.0f} ns ({r['overhead_in_round'] * 100:+.1f} %)"
        )
    print()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dir", default="benches/results", type=Path)
    a = ap.parse_args()
    sweep(a.dir / "cache-kv-sweep.jsonl")
    dynamic(a.dir / "cache-kv-dynamic.jsonl")
    overhead(a.dir / "cache-kv-overhead.jsonl")


if __name__ == "__main__":
    main()

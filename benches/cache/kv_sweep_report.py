"""Tables for docs/symbiosis.md from `attune-bench cache-kv` rows (engine level).

Reads benches/results/cache-kv-sweep-zstd.jsonl (`sweep` rows; `--sweep` names another),
cache-kv-convergence.jsonl (`dynamic` rows) and cache-kv-overhead.jsonl and prints markdown. Latency
per read is the engine's thread CPU time per read plus C_k per real device read (MemEnv; see
crates/attune-bench/src/cache_kv.rs). Ratios > 1 favour adaptive sizing.

Usage: python3 benches/cache/kv_sweep_report.py [--dir benches/results] [--sweep FILE]
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


def base_ns(r: dict) -> float:
    """CPU of a read apart from its misses: median over the cell's configurations of
    (CPU per read − application misses per read × C_a). MemEnv device reads cost about C_a of
    CPU too (copy + decompress), so every application miss is charged C_a here."""
    ca = r["c_a_ns"]
    return statistics.median(
        c["measured"]["cpu_ns_per_read"]
        - (1 - c["measured"]["h_a"]) * c["measured"]["block_reads_per_read"] * ca
        for c in r["configs"]
    )


def sweep(path: Path) -> None:
    rs = [r for r in rows(path) if r.get("bench") == "cache-kv-sweep"]
    if not rs:
        return
    print(
        "| comp (α) | pattern | M/D_u | C_a / C_k µs | base ns | L_e adaptive (M_a MiB) | "
        "L_e min | L_e M/2 | L_e M | best static / adaptive | worse end / adaptive | "
        "M (= default) / adaptive | CPU-measured best static / adaptive | "
        "predicted L_e at adopted | ghost peak % of M |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    best, worse, over_m, meas_best = [], [], [], []
    for r in sorted(rs, key=lambda r: (r["compression"], r["pattern"], r["ratio"])):
        ad = r["configs"][0]
        b = base_ns(r)
        les = [c["measured"]["le_ns"] * c["measured"]["block_reads_per_read"] for c in r["configs"]]
        lat = [b + x for x in les]
        bst = min(lat[1:4]) / lat[0]
        wrs = max(lat[1], lat[3]) / lat[0]
        om = lat[3] / lat[0]
        best.append(bst)
        worse.append(wrs)
        over_m.append(om)
        meas_best.append(r["adaptive_over_best_static"])
        pred = ad.get("le_predicted_ns")
        pred_s = "-" if pred is None else f"{pred:.0f}"
        ghost = ad["ghost_bytes_peak"] / r["memory_bytes"] * 100
        print(
            f"| {r['compression']} ({r['alpha']:.2f}) | {r['pattern']} | {r['ratio']} | "
            f"{r['c_a_ns'] / 1e3:.1f} / {r['c_k_ns'] / 1e3:.0f} | {b:.0f} | "
            f"{les[0]:.0f} ({mib(ad['final_app_bytes'])}) | {les[1]:.0f} | {les[2]:.0f} | "
            f"{les[3]:.0f} | {bst:.3f} | {wrs:.2f} | {om:.2f} | "
            f"{r['adaptive_over_best_static']:.3f} | {pred_s} | {ghost:.3f} |"
        )
    print()
    print(
        f"cells: {len(best)}; on base + L_e: best static / adaptive min {min(best):.3f}, mean "
        f"{statistics.mean(best):.3f}, cells >= 0.97: {sum(x >= 0.97 for x in best)}; worse end "
        f"/ adaptive mean {statistics.mean(worse):.2f}, max {max(worse):.2f}; M (default) / "
        f"adaptive mean {statistics.mean(over_m):.2f}. CPU-measured best static / adaptive: min "
        f"{min(meas_best):.3f}, mean {statistics.mean(meas_best):.3f}"
    )
    print()


def dynamic(path: Path) -> None:
    rs = [r for r in rows(path) if r.get("bench") == "cache-kv-dynamic"]
    if not rs:
        return
    print(
        "| scenario (M/D_u, comp) | sizing | final M_a MiB | settled after switch (s) | "
        "p50/p95/p99 µs phase 1 | until settled | phase 2 after | rounds / adoptions / reverts |"
    )
    print("|---|---|---|---|---|---|---|---|")

    def pct(p: dict | None) -> str:
        if not p:
            return "-"
        return f"{p['p50'] / 1e3:.1f} / {p['p95'] / 1e3:.1f} / {p['p99'] / 1e3:.1f}"

    for r in rs:
        c = r["controller"][0]
        conv = r["converged_ms"]
        conv_s = "-" if conv is None else f"{conv / 1e3:.1f}"
        print(
            f"| {r['scenario']} ({r['ratio']}, {r['compression']}) | "
            f"{r['sizing']} | {mib(r['final_app_bytes'])} | {conv_s} | "
            f"{pct(r['latency_phase1'])} | {pct(r['latency_adapting'])} | "
            f"{pct(r['latency_phase2_after'])} | {c['rounds']} / {c['adoptions']} / "
            f"{c['reverts']} |"
        )
    print()


def overhead(path: Path) -> None:
    rs = [r for r in rows(path) if r.get("bench") == "cache-kv-overhead"]
    for r in rs:
        key = "process_cpu_ns_per_read"
        ins, outs = [], []
        for x in r["repeats"]:
            base = x["static_same_split"][key]
            ins.append(x["adaptive_in_round"][key] / base - 1)
            outs.append(x["adaptive_outside"][key] / base - 1)
        per = ", ".join(
            f"{x['static_same_split'][key]:.0f} / {x['adaptive_outside'][key]:.0f} / "
            f"{x['adaptive_in_round'][key]:.0f}"
            for x in r["repeats"]
        )
        peak = max(x["ghost_bytes_peak"] for x in r["repeats"])
        print(
            f"- {r['pattern']} M/D_u {r['ratio']} {r['compression']}, R = 1/{r['sample_inv']}: "
            f"process CPU ns per read, static / adaptive outside rounds / adaptive during the "
            f"first round, per repeat: {per}; median overhead outside rounds "
            f"{statistics.median(outs) * 100:+.1f} %, during a round "
            f"{statistics.median(ins) * 100:+.1f} % (per-repeat spread "
            f"{min(ins) * 100:+.1f} … {max(ins) * 100:+.1f} %); ghost peak {peak} B = "
            f"{peak / r['memory_bytes'] * 100:.3f} % of M"
        )
    print()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dir", default="benches/results", type=Path)
    ap.add_argument("--sweep", default="cache-kv-sweep-zstd.jsonl", help="sweep rows file in --dir")
    ap.add_argument(
        "--overhead", default="cache-kv-overhead.jsonl", help="overhead rows file in --dir"
    )
    a = ap.parse_args()
    sweep(a.dir / a.sweep)
    dynamic(a.dir / "cache-kv-convergence.jsonl")
    overhead(a.dir / a.overhead)


if __name__ == "__main__":
    main()

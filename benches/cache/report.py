"""Markdown tables from benches/results/cache.jsonl (rows written by `attune-bench cache-sim`).

Usage: python3 benches/cache/report.py [FILE ...]
(default: benches/results/cache.jsonl and benches/results/cache-ablations.jsonl)

Reformatting only: every number printed is a field of a row, or a ratio or mean of such fields.
"""

from __future__ import annotations

import json
import statistics
import sys
from collections import defaultdict


def load(path: str) -> list[dict]:
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def ratio(num: float, den: float, hit: float = 0.0) -> float:
    """(num + hit) / (den + hit): latency ratio including the cost of an application hit."""
    if num + hit < 1e-9 and den + hit < 1e-9:
        return 1.0
    return (num + hit) / max(den + hit, 1e-9)


def sweep(rows: list[dict]) -> None:
    groups: dict[tuple, list[dict]] = defaultdict(list)
    for r in rows:
        groups[(r["alpha"], r["costs"])].append(r)
    for (alpha, costs), rs in sorted(groups.items(), key=lambda kv: (-kv[0][0], kv[0][1])):
        r0 = rs[0]
        print(
            f"\n#### alpha = {alpha}, C_a = {r0['ca_ns']:.0f} ns, C_k = {r0['ck_ns']:.0f} ns "
            f"({costs}), M = {r0['memory_bytes'] >> 20} MiB, R = 1/{r0['sample_inv']}; ratios on "
            f"L_e + {r0['hit_ns']:.0f} ns (hit cost)\n"
        )
        print(
            "| pattern | M/D_u | Symbiosis L_e ns (M_a MiB) | best static (M_a MiB) | min | M/2 "
            "| M | best/Sym | worse end/Sym | sim err at adopted |"
        )
        print("|---|---|---|---|---|---|---|---|---|---|")
        h = r0["hit_ns"]
        for r in sorted(rs, key=lambda r: (r["pattern"], r["m_over_du"])):
            print(
                f"| {r['pattern']} | {r['m_over_du']:.1f} | {r['le_symbiosis_ns']:.0f} "
                f"({r['ma_symbiosis_bytes'] >> 20}) | {r['le_best_static_ns']:.0f} "
                f"({r['ma_best_static_bytes'] >> 20}) | {r['le_static_min_ns']:.0f} | "
                f"{r['le_static_half_ns']:.0f} | {r['le_static_full_ns']:.0f} | "
                f"{ratio(r['le_best_static_ns'], r['le_symbiosis_ns'], h):.3f} | "
                f"{ratio(max(r['le_static_min_ns'], r['le_static_full_ns']), r['le_symbiosis_ns'], h):.2f}"
                f" | {fmt_err(r)} |"
            )
        best = [ratio(r["le_best_static_ns"], r["le_symbiosis_ns"], h) for r in rs]
        worse = [
            ratio(max(r["le_static_min_ns"], r["le_static_full_ns"]), r["le_symbiosis_ns"], h)
            for r in rs
        ]
        half = [ratio(r["le_static_half_ns"], r["le_symbiosis_ns"], h) for r in rs]
        print(
            f"\ncells: {len(rs)}; best/Sym min {min(best):.3f}, mean {statistics.mean(best):.3f}; "
            f"cells >= 0.97: {sum(b >= 0.97 for b in best)}; worse-end/Sym mean "
            f"{statistics.mean(worse):.2f}, max {max(worse):.2f}; M/2 over Sym mean "
            f"{statistics.mean(half):.2f}; ghost peak max "
            f"{max(r['ghost_fraction_of_m'] for r in rs) * 100:.3f} % of M"
        )


def fmt_err(r: dict) -> str:
    """|predicted − measured| L_e at the adopted size, in ns and relative to L_e + hit cost."""
    pred = r.get("predicted_le_at_adopted_ns")
    if pred is None:
        return "-"
    err = abs(pred - r["le_symbiosis_ns"])
    return f"{err:.0f} ns ({err / (r['le_symbiosis_ns'] + r['hit_ns']) * 100:.1f} %)"


def simple(rows: list[dict], title: str, cols: list[str]) -> None:
    if not rows:
        return
    print(f"\n#### {title}\n")
    print("| " + " | ".join(cols) + " |")
    print("|" + "---|" * len(cols))
    for r in rows:
        cells = []
        for c in cols:
            v = r.get(c)
            cells.append(f"{v:.4g}" if isinstance(v, float) else str(v))
        print("| " + " | ".join(cells) + " |")


def main() -> None:
    paths = sys.argv[1:] or [
        "benches/results/cache.jsonl",
        "benches/results/cache-ablations.jsonl",
    ]
    rows = [r for p in paths for r in load(p)]
    by: dict[str, list[dict]] = defaultdict(list)
    for r in rows:
        by[r["bench"]].append(r)
    sweep(by["cache-sweep"])
    simple(
        by["cache-overhead"],
        "Overhead",
        [
            "pattern",
            "memory_bytes",
            "sample_inv",
            "tracker_ns_per_access",
            "round_ns_per_access",
            "two_tier_model_ns_per_access",
            "ghost_bytes_peak",
            "ghost_fraction_of_m",
        ],
    )
    simple(
        by["cache-sampling"],
        "Sampling ablation",
        [
            "pattern",
            "group_blocks",
            "sample_inv",
            "max_abs_err_h_a",
            "max_abs_err_h_k",
            "mean_rel_err_le",
            "chosen_exact_le_over_best",
            "ghost_bytes_peak",
        ],
    )
    simple(
        by["cache-reset"],
        "Reset policy",
        [
            "pattern",
            "reset_policy",
            "ma_phase1_bytes",
            "le_until_round_end_ns",
            "accesses_until_round_end",
            "le_after_ns",
            "ma_final_bytes",
        ],
    )
    simple(
        by["cache-policies"],
        "Replacement policies (miss ratio)",
        ["trace", "cache_over_data", "miss_ratio_lru", "miss_ratio_s3fifo"],
    )


if __name__ == "__main__":
    main()

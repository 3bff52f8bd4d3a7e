"""Sampling-rate ablation at engine level: predicted vs measured hit ratios.

Input: `attune-bench cache-kv ablation` rows (benches/results/cache-kv-ablation.jsonl), one per 1/R,
each with the first round's predicted H_a, H_k and L_e per candidate split and the same
candidates measured statically. Output: a PNG with three panels (H_a, H_k, L_e against M_a),
one line per 1/R and the measurement in black; and a markdown table of the errors on stdout.

Usage: python3 benches/cache/kv_ablation_plot.py ROWS.jsonl OUT.png
(the published plot: docs/symbiosis-plots/ablation-engine-zstd-zipf-0.6.png)
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt


def main() -> None:
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    rows = [json.loads(x) for x in Path(sys.argv[1]).read_text().splitlines() if x.strip()]
    rows = [r for r in rows if r.get("bench") == "cache-kv-ablation"]
    if not rows:
        sys.exit("no cache-kv-ablation rows")
    fig, ax = plt.subplots(1, 3, figsize=(12, 4))
    meas = rows[0]["measured"]
    x_m = [m["app_bytes"] / 2**20 for m in meas]
    for r in sorted(rows, key=lambda r: r["sample_inv"]):
        p = r["predicted"]
        x = [c["app_bytes"] / 2**20 for c in p]
        lab = f"R = 1/{r['sample_inv']}"
        ax[0].plot(x, [c["h_a"] for c in p], marker=".", label=lab)
        ax[1].plot(x, [c["h_k"] for c in p], marker=".", label=lab)
        ax[2].plot(x, [c["le_ns"] / 1e3 for c in p], marker=".", label=lab)
    for i, key in enumerate(["h_a", "h_k"]):
        ax[i].plot(x_m, [m[key] for m in meas], "k-o", lw=2, label="measured (static)")
    ax[2].plot(x_m, [m["le_ns"] / 1e3 for m in meas], "k-o", lw=2, label="measured (static)")
    ax[0].set_ylabel("H_a")
    ax[1].set_ylabel("H_k (of application misses)")
    ax[2].set_ylabel("L_e per block read (µs)")
    for a in ax:
        a.set_xlabel("M_a (MiB)")
        a.grid(alpha=0.3)
    ax[2].legend(fontsize=7)
    r0 = rows[0]
    fig.suptitle(
        f"Sampling ablation, engine: {r0['compression']} {r0['pattern']} "
        f"M/D_u {r0['ratio']}, M = {r0['memory_bytes'] >> 20} MiB"
    )
    fig.tight_layout()
    fig.savefig(sys.argv[2], dpi=110)
    print(
        "| 1/R | round reads (M) | passes | mean abs err H_a | mean abs err H_k "
        "| mean rel err L_e | chosen M_a MiB | chosen / best measured L_e "
        "| ghost peak % of M |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for r in sorted(rows, key=lambda r: r["sample_inv"]):
        passes = ",".join(str(x["passes"]) for x in r["round_log"][:1])
        print(
            f"| {r['sample_inv']} | {r['round_reads'] / 1e6:.2f} | {passes} | "
            f"{r['mean_abs_err_h_a']:.3f} | {r['mean_abs_err_h_k']:.3f} | "
            f"{100 * r['mean_rel_err_le']:.1f} % | {r['chosen_app_bytes'] >> 20} | "
            f"{r['chosen_over_best_measured_le']:.3f} | "
            f"{100 * r['ghost_bytes_peak'] / r['memory_bytes']:.3f} |"
        )


if __name__ == "__main__":
    main()

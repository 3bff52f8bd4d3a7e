"""Plot of the engine-level dynamic run: M_a, H_a / H_k and L_e over time.

Input: the JSON file written by `attune-bench cache-kv dynamic --timeline FILE` (one object per sizing,
each with the controller's per-window timeline and the phase switch time). Output: a PNG.

Usage: python3 benches/cache/kv_dynamic_plot.py TIMELINE.json OUT.png
(the published plots: docs/symbiosis-plots/dynamic-*.png)
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
    runs = json.loads(Path(sys.argv[1]).read_text())
    fig, ax = plt.subplots(3, 1, figsize=(9, 9), sharex=True)
    for r in runs:
        tl = r["timeline"]
        t = [w["ms"] / 1e3 for w in tl]
        label = r["sizing"] if r["sizing"] == "adaptive" else f"static {int(r['sizing']) >> 20} MiB"
        style = "-" if r["sizing"] == "adaptive" else ":"
        ax[0].step(t, [w["app_bytes"] / 2**20 for w in tl], style, where="post", label=label)
        if r["sizing"] == "adaptive":
            ax[1].plot(t, [w["h_a"] for w in tl], label="H_a")
            ax[1].plot(t, [w["h_k"] for w in tl], label="H_k")
            ax[2].plot(
                t, [w["le_model_ns"] / 1e3 for w in tl], label="L_e model (window hits × costs)"
            )
            meas = [
                (x, w["le_measured_ns"]) for x, w in zip(t, tl) if w["le_measured_ns"] is not None
            ]
            ax[2].plot(
                [m[0] for m in meas],
                [m[1] / 1e3 for m in meas],
                alpha=0.6,
                label="measured miss time per block read (wall)",
            )
            pred = r["controller"][0].get("le_predicted_ns")
            if pred is not None:
                ax[2].axhline(pred / 1e3, color="grey", ls="--", label="last round's prediction")
            for a in ax:
                a.axvline(r["switch_ms"] / 1e3, color="red", lw=0.8)
        else:
            ax[2].plot(t, [w["le_model_ns"] / 1e3 for w in tl], style, label=f"L_e {label}")
    ax[0].set_ylabel("M_a (MiB)")
    ax[1].set_ylabel("hit ratio")
    ax[2].set_ylabel("µs per block read")
    ax[2].set_xlabel(f"seconds since open (red: phase switch, {runs[0]['scenario']})")
    for a in ax:
        a.legend(fontsize=7, loc="best")
        a.grid(alpha=0.3)
    r0 = runs[0]
    fig.suptitle(
        f"attune-kv user layout, M = {r0['memory_bytes'] >> 20} MiB, M/D_u = {r0['ratio']}, "
        f"{r0['compression']}: adaptive sizing over a two-phase workload"
    )
    fig.tight_layout()
    fig.savefig(sys.argv[2], dpi=110)


if __name__ == "__main__":
    main()

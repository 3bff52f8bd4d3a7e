"""Convergence table for docs/symbiosis.md from `attune-bench cache-kv dynamic` rows.

Reads benches/results/cache-kv-convergence.jsonl and the timelines in
benches/results/cache-kv-convergence/<n>.json (written by benches/cache/kv_convergence.sh) and
prints, per run, two convergence measures after the phase switch, in seconds and in block reads:

* **stable**: the dynamic tool's own measure -- from the switch to the first window in which
  the controller is stable again after having reacted (rounds, settling and all);
* **L_e settled**: from the switch to the first window from which on M_a stays at its final
  value and the model L_e stays within 10 % of the median of phase 2's last 10 windows (what a
  user sees: latency at its new level).

Rows of the old binary lack `switch_accesses` and `round_log`; the switch's block-read count is
then interpolated between the timeline windows around `switch_ms`.

Usage: python3 benches/cache/kv_convergence_report.py [--dir benches/results] [--name NAME]
       [--by-binary]
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path

SETTLE_TOLERANCE = 0.10
TAIL_WINDOWS = 10


def switch_accesses(row: dict, tl: list[dict]) -> float:
    if row.get("switch_accesses") is not None:
        return float(row["switch_accesses"])
    sw = row["switch_ms"]
    prev = None
    for w in tl:
        if w["ms"] >= sw:
            if prev is None:
                return float(w["accesses"])
            f = (sw - prev["ms"]) / max(1, w["ms"] - prev["ms"])
            return prev["accesses"] + f * (w["accesses"] - prev["accesses"])
        prev = w
    return float(tl[-1]["accesses"]) if tl else 0.0


def le_settled(row: dict, tl: list[dict]) -> tuple[float, float] | None:
    """(ms, accesses) after the switch at which L_e and M_a settled for good."""
    sw = row["switch_ms"]
    after = [w for w in tl if w["ms"] >= sw]
    if len(after) < TAIL_WINDOWS + 1:
        return None
    target = statistics.median(w["le_model_ns"] for w in after[-TAIL_WINDOWS:])
    final_app = after[-1]["app_bytes"]
    first = None
    for i in range(len(after) - 1, -1, -1):
        w = after[i]
        ok = w["app_bytes"] == final_app and abs(w["le_model_ns"] - target) <= (
            SETTLE_TOLERANCE * target
        )
        if not ok:
            break
        first = w
    if first is None:
        return None
    return first["ms"] - sw, first["accesses"] - switch_accesses(row, tl)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--dir", default="benches/results")
    ap.add_argument(
        "--name",
        default="cache-kv-convergence",
        help="rows in <dir>/<name>.jsonl, timelines in <dir>/<name>/<n>.json",
    )
    ap.add_argument(
        "--by-binary",
        action="store_true",
        help="label side-by-side rows by their binary (its commit, `machine.git_commit`; "
        "older rows: the first word of `command`)",
    )
    a = ap.parse_args()
    d = Path(a.dir)
    path = d / f"{a.name}.jsonl"
    rows = [json.loads(x) for x in path.read_text().splitlines() if x.strip()]
    tl_files = sorted((d / a.name).glob("*.json"), key=lambda p: int(p.stem))
    if len(tl_files) != len(rows):
        raise SystemExit(f"{len(rows)} rows but {len(tl_files)} timeline files")
    print(
        "| # | round | scenario | load 1m | final M_a MiB | stable after (s / M reads) "
        "| L_e settled after (s / M reads) | every round, the first at open: reads (samples, "
        "passes, stopped early) | ghost peak % of M |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    summary: dict[tuple[str, str], list[tuple[float, float, float, float]]] = {}
    for n, (row, f) in enumerate(zip(rows, tl_files), 1):
        tl = json.loads(f.read_text())[0]["timeline"]
        kind = "side by side" if "switch_accesses" in row else "pipeline (old)"
        if a.by_binary and "switch_accesses" in row:
            commit = (row.get("machine") or {}).get("git_commit")
            kind = commit[:12] if commit and commit != "unknown" else row["command"].split()[0]
        sw_acc = switch_accesses(row, tl)
        stable_ms = row.get("converged_ms")
        stable_acc = row.get("converged_accesses")
        if stable_acc is None and stable_ms is not None:
            at = [w for w in tl if w["ms"] - row["switch_ms"] == stable_ms]
            stable_acc = at[0]["accesses"] - sw_acc if at else None
        settled = le_settled(row, tl)
        ctl = row["controller"][0]
        log = ctl.get("round_log") or []
        rounds_txt = (
            ", ".join(
                f"{r['accesses'] / 1e6:.2f} M ({r['samples']}, {r['passes']}, "
                f"{'y' if r['stopped_early'] else 'n'}"
                + (f", warm-up {r['warmup_samples']}" if a.by_binary else "")
                + ")"
                for r in log
            )
            or "n/a"
        )
        s_txt = (
            f"{stable_ms / 1000:.1f} / {stable_acc / 1e6:.2f}"
            if stable_ms is not None and stable_acc is not None
            else "not within the phase"
        )
        l_txt = f"{settled[0] / 1000:.1f} / {settled[1] / 1e6:.2f}" if settled else "n/a"
        peak = 100 * ctl["ghost_bytes_peak"] / row["memory_bytes"]
        print(
            f"| {n} | {kind} | {row['scenario']} ({row['ratio']}) | "
            f"{row['machine'].get('loadavg_1m', '?')} | {row['final_app_bytes'] >> 20} | "
            f"{s_txt} | {l_txt} | {rounds_txt} | {peak:.3f} |"
        )
        if stable_ms is not None and stable_acc is not None and settled:
            summary.setdefault((kind, row["scenario"]), []).append(
                (stable_ms / 1000, stable_acc / 1e6, settled[0] / 1000, settled[1] / 1e6)
            )
    print()
    for (kind, scen), v in sorted(summary.items()):
        med = [statistics.median(x[i] for x in v) for i in range(4)]
        print(
            f"- {kind}, {scen}: median of {len(v)} -- stable after {med[0]:.1f} s / "
            f"{med[1]:.2f} M reads; L_e settled after {med[2]:.1f} s / {med[3]:.2f} M reads"
        )


if __name__ == "__main__":
    main()

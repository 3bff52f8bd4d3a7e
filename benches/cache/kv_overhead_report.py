#!/usr/bin/env python3
"""Overhead tables of adaptive cache sizing for docs/symbiosis.md.

--overhead FILE: rows of `attune-bench cache-kv overhead --mode alternating`
(benches/cache/kv_overhead_alternating.sh; bench
cache-kv-overhead-ab): per run and metric, per-read CPU of A (round held) and B (round
running), the overhead B/A - 1 and the noise floor A'/A - 1 as medians [p10, p90] over the
cycles, the extra nanoseconds per read, and the pooled ratios; then the simulation's share
of the process's CPU per read (controller extra ns / process CPU of A).
"""

import argparse
import json
import sys


def rng(s, fmt):
    return f"{fmt % s['median']} [{fmt % s['p10']}, {fmt % s['p90']}]"


def overhead(path):
    with open(path) as f:
        rows = [json.loads(line) for line in f if line.strip()]
    rows = [r for r in rows if r.get("bench") == "cache-kv-overhead-ab"]
    if not rows:
        sys.exit(f"{path}: no cache-kv-overhead-ab rows")
    print(
        "| run | comp | pattern | M/D_u | load 1m | split MiB | rounds | metric "
        "| A ns/read | B ns/read | B/A - 1 | A'/A - 1 (floor) | B - A ns/read "
        "| A' - A ns/read | pooled B/A - 1 / A'/A - 1 |"
    )
    print("|---" * 15 + "|")
    shares = []
    for i, r in enumerate(rows, 1):
        load = f"{r['loadavg_1m_start']}-{r['machine']['loadavg_1m']}"
        for m in ("process_cpu", "reader_cpu", "controller_cpu"):
            x = r[m]
            pct = "%+.2f%%"
            print(
                f"| {i} | {r['compression']} | {r['pattern']} | {r['ratio']} | {load} "
                f"| {r['settled_app_bytes'] >> 20} | {r['rounds_finished']} | {m} "
                f"| {x['per_read_ns']['A']['median']:.1f} "
                f"| {x['per_read_ns']['B']['median']:.1f} "
                f"| {rng({k: v * 100 for k, v in x['overhead_b_vs_a'].items()}, pct)} "
                f"| {rng({k: v * 100 for k, v in x['noise_a2_vs_a'].items()}, pct)} "
                f"| {rng(x['extra_ns_per_read_b_minus_a'], '%.1f')} "
                f"| {rng(x['extra_ns_per_read_a2_minus_a'], '%.1f')} "
                f"| {x['pooled_overhead'] * 100:+.2f}% / {x['pooled_noise'] * 100:+.2f}% |"
            )
        extra = r["controller_cpu"]["extra_ns_per_read_b_minus_a"]["median"]
        base = r["process_cpu"]["per_read_ns"]["A"]["median"]
        shares.append((i, r["compression"], r["pattern"], extra, base))
    print()
    for i, comp, pat, extra, base in shares:
        print(
            f"- run {i} ({comp} {pat}): the round adds {extra:.1f} ns of controller CPU per "
            f"read\n  = {extra / base * 100:.2f} % of the {base:.0f} ns the process spends per "
            f"read"
        )


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--overhead", help="rows of kv_overhead_alternating.sh")
    a = ap.parse_args()
    if a.overhead:
        overhead(a.overhead)
    else:
        ap.print_help()


if __name__ == "__main__":
    main()

"""Markdown tables for docs/learned-index.md from benches/results/learn.jsonl.

Usage: python3 crates/attune-learn/scripts/learn_report.py [benches/results/learn.jsonl]
"""

import json
import math
import sys

SETS = ["linear", "seg1", "seg10", "normal", "lognormal", "osm"]
CONE = "greedy-plr-cone"
PIVOT = "greedy-plr-pivot"


def load(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def default(r):
    """Lookup ns of the search path the model uses by default (SegmentSearch::Auto)."""
    return r["lookup_ns_model_" + r["default_search"] + "_cpu"]


def gmean(xs):
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else float("nan")


def find(rows, model, s, n, d):
    for r in rows:
        if r["model"] == model and r["keyset"] == s and r["n"] == n and r["delta"] == d:
            return r
    return None


def main():
    path = sys.argv[1] if len(sys.argv) > 1 else "benches/results/learn.jsonl"
    rows = load(path)
    plr = [r for r in rows if r["bench"] == "learn"]
    b16 = [r for r in rows if r["bench"] == "learn-bytes16"]
    sizes = sorted({r["n"] for r in plr})
    deltas = sorted({r["delta"] for r in plr})

    print("### Lookups at delta 8, cone fit (u64 keys; ns per lookup, thread CPU time)\n")
    print(
        "| key set | n | segments | model B/key | train ns/key | binary search | "
        "model, binary seg. search | model, radix seg. search | default search | "
        "speedup (default) |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for n in sizes:
        for s in SETS:
            r = find(plr, CONE, s, n, 8)
            if r:
                print(
                    f"| {s} | {n:,} | {r['segments']:,} | {r['model_bytes_per_key']:.3f} | "
                    f"{r['train_ns_per_key_cpu']:.1f} | {r['lookup_ns_bsearch_cpu']:.0f} | "
                    f"{r['lookup_ns_model_binary_cpu']:.0f} | "
                    f"{r['lookup_ns_model_radix_cpu']:.0f} | {r['default_search']} | "
                    f"{r['speedup_default_cpu']:.2f}x |"
                )
    print()
    print("### Cone vs pivot fit at delta 8 (segments; train ns/key; default-path lookup ns)\n")
    print(
        "| key set | n | cone segments | pivot segments | cone train | pivot train | "
        "cone lookup | pivot lookup |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for n in sizes:
        for s in SETS:
            c, p = find(plr, CONE, s, n, 8), find(plr, PIVOT, s, n, 8)
            if c and p:
                print(
                    f"| {s} | {n:,} | {c['segments']:,} | {p['segments']:,} | "
                    f"{c['train_ns_per_key_cpu']:.1f} | {p['train_ns_per_key_cpu']:.1f} | "
                    f"{default(c):.0f} | {default(p):.0f} |"
                )
    print()
    n = max(sizes)
    print(f"### Delta sweep, cone fit, n = {n:,} (default-path ns per lookup / segments / B/key)\n")
    print("| key set | binary search | " + " | ".join(f"delta {d}" for d in deltas) + " |")
    print("|---|---|" + "---|" * len(deltas))
    for s in SETS:
        cells = []
        base = None
        for d in deltas:
            r = find(plr, CONE, s, n, d)
            if r:
                base = r["lookup_ns_bsearch_cpu"]
                cells.append(
                    f"{default(r):.0f} / {r['segments']:,} / {r['model_bytes_per_key']:.3f}"
                )
            else:
                cells.append("-")
        print(f"| {s} | {base:.0f} | " + " | ".join(cells) + " |")
    print()
    print(
        "### Speedup over binary search, geometric mean over the six key sets "
        "(cone fit, default search path)\n"
    )
    print("| n | " + " | ".join(f"delta {d}" for d in deltas) + " |")
    print("|---|" + "---|" * len(deltas))
    for n in sizes:
        cells = []
        for d in deltas:
            v = [
                r["lookup_ns_bsearch_cpu"] / default(r)
                for r in plr
                if r["model"] == CONE and r["n"] == n and r["delta"] == d
            ]
            cells.append(f"{gmean(v):.2f}x" if v else "-")
        print(f"| {n:,} | " + " | ".join(cells) + " |")
    print()
    if b16:
        print("### 16-byte keys through the key mapper (delta 8, ns per lookup, CPU)\n")
        print(
            "| key set | n | prefix bytes | distinct mapped | train ns/key | binary search | "
            "model | speedup |"
        )
        print("|---|---|---|---|---|---|---|---|")
        for n in sizes:
            for s in SETS:
                for r in b16:
                    if r["keyset"] == s and r["n"] == n:
                        print(
                            f"| {s} | {n:,} | {r['prefix_len']} | {r['distinct_mapped']:,} | "
                            f"{r['train_ns_per_key_cpu']:.1f} | "
                            f"{r['lookup_ns_bsearch_cpu']:.0f} | "
                            f"{r['lookup_ns_model_cpu']:.0f} | {r['speedup_cpu']:.2f}x |"
                        )
    loads = [r["loadavg_1m"] for r in rows]
    print(
        f"\nLoad average (1 min) during the run: {min(loads):.1f} to {max(loads):.1f} "
        f"on {rows[0]['machine']['nproc']} cores ({rows[0]['machine']['cpu']})."
    )


if __name__ == "__main__":
    main()

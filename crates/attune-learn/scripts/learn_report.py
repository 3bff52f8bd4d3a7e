"""Markdown tables for docs/learned-index.md from benches/results/learn.jsonl.

Usage: python3 crates/attune-learn/scripts/learn_report.py [benches/results/learn.jsonl]
"""

import json
import sys
from collections import defaultdict

SETS = ["linear", "seg1", "seg10", "normal", "lognormal", "osm"]


def load(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def main():
    path = sys.argv[1] if len(sys.argv) > 1 else "benches/results/learn.jsonl"
    rows = load(path)
    plr = [r for r in rows if r["bench"] == "learn"]
    b16 = [r for r in rows if r["bench"] == "learn-bytes16"]
    sizes = sorted({r["n"] for r in plr})

    print("### Lookups at the default delta 8 (u64 keys, ns per lookup, thread CPU time)\n")
    print(
        "| key set | n | segments | model B/key | train ns/key | binary search | "
        "model (binary seg.) | model (radix seg.) | speedup |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for n in sizes:
        for s in SETS:
            for r in plr:
                if r["keyset"] == s and r["n"] == n and r["delta"] == 8:
                    print(
                        f"| {s} | {n:,} | {r['segments']:,} | {r['model_bytes_per_key']:.3f} | "
                        f"{r['train_ns_per_key_cpu']:.1f} | {r['lookup_ns_bsearch_cpu']:.0f} | "
                        f"{r['lookup_ns_model_binary_cpu']:.0f} | "
                        f"{r['lookup_ns_model_radix_cpu']:.0f} | "
                        f"{r['speedup_best_cpu']:.2f}x |"
                    )
    print()
    print("### Delta sweep (10M keys unless absent; best model ns per lookup / segments)\n")
    deltas = sorted({r["delta"] for r in plr})
    n = max(sizes)
    print("| key set | " + " | ".join(f"delta {d}" for d in deltas) + " |")
    print("|---|" + "---|" * len(deltas))
    for s in SETS:
        cells = []
        for d in deltas:
            hit = [r for r in plr if r["keyset"] == s and r["n"] == n and r["delta"] == d]
            if hit:
                r = hit[0]
                best = min(r["lookup_ns_model_binary_cpu"], r["lookup_ns_model_radix_cpu"])
                cells.append(f"{best:.0f} ns / {r['segments']:,}")
            else:
                cells.append("-")
        print(f"| {s} | " + " | ".join(cells) + " |")
    print()
    speed = defaultdict(list)
    for r in plr:
        best = min(r["lookup_ns_model_binary_cpu"], r["lookup_ns_model_radix_cpu"])
        speed[(r["n"], r["delta"])].append(r["lookup_ns_bsearch_cpu"] / best)
    print("### Mean speedup over the six key sets (geometric mean)\n")
    print("| n | " + " | ".join(f"delta {d}" for d in deltas) + " |")
    print("|---|" + "---|" * len(deltas))
    for n in sizes:
        cells = []
        for d in deltas:
            v = speed.get((n, d), [])
            if v:
                g = 1.0
                for x in v:
                    g *= x
                cells.append(f"{g ** (1 / len(v)):.2f}x")
            else:
                cells.append("-")
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

"""Prints the markdown tables of docs/vip-hashing.md from benches/results/hash-*.jsonl.

Each cell is the median over the seeds of a setting (every seed is its own key set, popularity
ranking and stream); ratios are medians of the per-seed ratios, each from one process run.
Usage: python3 crates/attune-hash/scripts/tables.py [results_dir]
"""

from __future__ import annotations

import json
import statistics
import sys
from collections import defaultdict
from pathlib import Path


def load(path: Path) -> list[dict]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def fmt(x, digits=2):
    return "-" if x is None else f"{x:.{digits}f}"


def med(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def by_setting(rows, key):
    """{key: [ {table: row} per seed ]}"""
    out: dict = defaultdict(lambda: defaultdict(dict))
    for r in rows:
        out[key(r)][r["seed"]][r["table"]] = r
    return {k: list(v.values()) for k, v in out.items()}


def table(rows, title, key, key_names, metric="ops_per_sec"):
    if not rows:
        return
    seeds = sorted({r["seed"] for r in rows})
    print(f"\n#### {title} (median over seeds {seeds})\n")
    head = " | ".join(key_names)
    print(
        f"| {head} | chained M/s | VIP M/s | hb M/s | VIP/chained | VIP/hb | disp ch. | disp VIP |"
    )
    print("|" + "---|" * (len(key_names) + 7))
    for k, per_seed in by_setting(rows, key).items():

        def col(t, f, per_seed=per_seed):
            return med(f(s[t]) if t in s else None for s in per_seed)

        def ratio(a, b, per_seed=per_seed):
            return med(s[a][metric] / s[b][metric] if a in s and b in s else None for s in per_seed)

        ks = " | ".join(str(x) for x in (k if isinstance(k, tuple) else (k,)))
        mops = {
            t: col(t, lambda r: r["ops_per_sec"] / 1e6) for t in ("chained", "vip", "hashbrown")
        }
        print(
            f"| {ks} | {fmt(mops['chained'])} | {fmt(mops['vip'])} | {fmt(mops['hashbrown'])} "
            f"| {fmt(ratio('vip', 'chained'))} | {fmt(ratio('vip', 'hashbrown'))} "
            f"| {fmt(col('chained', lambda r: r['avg_displacement']), 3)} "
            f"| {fmt(col('vip', lambda r: r['avg_displacement']), 3)} |"
        )


def learned_vs_ideal(rows262k, rows1m) -> None:
    """Adaptive VIP against its ideal (vip-oracle) and without gathering (vip-no-gather)."""
    names = ("vip", "vip-no-gather", "vip-oracle")
    sets = [("262144", rows262k), ("1000000", rows1m)]
    if not any(any(r["table"] == "vip-oracle" for r in rs) for _, rs in sets):
        return
    print("\n#### Static adaptive pair: learned order vs the ideal (ratios to chained, medians)\n")
    print("| keys | zipf | seeds | VIP | VIP without gather | oracle | disp VIP | disp oracle |")
    print("|---|---|---|---|---|---|---|---|")
    for keys, rs in sets:
        rs = [r for r in rs if r["churn"] is None and r["mix"] == "100:0:0"]
        for z, per_seed in sorted(by_setting(rs, lambda r: r["zipf"]).items()):
            if not all("vip-oracle" in s for s in per_seed):
                continue

            def ratio(t, per_seed=per_seed):
                return med(s[t]["ops_per_sec"] / s["chained"]["ops_per_sec"] for s in per_seed)

            def disp(t, per_seed=per_seed):
                return med(s[t]["avg_displacement"] for s in per_seed)

            cells = " | ".join(fmt(ratio(t)) for t in names)
            print(
                f"| {keys} | {z} | {len(per_seed)} | {cells} "
                f"| {fmt(disp('vip'), 3)} | {fmt(disp('vip-oracle'), 3)} |"
            )
    for keys, rs in sets:
        for z in (0, 1):
            per = [
                r["ops_per_sec"]
                for r in rs
                if r["zipf"] == z and r["churn"] is None and r["mix"] == "100:0:0"
            ]
            if not per:
                continue
            seeds = by_setting(
                [r for r in rs if r["zipf"] == z and r["churn"] is None and r["mix"] == "100:0:0"],
                lambda r: r["zipf"],
            )[z]
            vals = [s["vip"]["ops_per_sec"] / s["chained"]["ops_per_sec"] for s in seeds]
            print(
                f"\nPer-seed VIP/chained, {keys} keys, zipf {z}: " + ", ".join(fmt(v) for v in vals)
            )


def main() -> None:
    d = Path(sys.argv[1] if len(sys.argv) > 1 else "benches/results")
    table(load(d / "hash-roofline.jsonl"), "Roofline, 1M keys", lambda r: r["zipf"], ["zipf"])
    table(load(d / "hash-roofline-10m.jsonl"), "Roofline, 10M keys", lambda r: r["zipf"], ["zipf"])
    table(
        load(d / "hash-loadfactor.jsonl"),
        "Load-factor sweep (2^19 buckets)",
        lambda r: (r["zipf"], r["load_factor_target"]),
        ["zipf", "load factor"],
    )
    everything = load(d / "hash-adaptive.jsonl")
    # The learn-always contrast is its own run (with its own chained rows): kept apart.
    rows = [r for r in everything if "vip-learn-always" not in r["command"]]
    table(
        [r for r in rows if r["table"] in ("vip", "chained", "hashbrown")],
        "Adaptive, 262144 keys, 30M ops",
        lambda r: (r["zipf"], r["churn"] or "-", r["mix"]),
        ["zipf", "churn", "mix"],
    )
    for r in everything:
        if r["table"] == "vip-learn-always":
            print(
                f"\nlearn+adapt on every fetch, zipf {r['zipf']}, seed {r['seed']}: "
                f"{fmt(r['speedup_vs_chained'])}x the chained throughput"
            )
    learned_vs_ideal(rows, load(d / "hash-adaptive-1m.jsonl"))
    join = load(d / "hash-join.jsonl")
    table(
        join,
        "PK-FK join, |R| = 734003, load factor 1.4, M/s = S rows/CPU s",
        lambda r: (r["ratio"], r["zipf"]),
        ["1:ratio", "zipf"],
    )
    if join:
        print("\nJoin time change, VIP vs chained (build + probe, median over seeds):\n")
        for (ratio, z), per_seed in by_setting(join, lambda r: (r["ratio"], r["zipf"])).items():
            changes = [
                (s["vip"]["cpu_seconds"] / s["chained"]["cpu_seconds"] - 1) * 100
                for s in per_seed
                if "vip" in s and "chained" in s
            ]
            probe = [
                (s["vip"]["probe_cpu_seconds"] / s["chained"]["probe_cpu_seconds"] - 1) * 100
                for s in per_seed
                if "vip" in s and "chained" in s and "probe_cpu_seconds" in s["vip"]
            ]
            probe_txt = f"; probe only {med(probe):+.1f}%" if probe else ""
            print(f"- 1:{ratio} zipf {z}: {med(changes):+.1f}%{probe_txt}")
    extra_tables(d)


def counter_table(rows) -> None:
    """Fig. 3.6: each table's throughput over the plain chained table's, and its memory."""
    if not rows:
        return
    seeds = sorted({r["seed"] for r in rows})
    names = ("counter", "counter-wide", "vip", "hashbrown")
    print(f"\n#### 1-byte counter per entry (Fig. 3.6; median over seeds {seeds})\n")
    print("| zipf | chained M/s | " + " | ".join(f"{n}/chained" for n in names) + " |")
    print("|" + "---|" * (len(names) + 2))
    for z, per_seed in sorted(by_setting(rows, lambda r: r["zipf"]).items()):
        cells = [
            fmt(med(s[n]["ops_per_sec"] / s["chained"]["ops_per_sec"] for s in per_seed if n in s))
            for n in names
        ]
        ch = med(s["chained"]["ops_per_sec"] / 1e6 for s in per_seed if "chained" in s)
        print(f"| {z:g} | {fmt(ch)} | " + " | ".join(cells) + " |")
    first = {r["table"]: r for r in rows if r["seed"] == seeds[0] and r["zipf"] == rows[0]["zipf"]}
    print("\n| table | heap MB | peak heap MB | bytes per entry (peak) |")
    print("|---|---|---|---|")
    for n in ("chained",) + names:
        if n in first:
            r = first[n]
            per = r["peak_heap_bytes"] / r["keys"]
            print(
                f"| {n} | {r['heap_bytes'] / 1e6:.1f} | {r['peak_heap_bytes'] / 1e6:.1f} "
                f"| {per:.1f} |"
            )


def q9_table(rows) -> None:
    """TPC-H Q9: CPU seconds per table and VIP's ratios, median over seeds."""
    if not rows:
        return
    seeds = sorted({r["seed"] for r in rows})
    print(f"\n#### TPC-H Q9, scale factor 1 (median over seeds {seeds})\n")
    print(
        "| zipf | chained s | VIP s | hashbrown s | DuckDB s | VIP vs chained | "
        "VIP vs hashbrown | VIP vs DuckDB | lineitem-pipeline change | disp orders ch. -> VIP |"
    )
    print("|" + "---|" * 10)
    for z, per_seed in sorted(by_setting(rows, lambda r: r["zipf"]).items()):

        def sec(t, per_seed=per_seed):
            return med(s[t]["cpu_seconds"] for s in per_seed if t in s)

        def speed(t, per_seed=per_seed):
            return med(
                s[t]["cpu_seconds"] / s["vip"]["cpu_seconds"]
                for s in per_seed
                if t in s and "vip" in s
            )

        pipe = med(
            (s["vip"]["probe_seconds"] / s["chained"]["probe_seconds"] - 1) * 100
            for s in per_seed
            if "vip" in s and "chained" in s
        )
        d_ch = med(s["chained"]["o_avg_displacement"] for s in per_seed if "chained" in s)
        d_vip = med(s["vip"]["o_avg_displacement"] for s in per_seed if "vip" in s)
        print(
            f"| {z:g} | {fmt(sec('chained'), 3)} | {fmt(sec('vip'), 3)} "
            f"| {fmt(sec('hashbrown'), 3)} | {fmt(sec('duckdb'), 3)} "
            f"| {fmt(speed('chained'))} | {fmt(speed('hashbrown'))} | {fmt(speed('duckdb'))} "
            f"| {pipe:+.1f}% | {fmt(d_ch, 3)} -> {fmt(d_vip, 3)} |"
        )


def extra_tables(d: Path) -> None:
    counter_table(load(d / "hash-counter.jsonl"))
    table(
        load(d / "hash-read-mostly.jsonl"),
        "Read-mostly and steady state, 996147 keys at load factor 0.95, 60M ops",
        lambda r: (r["zipf"], r["mix"]),
        ["zipf", "mix"],
    )
    q9_table(load(d / "hash-q9.jsonl"))


if __name__ == "__main__":
    main()

"""Render benches/results/splitdf.jsonl as the Markdown tables of docs/splitdf.md.

Usage: .venv/bin/python benches/splitdf/report.py [benches/results/splitdf.jsonl]
Prints to stdout; medians are over the data sets that were split (refusals are listed apart).
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path


def mb(n: int) -> str:
    return f"{n / 2**20:.1f}"


def pct(x: float) -> str:
    return f"{100 * x:.1f}%"


def main(path: str) -> None:
    rows = [json.loads(line) for line in Path(path).read_text().splitlines() if line.strip()]
    configs = [(False, None), (True, 8), (True, None)]
    configs += sorted(
        {(r.get("narrow_keys"), r.get("max_dims")) for r in rows} - set(configs),
        key=lambda c: (c[0], c[1] or 0),
    )
    for narrow, max_dims in configs:
        sel = [r for r in rows if r.get("narrow_keys") == narrow and r.get("max_dims") == max_dims]
        if not sel:
            continue
        keys = "narrow keys (--narrow-keys)" if narrow else "8-byte keys (Algorithm 6 as printed)"
        if max_dims is not None:
            keys += f", at most {max_dims} dimensions (--max-dims {max_dims})"
        print(f"\n#### SplitGen exact, {keys}\n")
        print(
            "| data set | rows | CSV MB | unsplit Parquet MB | split MB | vs CSV "
            "| CSV vs split CSV | vs Parquet | logical | groups | split s |"
        )
        print("|---|---|---|---|---|---|---|---|---|---|---|")
        red = {"csv": [], "csvcsv": [], "pq": [], "logical": []}
        for r in (x for x in sel if x["kind"] == "split"):
            if "refused" in r:
                print(
                    f"| {r['dataset']} | | {mb(r['csv_bytes'])} | {mb(r['unsplit_parquet_bytes'])}"
                    f" | refused | 0% | 0% | 0% | 0% | 0 | {r['split_seconds']} |"
                )
                for values in red.values():
                    values.append(0.0)
                continue
            red["csv"].append(r["reduction_vs_csv"])
            red["csvcsv"].append(r["reduction_csv_vs_split_csv"])
            red["pq"].append(r["reduction_vs_parquet"])
            red["logical"].append(r["reduction_logical"])
            print(
                f"| {r['dataset']} | {r['nrows']} | {mb(r['csv_bytes'])} | "
                f"{mb(r['unsplit_parquet_bytes'])} | {mb(r['split_bytes'])} | "
                f"{pct(r['reduction_vs_csv'])} | {pct(r['reduction_csv_vs_split_csv'])} | "
                f"{pct(r['reduction_vs_parquet'])} | "
                f"{pct(r['reduction_logical'])} | {len(r['groups'])} | {r['split_seconds']} |"
            )
        if red["csv"]:
            print(
                f"| **median** | | | | | {pct(statistics.median(red['csv']))} | "
                f"{pct(statistics.median(red['csvcsv']))} | "
                f"{pct(statistics.median(red['pq']))} | {pct(statistics.median(red['logical']))}"
                " | | |"
            )
        loads = [x for x in sel if x["kind"] == "load"]
        if loads:
            print("\nPeak RSS of loading unsplit vs split Parquet (MB; reduction):\n")
            print("| data set | pandas | pyarrow | DuckDB |")
            print("|---|---|---|---|")
            by_lib: dict[str, list[float]] = {}
            for ds in dict.fromkeys(x["dataset"] for x in loads):
                cells = []
                for lib in ("pandas", "pyarrow", "duckdb"):
                    x = next((y for y in loads if y["dataset"] == ds and y["lib"] == lib), None)
                    if x is None:
                        cells.append("")
                        continue
                    by_lib.setdefault(lib, []).append(x["reduction"])
                    cells.append(
                        f"{mb(x['unsplit_peak_rss_bytes'])} -> {mb(x['split_peak_rss_bytes'])}"
                        f" ({pct(x['reduction'])})"
                    )
                print(f"| {ds} | " + " | ".join(cells) + " |")
            refused = [x["dataset"] for x in sel if x["kind"] == "split" and "refused" in x]
            for ds in refused:  # a refused split loads exactly the unsplit data: 0% reduction
                print(f"| {ds} | refused: 0% | refused: 0% | refused: 0% |")
                for lib in ("pandas", "pyarrow", "duckdb"):
                    by_lib.setdefault(lib, []).append(0.0)
            print(
                "| **median** | "
                + " | ".join(
                    pct(statistics.median(by_lib.get(lib, [0.0])))
                    for lib in ("pandas", "pyarrow", "duckdb")
                )
                + " |"
            )
        nbs = [x for x in sel if x["kind"] == "notebook"]
        if nbs:
            print("\nNotebook (Ibis on DuckDB, data loaded into memory first):\n")
            print(
                "| data set | peak RSS MB unsplit -> split | total s unsplit -> split "
                "| slowest query, median of runs | slowest query, first run | identical |"
            )
            print("|---|---|---|---|---|---|")
            for x in nbs:
                worst = max(x["query_time_ratio_split_over_unsplit"].items(), key=lambda kv: kv[1])
                first = max(
                    x.get("first_run_ratio_split_over_unsplit", {"n/a": 0}).items(),
                    key=lambda kv: kv[1],
                )
                print(
                    f"| {x['dataset']} | {mb(x['unsplit_peak_rss_bytes'])} -> "
                    f"{mb(x['split_peak_rss_bytes'])} ({pct(x['memory_reduction'])}) | "
                    f"{x['unsplit_total_s']} -> {x['split_total_s']} | "
                    f"{worst[1]}x ({worst[0]}) | {first[1]}x ({first[0]}) | "
                    f"{x['identical_results']} |"
                )
            print("\nPer step, split / unsplit time: median of runs; first run\n")
            print("| step | " + " | ".join(x["dataset"] for x in nbs) + " |")
            print("|---" * (len(nbs) + 1) + "|")
            steps = dict.fromkeys(q for x in nbs for q in x["query_time_ratio_split_over_unsplit"])
            for q in steps:
                cells = []
                for x in nbs:
                    med = x["query_time_ratio_split_over_unsplit"].get(q)
                    first = x.get("first_run_ratio_split_over_unsplit", {}).get(q)
                    cells.append("" if med is None else f"{med}x; {first}x")
                print(f"| {q} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "benches/results/splitdf.jsonl")

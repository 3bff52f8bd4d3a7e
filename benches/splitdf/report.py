"""Render benches/results/splitdf.jsonl as the Markdown tables of docs/splitdf.md.

Usage: .venv/bin/python benches/splitdf/report.py [benches/results/splitdf.jsonl]
Prints to stdout; medians are over the data sets that were split (refusals are listed apart).
       .venv/bin/python benches/splitdf/report.py --plots DIR [RESULTS]
writes one bar chart per configuration (split / unsplit time per notebook step) into DIR.
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


def label_runs(nbs: list[dict]) -> None:
    """Set ``_label``: the data set, numbered in file order when it has several notebook runs
    (reruns under different load; all are shown)."""
    count: dict[str, int] = {}
    for x in nbs:
        count[x["dataset"]] = count.get(x["dataset"], 0) + 1
    nth: dict[str, int] = {}
    for x in nbs:
        nth[x["dataset"]] = nth.get(x["dataset"], 0) + 1
        many = count[x["dataset"]] > 1
        x["_label"] = x["dataset"] + (f" run {nth[x['dataset']]}" if many else "")


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
        label_runs(nbs)
        if nbs:
            print("\nNotebook (Ibis on DuckDB, data loaded into memory first):\n")
            print(
                "| data set | peak RSS MB unsplit -> split | total s unsplit -> split "
                "| slowest query, median wall time | slowest query, median CPU time "
                "| slowest query, first run | identical |"
            )
            print("|---|---|---|---|---|---|---|")

            def worst(x, key):
                items = x.get(key, {"n/a": 0}).items()
                return max(items, key=lambda kv: kv[1])

            for x in nbs:
                wall = worst(x, "query_time_ratio_split_over_unsplit")
                cpu = worst(x, "cpu_time_ratio_split_over_unsplit")
                first = worst(x, "first_run_ratio_split_over_unsplit")
                above = ""
                if "baseline_rss_bytes" in x:
                    above = (
                        f"; {pct(x['memory_reduction_above_baseline'])} above the "
                        f"{mb(x['baseline_rss_bytes'])} MB of a process without data"
                    )
                print(
                    f"| {x['_label']} | {mb(x['unsplit_peak_rss_bytes'])} -> "
                    f"{mb(x['split_peak_rss_bytes'])} ({pct(x['memory_reduction'])}{above}) | "
                    f"{x['unsplit_total_s']} -> {x['split_total_s']} | "
                    f"{wall[1]}x ({wall[0]}) | {cpu[1]}x ({cpu[0]}) | {first[1]}x ({first[0]}) | "
                    f"{x['identical_results']} |"
                )
            print(
                "\nPer step, split / unsplit: median wall time; median CPU time; first run "
                "(unsplit ms in brackets)\n"
            )
            print("| step | " + " | ".join(x["_label"] for x in nbs) + " |")
            print("|---" * (len(nbs) + 1) + "|")
            steps = dict.fromkeys(q for x in nbs for q in x["query_time_ratio_split_over_unsplit"])
            for q in steps:
                cells = []
                for x in nbs:
                    med = x["query_time_ratio_split_over_unsplit"].get(q)
                    cpu = x.get("cpu_time_ratio_split_over_unsplit", {}).get(q, "n/a")
                    first = x.get("first_run_ratio_split_over_unsplit", {}).get(q)
                    ms = x["query_s_unsplit"].get(q, 0) * 1000
                    cells.append("" if med is None else f"{med}x; {cpu}x; {first}x ({ms:.1f})")
                print(f"| {q} | " + " | ".join(cells) + " |")


def plots(path: str, out_dir: str) -> list[str]:
    """One PNG per configuration: split / unsplit median wall time of every notebook step per
    data set, with the 1.2x bound of the target drawn in. Returns the files written."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = [json.loads(line) for line in Path(path).read_text().splitlines() if line.strip()]
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    written = []
    configs = sorted(
        {(r.get("narrow_keys"), r.get("max_dims")) for r in rows if r["kind"] == "notebook"},
        key=lambda c: (bool(c[0]), c[1] or 0),
    )
    for narrow, max_dims in configs:
        nbs = [
            r
            for r in rows
            if r["kind"] == "notebook"
            and r.get("narrow_keys") == narrow
            and r.get("max_dims") == max_dims
        ]
        label_runs(nbs)
        tag = ("narrow" if narrow else "8byte") + (f"-max{max_dims}" if max_dims else "")
        fig, ax = plt.subplots(figsize=(9, 3.6))
        labels, values, colors = [], [], []
        palette = {"flights": "tab:blue", "tpch": "tab:orange", "accidents": "tab:green"}
        for r in nbs:
            for q, v in r["query_time_ratio_split_over_unsplit"].items():
                labels.append(f"{r['_label']}\n{q}")
                values.append(v)
                colors.append(palette.get(r["dataset"], "tab:gray"))
        ax.bar(range(len(values)), values, color=colors)
        ax.axhline(1.2, color="red", linestyle="--", linewidth=1, label="1.2x bound")
        ax.axhline(1.0, color="black", linewidth=0.5)
        ax.set_xticks(range(len(labels)), labels, rotation=90, fontsize=6)
        ax.set_ylabel("split / unsplit, median wall time")
        mem = ", ".join(f"{r['_label']} -{pct(r['memory_reduction'])}" for r in nbs)
        ax.set_title(f"SplitDF notebook steps ({tag}); peak memory {mem}", fontsize=8)
        ax.legend(fontsize=7)
        fig.tight_layout()
        f = out / f"splitdf-notebook-{tag}.png"
        fig.savefig(f, dpi=110)
        plt.close(fig)
        written.append(str(f))
    return written


if __name__ == "__main__":
    args = sys.argv[1:]
    if args[:1] == ["--plots"]:
        results = args[2] if len(args) > 2 else "benches/results/splitdf.jsonl"
        print("\n".join(plots(results, args[1])))
    else:
        main(args[0] if args else "benches/results/splitdf.jsonl")

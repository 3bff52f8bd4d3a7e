"""Markdown reports with plots from ``attune-bench`` (and other helpers') JSON-lines results.

For each results file the report has one section: the command(s) that produced it, the machine,
then either a table of ratios against a baseline engine (rows with an ``engine`` field, one per
engine and workload) or a plain table of the rows' fields (rows without ``engine``, e.g. hash-table
or dataframe benchmarks with fields such as ``table`` and ``ops_per_sec``), and PNG plots
(throughput bars; latency percentiles) saved next to the markdown and linked from it. The file
starts by saying it is generated and by which command. Besides throughput ratios the engine table
gives operations per CPU second and its ratio, which a busy shared machine disturbs less.

Thread-safety: pure functions over files; matplotlib is used with the non-interactive Agg backend
from one thread. Invariant: every number in the report comes from a row of the given files.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any

from attune.bench import BenchError

__all__ = ["load_rows", "render", "write_report"]

#: Latency fields plotted and tabulated, in order.
PERCENTILES = ("p50", "p95", "p99", "p999", "max")
#: Latency plots with more workloads than this (one panel each) are left out: unreadable and large.
LATENCY_PANELS_MAX = 12
#: Throughput plots with more workloads (or sweep cells) than this are left out: their labels overlap.
THROUGHPUT_GROUPS_MAX = 16
#: Fields shown elsewhere in a section rather than as table columns.
META_FIELDS = ("command", "machine", "settings", "params", "memory_limit")


def load_rows(path: str | os.PathLike) -> list[dict[str, Any]]:
    """Reads a JSON-lines file; each non-blank line must be a JSON object."""
    p = Path(path)
    try:
        text = p.read_text()
    except OSError as exc:
        raise BenchError(f"cannot read {p}: {exc}") from exc
    rows = []
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            raise BenchError(f"{p}:{n}: not JSON ({exc.msg})") from exc
        if not isinstance(row, dict):
            raise BenchError(f"{p}:{n}: expected a JSON object, got {type(row).__name__}")
        rows.append(row)
    if not rows:
        raise BenchError(f"{p}: no result rows")
    return rows


def _num(v: Any, digits: int = 2) -> str:
    if v is None:
        return "–"
    if isinstance(v, bool):
        return str(v).lower()
    if isinstance(v, int):
        return f"{v:,}"
    if isinstance(v, float):
        if math.isnan(v):
            return "–"
        if abs(v) >= 1000:
            return f"{v:,.0f}"
        return f"{v:.{digits}f}"
    return str(v).replace("|", "\\|")


def _machine(m: Any) -> str:
    if not isinstance(m, dict):
        return str(m)
    parts = []
    if "cpu" in m:
        parts.append(str(m["cpu"]))
    if "nproc" in m:
        parts.append(f"{m['nproc']} CPUs")
    if m.get("mem_bytes"):
        parts.append(f"{m['mem_bytes'] / 2**30:.0f} GiB RAM")
    if "kernel" in m:
        parts.append(f"Linux {m['kernel']}")
    others = [f"{k}={v}" for k, v in m.items() if k not in ("cpu", "nproc", "mem_bytes", "kernel")]
    return ", ".join(parts + others)


def _engine_name(engine: str) -> str:
    return engine.split(":", 1)[0]


def _baseline_rows(rows: list[dict], baseline: str) -> dict[str, dict]:
    """workload -> the baseline's row: the engine string equal to `baseline`, else the first row
    whose engine name (before `:`) is `baseline`."""
    out: dict[str, dict] = {}
    for r in rows:
        if r.get("engine") == baseline:
            out.setdefault(str(r.get("workload")), r)
    for r in rows:
        if _engine_name(str(r.get("engine", ""))) == baseline:
            out.setdefault(str(r.get("workload")), r)
    return out


def _per_cpu(r: dict) -> float | None:
    """Operations per CPU second of the engine's process: less sensitive than ops/s to other
    load on a shared machine (it still includes the engine's background threads)."""
    ops, cpu = r.get("ops"), r.get("cpu_seconds")
    if isinstance(ops, (int, float)) and isinstance(cpu, (int, float)) and cpu > 0:
        return ops / cpu
    return None


#: What makes one cell of a sweep: rows that differ in any of these are never one group.
CELL_PARAMS = ("distribution", "records", "compression", "field_length", "threads", "load_order")


def _cell_value(r: dict, key: str) -> object:
    """A row's value of a cell parameter: ``params.<key>``, or the runner's top-level ``ratio``."""
    if key == "ratio":
        return r.get("ratio")
    return (r.get("params") or {}).get(key)


def _qualify_workloads(rows: list[dict]) -> list[dict]:
    """When a file's rows span several cells (key sets, distributions, record counts, a
    runner's ``ratio``...), name each row's workload by the cell as well, e.g. ``osm c`` or
    ``ratio=0.2 distribution=uniform c``, so that tables and repeats never mix cells."""
    # A parameter names cells only if it varies within one engine's workload (a phase such as
    # `load` reporting its own distribution is not a cell of its own).
    seen: dict[tuple[str, str, str], set[str]] = {}
    for r in rows:
        for k in ("key_set", "ratio", *CELL_PARAMS):
            group = (k, str(r.get("engine")), str(r.get("workload")))
            seen.setdefault(group, set()).add(repr(_cell_value(r, k)))
    varying = {k for (k, _, _), values in seen.items() if len(values) > 1}
    keys = [k for k in ("key_set", "ratio", *CELL_PARAMS) if k in varying]
    if not keys:
        return rows
    out = []
    for r in rows:
        parts = [
            str(v) if k == "key_set" else f"{k}={v}"
            for k in keys
            if (v := _cell_value(r, k)) is not None
        ]
        out.append({**r, "workload": " ".join([*parts, str(r.get("workload"))])})
    return out


def _aggregate(rows: list[dict]) -> list[dict]:
    """One row per (engine, workload): repeated runs (``--repeat``) collapse to the run with the
    median throughput (lower median for an even count), annotated with ``_n`` and ``_range``."""
    groups: dict[tuple[str, str], list[dict]] = {}
    for r in rows:
        groups.setdefault((str(r.get("engine")), str(r.get("workload"))), []).append(r)
    out = []
    for group in groups.values():
        if len(group) == 1:
            out.append(group[0])
            continue
        ranked = sorted(group, key=lambda r: r.get("ops_per_sec") or 0.0)
        median = dict(ranked[(len(ranked) - 1) // 2])
        median["_n"] = len(group)
        median["_range"] = (ranked[0].get("ops_per_sec"), ranked[-1].get("ops_per_sec"))
        out.append(median)
    return out


def _engine_table(rows: list[dict], baseline: str) -> list[str]:
    rows = _aggregate(_qualify_workloads(rows))
    base = _baseline_rows(rows, baseline)
    lines = []
    if not base:
        lines.append(f"_Baseline `{baseline}` is not in this file: no ratios._\n")
    head = (
        "| workload | engine | ops/s | × " + baseline + " | p50 µs | p95 µs | p99 µs | p99.9 µs "
        "| max µs | write amp | space amp | read MiB | written MiB | peak RSS MiB | CPU s "
        "| ops / CPU s | × " + baseline + " (CPU) |"
    )
    lines.append(head)
    lines.append(_sep(head))
    order: list[str] = []
    for r in rows:
        w = str(r.get("workload"))
        if w not in order:
            order.append(w)
    for w in order:
        for r in (r for r in rows if str(r.get("workload")) == w):
            lat = r.get("latency_us") or {}
            ops = r.get("ops_per_sec")
            b = base.get(w)
            ratio = None
            if b is not None and isinstance(ops, (int, float)) and b.get("ops_per_sec"):
                ratio = ops / b["ops_per_sec"]
            per_cpu = _per_cpu(r)
            base_cpu = _per_cpu(b) if b is not None else None
            cpu_ratio = per_cpu / base_cpu if per_cpu and base_cpu else None
            mib = lambda v: None if v is None else v / 2**20
            ops_cell = _num(ops)
            if "_n" in r:
                lo, hi = r["_range"]
                ops_cell += f" (median of {r['_n']}: {_num(lo)}–{_num(hi)})"
            cells = [
                w,
                f"`{r.get('engine')}`",
                ops_cell,
                "–" if ratio is None else f"{ratio:.2f}",
                *(_num(lat.get(p)) for p in PERCENTILES),
                _num(r.get("write_amp")),
                _num(r.get("space_amp")),
                _num(mib(r.get("bytes_read")), 1),
                _num(mib(r.get("bytes_written")), 1),
                _num(mib(r.get("peak_rss_bytes")), 1),
                _num(r.get("cpu_seconds")),
                _num(per_cpu),
                "–" if cpu_ratio is None else f"{cpu_ratio:.2f}",
            ]
            lines.append("| " + " | ".join(cells) + " |")
    return lines


def _sep(head: str) -> str:
    return "|" + "---|" * (head.count("|") - 1)


def is_engine_row(row: dict) -> bool:
    """A row of the engines' table (an engine's throughput on a workload: ops/s, latency
    percentiles, amplification); other rows, also those that name an engine (the pipelines'
    and Data Pipes' runs), go to the plain table of their own fields."""
    return "engine" in row and "ops_per_sec" in row


def _plain_table(rows: list[dict]) -> list[str]:
    """Rows of one shape (the same fields) per table, in order of first appearance: a file
    whose rows are of several kinds (a run's rows and the comparisons derived from them) gets
    one narrow table per kind, not one with every kind's columns."""

    def fields(r: dict) -> tuple[str, ...]:
        return tuple(
            k for k, v in r.items() if k not in META_FIELDS and not isinstance(v, (dict, list))
        )

    shapes: dict[tuple[str, ...], list[dict]] = {}
    for r in rows:
        shapes.setdefault(fields(r), []).append(r)
    lines: list[str] = []
    for cols, group in shapes.items():
        if lines:
            lines.append("")
        head = "| " + " | ".join(cols) + " |"
        lines += [head, _sep(head)]
        lines += ["| " + " | ".join(_num(r.get(c)) for c in cols) + " |" for r in group]
    return lines


def _label_field(rows: list[dict]) -> str | None:
    for key in ("engine", "table", "name", "workload", "benchmark"):
        if any(key in r for r in rows):
            return key
    for k, v in rows[0].items():
        if isinstance(v, str) and k not in META_FIELDS:
            return k
    return None


def _plots(rows: list[dict], stem: str, plots_dir: Path) -> list[Path]:
    """Throughput bars and latency percentiles for engine rows; throughput bars for plain rows."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plots_dir.mkdir(parents=True, exist_ok=True)
    made: list[Path] = []
    with_engine = _aggregate(
        _qualify_workloads(
            [r for r in rows if "engine" in r and isinstance(r.get("ops_per_sec"), (int, float))]
        )
    )
    workloads = list(dict.fromkeys(str(r.get("workload")) for r in with_engine))
    if with_engine and len(workloads) <= THROUGHPUT_GROUPS_MAX:
        engines = list(dict.fromkeys(str(r["engine"]) for r in with_engine))
        width_in = min(12.0, max(6.0, 0.35 * len(workloads) * max(1, len(engines))))
        fig, ax = plt.subplots(figsize=(width_in, 4.5))
        width = 0.8 / max(1, len(engines))
        for i, e in enumerate(engines):
            ys = []
            for w in workloads:
                match = [r for r in with_engine if r["engine"] == e and str(r.get("workload")) == w]
                ys.append(match[0]["ops_per_sec"] if match else 0)
            xs = [j + i * width for j in range(len(workloads))]
            ax.bar(xs, ys, width=width, label=e)
        ax.set_xticks([j + 0.4 - width / 2 for j in range(len(workloads))])
        ax.set_xticklabels(workloads, rotation=20)
        ax.set_ylabel("operations / second")
        ax.set_yscale("log")
        ax.set_title(f"{stem}: throughput")
        ax.legend(fontsize="small")
        fig.tight_layout()
        p = plots_dir / f"{stem}-throughput.png"
        fig.savefig(p, dpi=110)
        plt.close(fig)
        made.append(p)

        with_lat = [r for r in with_engine if isinstance(r.get("latency_us"), dict)]
        if with_lat and len(workloads) <= LATENCY_PANELS_MAX:
            n = len(workloads)
            cols = min(3, n)
            rows_n = (n + cols - 1) // cols
            fig, axes = plt.subplots(
                rows_n, cols, figsize=(4.2 * cols, 3.2 * rows_n), squeeze=False
            )
            for k, w in enumerate(workloads):
                ax = axes[k // cols][k % cols]
                for e in engines:
                    match = [
                        r for r in with_lat if r["engine"] == e and str(r.get("workload")) == w
                    ]
                    if not match:
                        continue
                    lat = match[0]["latency_us"]
                    ys = [lat.get(q) for q in PERCENTILES]
                    pts = [
                        (q, y)
                        for q, y in zip(PERCENTILES, ys)
                        if isinstance(y, (int, float)) and not math.isnan(y) and y > 0
                    ]
                    if pts:
                        ax.plot([q for q, _ in pts], [y for _, y in pts], marker="o", label=e)
                ax.set_yscale("log")
                ax.set_title(w)
                ax.set_ylabel("latency µs")
            for k in range(n, rows_n * cols):
                axes[k // cols][k % cols].axis("off")
            axes[0][0].legend(fontsize="x-small")
            fig.suptitle(f"{stem}: latency percentiles")
            fig.tight_layout()
            p = plots_dir / f"{stem}-latency.png"
            fig.savefig(p, dpi=110)
            plt.close(fig)
            made.append(p)
    made.extend(_steps_plot(rows, stem, plots_dir, plt))
    made.extend(_keyset_speedup_plot(with_engine, stem, plots_dir, plt))
    plain = [
        r for r in rows if "engine" not in r and isinstance(r.get("ops_per_sec"), (int, float))
    ]
    if plain:
        label = _label_field(plain)
        names = [str(r.get(label, i)) if label else str(i) for i, r in enumerate(plain)]
        if "workload" in plain[0] and label != "workload":
            names = [f"{n} {r.get('workload')}" for n, r in zip(names, plain)]
        fig, ax = plt.subplots(figsize=(max(6, 0.7 * len(plain)), 4))
        ax.bar(range(len(plain)), [r["ops_per_sec"] for r in plain])
        ax.set_xticks(range(len(plain)))
        ax.set_xticklabels(names, rotation=30, ha="right", fontsize="small")
        ax.set_ylabel("operations / second")
        ax.set_title(f"{stem}: throughput")
        fig.tight_layout()
        p = plots_dir / f"{stem}-ops.png"
        fig.savefig(p, dpi=110)
        plt.close(fig)
        made.append(p)
    return made


def _steps_plot(rows: list[dict], stem: str, plots_dir: Path, plt: Any) -> list[Path]:
    """Stacked bars of nanoseconds per lookup step (rows with `ns_<step>` fields, a `path` and
    a `key_set`, as `attune-bench lookup-steps` writes them)."""
    steps = [r for r in rows if "ns_total" in r and "path" in r and "key_set" in r]
    if not steps:
        return []
    names = [k for k in steps[0] if k.startswith("ns_") and k not in ("ns_total", "ns_wall")]
    labels = [f"{r['key_set']}\n{r['path']}" for r in steps]
    fig, ax = plt.subplots(figsize=(max(6.0, 0.75 * len(steps)), 4.5))
    bottom = [0.0] * len(steps)
    for name in names:
        ys = [float(r.get(name) or 0.0) for r in steps]
        ax.bar(range(len(steps)), ys, bottom=bottom, label=name[3:])
        bottom = [b + y for b, y in zip(bottom, ys)]
    ax.set_xticks(range(len(steps)))
    ax.set_xticklabels(labels, fontsize="x-small")
    ax.set_ylabel("ns per lookup")
    ax.set_title(f"{stem}: latency per lookup step")
    ax.legend(fontsize="small", ncol=3)
    fig.tight_layout()
    p = plots_dir / f"{stem}-steps.png"
    fig.savefig(p, dpi=110)
    plt.close(fig)
    return [p]


def _keyset_speedup_plot(rows: list[dict], stem: str, plots_dir: Path, plt: Any) -> list[Path]:
    """Per key set, each engine's throughput over the run's first engine (geometric mean over
    the read phases): the "speedup per data set" picture of learned-index runs."""

    def key_set(r: dict) -> Any:
        return (r.get("params") or {}).get("key_set")

    sets = list(dict.fromkeys(key_set(r) for r in rows if key_set(r)))
    engines = list(dict.fromkeys(str(r["engine"]) for r in rows))
    if len(sets) < 2 or len(engines) < 2:
        return []
    base = engines[0]
    setup = ("load", "compact", "learn")
    fig, ax = plt.subplots(figsize=(min(12.0, max(6.0, 0.6 * len(sets) * (len(engines) - 1))), 4.2))
    width = 0.8 / (len(engines) - 1)
    for i, e in enumerate(engines[1:]):
        ys = []
        for ks in sets:
            logs = []
            for r in rows:
                if (
                    r["engine"] != e
                    or key_set(r) != ks
                    or str(r.get("workload")).split()[-1] in setup
                ):
                    continue
                b = [
                    x
                    for x in rows
                    if x["engine"] == base
                    and key_set(x) == ks
                    and x.get("workload") == r.get("workload")
                ]
                if b and b[0]["ops_per_sec"] > 0 and r["ops_per_sec"] > 0:
                    logs.append(math.log(r["ops_per_sec"] / b[0]["ops_per_sec"]))
            ys.append(math.exp(sum(logs) / len(logs)) if logs else 0.0)
        ax.bar([j + i * width for j in range(len(sets))], ys, width=width, label=e)
    ax.axhline(1.0, color="grey", linewidth=0.8)
    ax.set_xticks([j + 0.4 - width / 2 for j in range(len(sets))])
    ax.set_xticklabels([str(s) for s in sets])
    ax.set_ylabel(f"throughput / {base}")
    ax.set_title(f"{stem}: speedup per key set (geometric mean over read phases)")
    ax.legend(fontsize="x-small")
    fig.tight_layout()
    p = plots_dir / f"{stem}-speedup.png"
    fig.savefig(p, dpi=110)
    plt.close(fig)
    return [p]


def _split_baselines(baseline: str | list[str]) -> tuple[str, dict[str, str]]:
    """`rocksdb` or [`rocksdb`, `vlog-1k=db_bench:enable_blob_files=1`, ...] -> the default
    baseline and per-file overrides (keyed by file stem)."""
    items = [baseline] if isinstance(baseline, str) else list(baseline)
    default = "rocksdb"
    per_file: dict[str, str] = {}
    for item in items:
        name, sep, engine = item.partition("=")
        if sep and not name.startswith(("rocksdb", "attune", "db_bench")) and ":" not in name:
            per_file[name] = engine
        else:
            default = item
    return default, per_file


def render(
    files: dict[str, list[dict]],
    baseline: str | list[str],
    command: str,
    plot_links: dict[str, list[str]] | None = None,
) -> str:
    """The markdown text for `files` (name -> rows); `baseline` is an engine or a list of an
    engine and `FILE_STEM=ENGINE` overrides."""
    default_baseline, per_file = _split_baselines(baseline)
    out = [
        "<!-- Generated file: do not edit by hand. -->",
        "# Benchmarks",
        "",
        (
            f"Generated by `{command}` from the results files below; every number comes from a "
            "row of those files, each produced by the command shown with it."
        ),
        "",
    ]
    for name, rows in files.items():
        out.append(f"## {name}")
        out.append("")
        commands = list(dict.fromkeys(str(r["command"]) for r in rows if r.get("command")))
        if commands:
            out.append("Produced by:")
            out.append("")
            out.append("```sh")
            out.extend(commands)
            out.append("```")
            out.append("")
        machines = list(dict.fromkeys(_machine(r["machine"]) for r in rows if r.get("machine")))
        for m in machines:
            out.append(f"Machine: {m}")
        if machines:
            out.append("")
        engine_rows = [r for r in rows if is_engine_row(r)]
        plain_rows = [r for r in rows if not is_engine_row(r)]
        if engine_rows:
            out.extend(_engine_table(engine_rows, per_file.get(Path(name).stem, default_baseline)))
            out.append("")
        if plain_rows:
            out.extend(_plain_table(plain_rows))
            out.append("")
        for link in (plot_links or {}).get(name, []):
            out.append(f"![{Path(link).stem}]({link})")
            out.append("")
    return "\n".join(out).rstrip() + "\n"


def write_report(
    results: list[str],
    out: str,
    baseline: str | list[str] = "rocksdb",
    plots_dir: str | None = None,
    command: str = "attune bench report",
    progress: bool = True,
) -> dict[str, Any]:
    """Writes the report for `results` to `out` with plots in `plots_dir` (default:
    ``bench-plots/`` next to `out`); returns a summary (out, rows, plots). `progress` allows a
    tqdm bar on stderr, drawn only when stderr is a terminal."""
    from tqdm import tqdm

    out_path = Path(out)
    pdir = Path(plots_dir) if plots_dir else out_path.parent / "bench-plots"
    files: dict[str, list[dict]] = {}
    for f in results:
        name = Path(f).name
        if name in files:
            name = str(f)
        files[name] = load_rows(f)
    links: dict[str, list[str]] = {}
    plots: list[str] = []
    for name, rows in tqdm(
        files.items(), desc="plots", disable=None if progress else True, leave=False
    ):
        stem = Path(name).stem.replace(os.sep, "-")
        made = _plots(rows, stem, pdir)
        links[name] = [os.path.relpath(p, out_path.parent or Path(".")) for p in made]
        plots.extend(str(p) for p in made)
    text = render(files, baseline, command, links)
    try:
        out_path.parent.mkdir(parents=True, exist_ok=True)
        out_path.write_text(text)
    except OSError as exc:
        raise BenchError(f"cannot write {out_path}: {exc}") from exc
    return {"out": str(out_path), "rows": sum(len(r) for r in files.values()), "plots": plots}

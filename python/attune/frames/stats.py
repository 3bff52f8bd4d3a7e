"""Column statistics for SplitGen, computed in one DuckDB aggregate pass over a table.

Size model (bytes per value), used for ACT, EST and the measured split size alike:
- fixed-width types: their width (BOOLEAN 1, INTEGER 4, DOUBLE 8, DATE 4, TIMESTAMP 8, DECIMAL 2-16
  by precision, ...), NULL included (a column stores the slot anyway);
- VARCHAR and BLOB: the byte length, NULL is 0;
- any other type (lists, structs, ...): the byte length of its text form, NULL is 0.

Distinct counts count NULL as one value (SQL COUNT(DISTINCT) ignores NULLs, which would break the
exact variant's upper bound). For floating-point columns the exact variant counts distinct text
forms, so that -0.0 and 0.0, which compare equal, are still two values; the writer keys them apart
the same way.

Not thread-safe per connection (a DuckDB connection must not be shared across threads).
"""

from __future__ import annotations

import re

import duckdb

from attune.frames.splitgen import (
    APPROX,
    EXACT,
    KEY_BYTES,
    ColumnStats,
    Dependency,
    TableStats,
    fit_key_bytes,
)

# Functional-dependency detection (strategy "fd"). A candidate X -> Y is first checked on a
# sample of rows: two sampled rows with the same X and different Y disprove it on the whole
# table, so the sample only removes candidates (never admits a false one). The survivors are
# checked exactly on every row. Default 20,000 rows: enough that most false candidates among
# low-cardinality columns show a violation, small enough that the sample's distinct counts for
# a few thousand candidate pairs of a wide table take milliseconds.
FD_SAMPLE_ROWS = 20_000
FD_SAMPLE_SEED = 42
# Dependents checked per GROUP BY query (three aggregates each).
FD_CHECKS_PER_QUERY = 64

_FIXED_WIDTH = {
    "BOOLEAN": 1,
    "TINYINT": 1,
    "UTINYINT": 1,
    "SMALLINT": 2,
    "USMALLINT": 2,
    "INTEGER": 4,
    "UINTEGER": 4,
    "BIGINT": 8,
    "UBIGINT": 8,
    "HUGEINT": 16,
    "UHUGEINT": 16,
    "FLOAT": 4,
    "DOUBLE": 8,
    "DATE": 4,
    "TIME": 8,
    "TIME WITH TIME ZONE": 8,
    "TIMESTAMP": 8,
    "TIMESTAMP_S": 8,
    "TIMESTAMP_MS": 8,
    "TIMESTAMP_NS": 8,
    "TIMESTAMP WITH TIME ZONE": 8,
    "INTERVAL": 16,
    "UUID": 16,
}
FLOAT_TYPES = ("FLOAT", "DOUBLE")


def quote(name: str) -> str:
    """Quote an SQL identifier for DuckDB (and Spark SQL after transpiling)."""
    return '"' + name.replace('"', '""') + '"'


def fixed_width(type_name: str) -> int | None:
    """Bytes per value of a fixed-width DuckDB type, None for variable-width types."""
    t = type_name.upper()
    if t in _FIXED_WIDTH:
        return _FIXED_WIDTH[t]
    m = re.fullmatch(r"DECIMAL\((\d+),\s*\d+\)", t)
    if m:
        p = int(m.group(1))
        return 2 if p <= 4 else 4 if p <= 9 else 8 if p <= 18 else 16
    return None


def size_sql(col: str, type_name: str) -> str:
    """SQL expression for the size in bytes of one value of column ``col``."""
    w = fixed_width(type_name)
    q = quote(col)
    if w is not None:
        return str(w)
    t = type_name.upper()
    if t == "VARCHAR":
        return f"coalesce(strlen({q}), 0)"
    if t == "BLOB":
        return f"coalesce(octet_length({q}), 0)"
    return f"coalesce(strlen(CAST({q} AS VARCHAR)), 0)"


def distinct_key_sql(col: str, type_name: str) -> str:
    """Expression whose equality is exactly value identity (floats by text, see module doc)."""
    q = quote(col)
    if type_name.upper() in FLOAT_TYPES:
        return f"CAST({q} AS VARCHAR)"
    return q


def table_columns(con: duckdb.DuckDBPyConnection, table: str) -> list[tuple[str, str]]:
    rel = con.table(table)
    return [(n, str(t)) for n, t in zip(rel.columns, rel.types)]


def compute_stats(
    con: duckdb.DuckDBPyConnection,
    table: str,
    variant: str,
    narrow_keys: bool = False,
    max_dims: int | None = None,
) -> TableStats:
    """Statistics of every column of ``table`` in one aggregate query."""
    if variant not in (EXACT, APPROX):
        raise ValueError(f"unknown variant {variant!r}")
    cols = table_columns(con, table)
    parts = ["count(*)"]
    for name, typ in cols:
        q = quote(name)
        key = distinct_key_sql(name, typ)
        if variant == EXACT:
            parts.append(f"count(DISTINCT {key})")
        else:
            parts.append(f"approx_count_distinct({key})")
        parts.append(f"coalesce(max(CASE WHEN {q} IS NULL THEN 1 ELSE 0 END), 0)")
        size = size_sql(name, typ)
        parts.append(f"coalesce(max({size}), 0)")
        parts.append(f"coalesce(CAST(sum({size}) AS HUGEINT), 0)")
    row = con.execute(f"SELECT {', '.join(parts)} FROM {quote(table)}").fetchone()
    assert row is not None
    nrows = int(row[0])
    out = []
    for i, (name, _typ) in enumerate(cols):
        distinct, has_null, max_size, total = row[1 + 4 * i : 5 + 4 * i]
        out.append(
            ColumnStats(
                name=name,
                distinct=int(distinct) + int(has_null),
                max_size=int(max_size),
                total_size=int(total),
            )
        )
    return TableStats(
        nrows=nrows,
        columns=tuple(out),
        variant=variant,
        narrow_keys=narrow_keys,
        max_dims=max_dims,
    )


def _fd_key_sql(col: str, type_name: str) -> str:
    """Expression whose equality is value identity and which min/max can order: floats and
    nested types by their text (``distinct_key_sql``), other types as they are."""
    t = type_name.upper()
    if t in FLOAT_TYPES or any(k in t for k in ("[", "STRUCT", "MAP", "UNION")):
        return f"CAST({quote(col)} AS VARCHAR)"
    return distinct_key_sql(col, type_name)


def detect_dependencies(
    con: duckdb.DuckDBPyConnection,
    table: str,
    stats: TableStats,
    sample_rows: int = FD_SAMPLE_ROWS,
) -> tuple[Dependency, ...]:
    """Exact functional dependencies ``X -> Y`` between single columns of ``table``.

    ``X -> Y`` iff ``|distinct(X)| == |distinct(X, Y)|`` (NULL counted as a value; floats by text,
    as in the statistics). Candidates: ``1 < distinct(X) < nrows`` (a constant determines nothing
    useful, a key cannot make a smaller dimension), ``1 < distinct(Y) <= distinct(X)`` (necessary;
    constant columns depend on everything and are added to every determinant without a check),
    and only determinants for which grouping with every candidate could save bytes. Then the
    sample pre-filter (``FD_SAMPLE_ROWS``) and the exact check of the survivors.

    The check (``_holding``) groups the rows by ``X`` and compares min and max of each candidate
    ``Y`` per group, so a dependency found holds on every row in either variant; in the
    approximate variant (HyperLogLog counts) only the choice of candidates is approximate.
    """
    n = stats.nrows
    if n == 0:
        return ()
    types = dict(table_columns(con, table))
    cols = list(stats.columns)
    distinct = {c.name: c.distinct for c in cols}
    by_name = {c.name: c for c in cols}

    def size(c: ColumnStats) -> float:  # as splitgen.fd_groups sizes a column
        return c.max_size if stats.variant == EXACT else c.avg_size(n)

    constants = sorted(c.name for c in cols if distinct[c.name] == 1)
    candidates: list[tuple[str, str]] = []
    for x in sorted(by_name):
        dx = distinct[x]
        if not 1 < dx < n:
            continue
        # Only dependents the grouping could use: with X's group at dx rows, Y adds
        # total_size(Y) to ACT and dx * size(Y) to EST (splitgen.fd_groups takes Y only if the
        # first is larger), so a pair that fails this is never checked.
        ys = [
            y
            for y in sorted(by_name)
            if y != x and 1 < distinct[y] <= dx and by_name[y].total_size > dx * size(by_name[y])
        ]
        if not ys:
            continue
        # Could X with all of its candidate dependents save anything? ACT of the whole lot
        # against the smallest EST any subset containing X can have.
        key = fit_key_bytes(dx) if stats.narrow_keys else KEY_BYTES
        act_max = by_name[x].total_size + sum(
            by_name[y].total_size - dx * size(by_name[y]) for y in ys
        )
        est_min = dx * (size(by_name[x]) + key) + n * key
        if act_max <= est_min:
            continue
        candidates.extend((x, y) for y in ys)
    keys = {c: _fd_key_sql(c, types[c]) for c in by_name}
    if candidates and n > sample_rows:
        sample = "__attune_fd_sample"
        alias = {c: quote("k" + str(i)) for i, c in enumerate(by_name)}
        sel = ", ".join(f"{keys[c]} AS {alias[c]}" for c in by_name)
        con.execute(
            f"CREATE OR REPLACE TEMP TABLE {sample} AS SELECT {sel} FROM {quote(table)} "
            f"USING SAMPLE reservoir({int(sample_rows)} ROWS) REPEATABLE ({FD_SAMPLE_SEED})"
        )
        try:
            candidates = _holding(con, sample, alias, candidates)
        finally:
            con.execute(f"DROP TABLE IF EXISTS {sample}")
    found: dict[str, list[str]] = {}
    for x, y in _holding(con, quote(table), keys, candidates):
        found.setdefault(x, []).append(y)
    out = []
    for x in sorted(by_name):
        if not 1 < distinct[x] < n:
            continue
        ys = found.get(x, []) + [c for c in constants if c != x]
        if ys:
            out.append(Dependency(x, tuple(sorted(ys))))
    return tuple(out)


def _holding(
    con: duckdb.DuckDBPyConnection,
    source: str,
    key: dict[str, str],
    candidates: list[tuple[str, str]],
) -> list[tuple[str, str]]:
    """The candidates ``(X, Y)`` for which ``X -> Y`` holds on every row of ``source``.

    One GROUP BY per determinant: ``X -> Y`` iff within every group of equal ``X`` (NULL one
    group) ``min(Y) = max(Y)`` and ``Y`` is NULL in none or all rows; the same as
    ``|distinct(X)| = |distinct(X, Y)|`` with NULL as a value, for the price of min, max and
    count per candidate instead of a distinct count (a hash table) per pair.
    """
    by_x: dict[str, list[str]] = {}
    for x, y in candidates:
        by_x.setdefault(x, []).append(y)
    out: list[tuple[str, str]] = []
    for x, ys in by_x.items():
        for i in range(0, len(ys), FD_CHECKS_PER_QUERY):
            chunk = ys[i : i + FD_CHECKS_PER_QUERY]
            inner = ["count(*) AS n"]
            outer = []
            for j, y in enumerate(chunk):
                inner.append(
                    f"min({key[y]}) AS mn{j}, max({key[y]}) AS mx{j}, count({key[y]}) AS c{j}"
                )
                outer.append(
                    f"coalesce(bool_and(mn{j} IS NOT DISTINCT FROM mx{j} "
                    f"AND (c{j} = 0 OR c{j} = n)), true)"
                )
            row = con.execute(
                f"SELECT {', '.join(outer)} FROM (SELECT {', '.join(inner)} FROM {source} "
                f"GROUP BY {key[x]})"
            ).fetchone()
            assert row is not None
            out.extend((x, y) for y, ok in zip(chunk, row) if ok)
    return out

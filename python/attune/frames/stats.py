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

from attune.frames.splitgen import APPROX, EXACT, ColumnStats, TableStats

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

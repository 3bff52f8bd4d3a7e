"""SplitDF: use a split directory as one table through Ibis, joining only the dimensions a query
needs (source chapter 4, section 4.3).

``connect(DIR)`` registers the fact and dimension tables with an Ibis backend (DuckDB by default,
or PySpark given a SparkSession) and defines a temporary view, named after the split, that joins
them all back: any Ibis expression on ``SplitFrame.table`` is correct as is.
``SplitFrame.to_pyarrow`` / ``execute`` / ``sql`` additionally rewrite the query: Ibis compiles the
expression to SQL, SQLGlot qualifies it and pushes projections down (on a copy, for analysis
only), which tells for every reference to the split table which of its columns that reference
uses; each reference is then replaced in the original SQL by a subquery over the fact table
joined only with the dimensions holding those columns (none for ``count()``). The rewritten SQL
is run through the same backend, so the code path is identical on DuckDB and PySpark.
On DuckDB, ``connect`` raises the database's ``perfect_ht_threshold`` so that a GROUP BY on a
dimension key (dense integers) uses a perfect hash table (``PERFECT_HT_MAX_BITS``).

Offset-coded fact columns (format version 2, ``attune.frames.split``) are decoded in the fact
subquery itself (``offset_decode_sql``), so the rest of the rewrite treats them as fact columns.

Correctness: every fact row has exactly one matching row per dimension (keys are dense and checked
at split time), so an inner join with any subset of the dimensions has exactly the fact's rows and
the subquery equals the projection of the full join. If the analysis cannot be done (an SQL shape
SQLGlot cannot qualify), the query runs unchanged on the full view; ``SplitFrame.last_rewrite``
says which happened.

Thread-safety: a SplitFrame wraps one Ibis connection; use it from one thread at a time.
"""

from __future__ import annotations

import json
import os
from collections import OrderedDict
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import sqlglot
from sqlglot import exp
from sqlglot.optimizer.merge_subqueries import merge_subqueries
from sqlglot.optimizer.pushdown_projections import pushdown_projections
from sqlglot.optimizer.qualify import qualify
from sqlglot.optimizer.scope import traverse_scope

from attune.frames.eager import MAX_PUSHED_KEYS_FRACTION, push_aggregates
from attune.frames.errors import SplitError
from attune.frames.split import (
    DATABASE_FILE,
    FORMAT_NAME,
    FORMAT_VERSIONS,
    KEY_WIDTHS,
    SCHEMA_FILE,
    offset_decode_sql,
)
from attune.frames.stats import quote

# Rewritten queries memoized per SplitFrame. Default 256: a notebook runs a few dozen distinct
# queries; each entry is one SQL string (a few kB), so the bound only guards long sessions.
REWRITE_CACHE_SIZE = 256

# Column types DuckDB groups with a perfect hash table when their range is small (integers);
# eager aggregation leaves GROUP BYs over such dimension columns to the join-first plan.
INTEGER_TYPES = (
    "TINYINT",
    "SMALLINT",
    "INTEGER",
    "BIGINT",
    "UTINYINT",
    "USMALLINT",
    "UINTEGER",
    "UBIGINT",
)

# Largest key range, in bits, for which connect() lets DuckDB aggregate with a perfect hash table
# (an array indexed by the group value; DuckDB's setting ``perfect_ht_threshold``, default 12
# bits = 4,096 groups). Split keys are dense integers 0..n-1 with exact min/max statistics, the
# case that table is made for, but most dimensions have more than 4,096 rows, so eager
# aggregation's GROUP BY key fell back to a general hash table (flights ``monthly``: 3.2 ms for
# the GROUP BY of 4,349 keys vs 2.1 ms with a perfect table, by DuckDB's own profile). Default 18
# (262,144 groups): DuckDB allocates the array per thread whenever the group columns' combined
# range fits, so a bound keeps that allocation to a few MB.
PERFECT_HT_MAX_BITS = 18


def read_schema(directory: str | os.PathLike) -> dict:
    """Read and validate ``schema.json`` of a split directory (docs/formats/split-schema.md)."""
    d = Path(directory)
    f = d / SCHEMA_FILE
    if not f.is_file():
        raise SplitError(f"{d}: not a split directory (no {SCHEMA_FILE})")
    try:
        s = json.loads(f.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise SplitError(f"{f}: unreadable: {exc}") from exc
    try:
        if s["format"] != FORMAT_NAME:
            raise SplitError(f"{f}: format is {s['format']!r}, expected {FORMAT_NAME!r}")
        if s["version"] not in FORMAT_VERSIONS:
            raise SplitError(
                f"{f}: version {s['version']} not supported (want one of {FORMAT_VERSIONS})"
            )
        offsets = s["fact"].get("offsets", {})
        if offsets and s["version"] < 2:
            raise SplitError(f"{f}: offset-coded columns need version 2, file says 1")
        for c, code in offsets.items():
            if c not in s["fact"]["columns"]:
                raise SplitError(f"{f}: offset-coded column {c!r} is not a fact column")
            if code["stored_type"] not in KEY_WIDTHS or not isinstance(code["offset"], int):
                raise SplitError(f"{f}: bad offset code for column {c!r}: {code!r}")
        names = [c["name"] for c in s["columns"]]
        placed = list(s["fact"]["columns"]) + [c for d_ in s["dims"] for c in d_["columns"]]
        if sorted(placed) != sorted(names) or len(set(names)) != len(names):
            raise SplitError(f"{f}: columns of fact and dimensions do not partition the table")
        if len(s["fact"]["keys"]) != len(s["dims"]):
            raise SplitError(f"{f}: {len(s['dims'])} dimensions but {len(s['fact']['keys'])} keys")
        for key, dim in zip(s["fact"]["keys"], s["dims"]):
            if dim["key"] != key:
                raise SplitError(f"{f}: dimension {dim['table']} key {dim['key']} != {key}")
            if s["storage"] == "parquet" and not (d / dim["file"]).is_file():
                raise SplitError(f"{d}: missing {dim['file']}")
        if s["storage"] == "parquet" and not (d / s["fact"]["file"]).is_file():
            raise SplitError(f"{d}: missing {s['fact']['file']}")
        if s["storage"] == "duckdb" and not (d / s["database"]).is_file():
            raise SplitError(f"{d}: missing {s['database']}")
    except (KeyError, TypeError) as exc:
        raise SplitError(f"{f}: malformed schema ({exc!r})") from exc
    return s


def _join_sql(
    schema: dict,
    fact: str,
    dims: list[str],
    columns: list[str] | None,
    keys: list[int] = (),
) -> str:
    """DuckDB-dialect SQL: fact joined with the dimensions holding ``columns`` (None: all),
    also exposing the fact's keys of the dimensions ``keys``."""
    wanted = [c["name"] for c in schema["columns"]] if columns is None else columns
    where = {c["name"]: c["table"] for c in schema["columns"]}
    dim_ix = {d["table"]: i for i, d in enumerate(schema["dims"])}
    used = sorted({dim_ix[where[c]] for c in wanted if where[c] != "fact"})
    offsets = schema["fact"].get("offsets", {})
    types = {c["name"]: c["type"] for c in schema["columns"]}
    sel = []
    for c in wanted:
        alias = "f" if where[c] == "fact" else f"d{dim_ix[where[c]]}"
        if c in offsets:  # stored as value - offset (attune.frames.split, OFFSET_INT_TYPES)
            ref = offset_decode_sql(f"f.{quote(c)}", offsets[c]["offset"], types[c])
            sel.append(f"{ref} AS {quote(c)}")
        else:
            sel.append(f"{alias}.{quote(c)} AS {quote(c)}")
    for i in keys:
        k = quote(schema["dims"][i]["key"])
        sel.append(f"f.{k} AS {k}")
    if not sel:
        sel = ["1 AS __attune_unit"]
    sql = f"SELECT {', '.join(sel)} FROM {fact} AS f"
    for i in used:
        key = quote(schema["dims"][i]["key"])
        sql += f" INNER JOIN {dims[i]} AS d{i} ON f.{key} = d{i}.{key}"
    return sql


def _merge_subqueries(ast: exp.Expression) -> exp.Expression:
    """SQLGlot's ``merge_subqueries``, or ``ast`` unchanged if the merge left a column naming a
    source its scope does not have (sqlglot 30 forgets to rename columns inside aggregates
    when the merged subquery's column is also a GROUP BY key)."""
    merged = merge_subqueries(ast.copy())
    for scope in traverse_scope(merged):
        names = set(scope.sources) | set(scope.selected_sources)
        for col in scope.columns:
            if col.table and col.table not in names:
                return ast
    return merged


class SplitFrame:
    """A split directory opened through an Ibis backend; see the module doc."""

    def __init__(self, con: Any, schema: dict, name: str, fact: str, dims: list[str]):
        self.con = con
        self.schema = schema
        self.name = name
        self._fact = fact
        self._dims = dims
        self._dialect = con.dialect
        self._by_lower = {c["name"].lower(): c["name"] for c in schema["columns"]}
        self._sql_schema = {c["name"]: c["type"] for c in schema["columns"]}
        self.last_rewrite: dict = {}
        # (Ibis op, eager settings) -> (rewritten SQL, last_rewrite)
        self._cache: OrderedDict = OrderedDict()
        self._subqueries: dict[tuple, exp.Expression] = {}
        # Group on dimension keys before joining (attune.frames.eager); off: join, then group.
        self.eager_aggregation = True
        self.eager_max_fraction = MAX_PUSHED_KEYS_FRACTION

    @property
    def table(self):
        """The split table as one Ibis table (the full-join view)."""
        return self.con.table(self.name)

    def sql(self, expr) -> str:
        """The backend SQL for ``expr`` with only the needed dimensions joined.

        Rewrites are memoized by the expression's Ibis operation (immutable and hashed once):
        the rewrite is a pure function of the expression and of schemas that are part of it, so
        running the same expression again (a re-run notebook cell) skips the analysis."""
        # The settings are part of the key: changing them must not return an old rewrite.
        op = (expr.op(), self.eager_aggregation, self.eager_max_fraction)
        try:
            hit = self._cache.get(op)
        except TypeError:  # an unhashable literal somewhere in the expression: no memo
            op, hit = None, None
        if hit is not None:
            self._cache.move_to_end(op)
            self.last_rewrite = {**hit[1], "cached": True}
            return hit[0]
        names = list(expr.as_table().schema().names)
        try:
            # Ibis's own SQLGlot tree: no text round trip (printing and re-parsing the query
            # cost more than the analysis itself).
            out = self._rewrite(self.con.compiler.to_sqlglot(expr), names)
        except (sqlglot.errors.SqlglotError, KeyError, ValueError) as exc:
            self.last_rewrite = {"rewritten": False, "reason": repr(exc)}
            return str(self.con.compile(expr))
        if op is not None:
            self._cache[op] = (out, dict(self.last_rewrite))
            while len(self._cache) > REWRITE_CACHE_SIZE:
                self._cache.popitem(last=False)
        return out

    def _subquery(self, cols: list[str], keys: list[int] = ()) -> exp.Expression:
        """Parsed fact-join-dimensions subquery for ``cols`` plus the fact's ``keys`` (parsed
        once per column set)."""
        key = (tuple(cols), tuple(keys))
        sub = self._subqueries.get(key)
        if sub is None:
            sub = sqlglot.parse_one(
                _join_sql(self.schema, self._fact, self._dims, cols, keys), read="duckdb"
            )
            self._subqueries[key] = sub
        return sub.copy()

    def _dim_table(self, i: int) -> exp.Expression:
        return sqlglot.parse_one(self._dims[i], into=exp.Table, read="duckdb")

    def _push_aggregates(self, ast: exp.Expression) -> tuple[exp.Expression, list[dict]]:
        """Eager aggregation (``attune.frames.eager``) on a qualified, merged tree."""
        dim_ix = {d["table"]: i for i, d in enumerate(self.schema["dims"])}
        where = {
            c["name"].lower(): (None if c["table"] == "fact" else dim_ix[c["table"]])
            for c in self.schema["columns"]
        }
        order = [c["name"] for c in self.schema["columns"]]

        def subquery(lower_cols: list[str], keys: list[int]) -> exp.Expression:
            wanted = {self._by_lower[c] for c in lower_cols}
            return self._subquery([c for c in order if c in wanted], keys)

        return push_aggregates(
            ast,
            lambda t: t.name.lower() == self.name.lower(),
            where,
            self.schema["dims"],
            int(self.schema["nrows"]),
            subquery,
            self._dim_table,
            self.eager_max_fraction,
            frozenset(
                c["name"].lower()
                for c in self.schema["columns"]
                if c["type"].upper() in INTEGER_TYPES
            ),
        )

    def _rewrite(self, ast: exp.Expression, names: list[str]) -> str:
        """Qualify + push projections down (SQLGlot), then swap each reference to the split table
        for a subquery joining only the dimensions that reference uses.

        Qualifying normalizes identifiers (lower case in DuckDB and Spark, both case-insensitive),
        so the output columns are renamed back to ``names``, the expression's own column names.
        """
        ast = pushdown_projections(
            qualify(
                ast,
                schema={self.name: self._sql_schema, **self._other_schemas(ast)},
                dialect=self._dialect,
            )
        )
        # Merging the per-step subqueries Ibis emits (filter, project, aggregate) exposes
        # "GROUP BY over the split table" to eager aggregation.
        ast = _merge_subqueries(ast)
        pushed: list[dict] = []
        if self.eager_aggregation:
            ast, pushed = self._push_aggregates(ast)
        needed: dict[int, set[str]] = {}
        for scope in traverse_scope(ast):
            for alias, source in scope.sources.items():
                if isinstance(source, exp.Table) and source.name.lower() == self.name.lower():
                    cols = needed.setdefault(id(source), set())
                    for col in scope.columns:
                        if col.table.lower() == alias.lower():
                            cols.add(self._by_lower[col.name.lower()])
        order = [c["name"] for c in self.schema["columns"]]
        used: list[list[str]] = []

        def replace(node: exp.Expression) -> exp.Expression:
            if isinstance(node, exp.Table) and node.name.lower() == self.name.lower():
                if id(node) not in needed:
                    raise ValueError(f"no analysis for a reference to {node.sql()}")
                cols = [c for c in order if c in needed[id(node)]]
                used.append(cols)
                return exp.Subquery(
                    this=self._subquery(cols),
                    alias=exp.TableAlias(this=exp.to_identifier(node.alias_or_name)),
                )
            return node

        out = ast.transform(replace, copy=False)
        top = out
        while isinstance(top, exp.SetOperation):
            top = top.left
        if not isinstance(top, exp.Select) or len(top.expressions) != len(names):
            raise ValueError("cannot map the output columns back to their names")
        top.set(
            "expressions",
            [
                exp.alias_(e.unalias() if isinstance(e, exp.Alias) else e, n, quoted=True)
                for e, n in zip(top.expressions, names)
            ],
        )
        self.last_rewrite = {"rewritten": True, "columns": used, "eager": pushed}
        return out.sql(dialect=self._dialect)

    def _other_schemas(self, ast: exp.Expression) -> dict:
        other = {}
        for t in ast.find_all(exp.Table):
            if t.name.lower() != self.name.lower() and t.name and t.name not in other:
                try:
                    sch = self.con.get_schema(t.name)
                except Exception:  # noqa: BLE001, S112 - CTE names; qualify copes
                    continue
                other[t.name] = {n: str(ty) for n, ty in sch.items()}
        return other

    def to_pyarrow(self, expr) -> pa.Table:
        """Run ``expr`` with the rewrite; the result as a pyarrow.Table.

        On DuckDB the rewritten SQL goes straight to the DuckDB connection (a second pass
        through Ibis costs milliseconds per query) and the result is cast to the Arrow schema
        Ibis would give; other backends run it through Ibis.
        """
        if self.con.name == "duckdb":
            schema = expr.as_table().schema().to_pyarrow()
            sql = self.sql(expr)
            return self.con.con.sql(sql).to_arrow_table().cast(schema)
        return self._run(expr).to_pyarrow()

    def _run(self, expr):
        # The rewritten query has the schema of the original expression; passing it spares a
        # round trip (and ibis 12 + duckdb 2's broken schema probe).
        schema = expr.as_table().schema()
        return self.con.sql(self.sql(expr), schema=schema, dialect=self._dialect)

    def execute(self, expr):
        """Like ``expr.execute()`` (pandas DataFrame, Series or scalar), with the rewrite."""
        import ibis.expr.types as ir

        result = self._run(expr)
        if isinstance(expr, ir.Table):
            return result.execute()
        if isinstance(expr, ir.Column):
            return result.execute().iloc[:, 0].rename(expr.get_name())
        return result.to_pyarrow().column(0)[0].as_py()


def connect(
    directory: str | os.PathLike,
    *,
    backend: str = "duckdb",
    session: Any = None,
    con: Any = None,
    name: str | None = None,
    load: str = "view",
) -> SplitFrame:
    """Open a split directory. ``backend``: "duckdb" (default; ``con`` may be an existing Ibis
    DuckDB connection) or "pyspark" (``session``: a SparkSession). The split table appears in
    ``SplitFrame.con`` as a view named ``name`` (default: the name in schema.json).

    ``load``: "view" (default) reads the Parquet files at query time; "table" (DuckDB only)
    copies the fact and dimension tables into the DuckDB connection first, as a notebook that
    loads its data does."""
    import ibis

    d = Path(directory).resolve()
    schema = read_schema(d)
    name = name or schema["name"]
    prefix = f"__attune_{name}"
    if backend == "duckdb":
        con = con or ibis.duckdb.connect()
    elif backend == "pyspark":
        if session is None and con is None:
            raise SplitError("backend 'pyspark' needs session=SparkSession (or con=)")
        con = con or ibis.pyspark.connect(session)
    else:
        raise SplitError(f"unknown backend {backend!r}; expected 'duckdb' or 'pyspark'")
    tables = [schema["fact"]] + list(schema["dims"])
    reg = []
    if load not in ("view", "table") or (load == "table" and backend != "duckdb"):
        raise SplitError(f"load={load!r} not supported with backend {backend!r}")
    if schema["storage"] == "parquet":
        for t in tables:
            tname = f"{prefix}_{t['table']}"
            if load == "table":
                lit = str(d / t["file"]).replace("'", "''")
                con.raw_sql(
                    f"CREATE OR REPLACE TEMP TABLE {quote(tname)} AS "
                    f"SELECT * FROM read_parquet('{lit}')"
                )
            else:
                con.read_parquet(str(d / t["file"]), table_name=tname)
            reg.append(tname)
    else:
        if backend != "duckdb":
            raise SplitError("storage 'duckdb' can only be opened with the duckdb backend")
        db = str(d / schema["database"]).replace("'", "''")
        alias = f"{prefix}_db"
        con.raw_sql(f"ATTACH IF NOT EXISTS '{db}' AS {quote(alias)} (READ_ONLY)")
        reg = [f"{quote(alias)}.{quote(t['table'])}" for t in tables]
    if backend == "duckdb":
        _raise_perfect_ht_threshold(con, schema)
    quoted = [r if r.startswith('"') else quote(r) for r in reg]
    full = _join_sql(schema, quoted[0], quoted[1:], None)
    view = f"CREATE OR REPLACE TEMPORARY VIEW {quote(name)} AS {full}"
    con.raw_sql(sqlglot.transpile(view, read="duckdb", write=con.dialect)[0])
    return SplitFrame(con, schema, name, quoted[0], quoted[1:])


def perfect_ht_bits(schema: dict) -> int:
    """Bits DuckDB needs for the largest dimension's keys 0..n-1 plus NULL (n + 1 values: 13 bits
    for 4,096 keys), capped at ``PERFECT_HT_MAX_BITS``."""
    largest = max((int(d["nrows"]) for d in schema["dims"]), default=1)
    return min(largest.bit_length(), PERFECT_HT_MAX_BITS)


def _raise_perfect_ht_threshold(con: Any, schema: dict) -> None:
    """Let DuckDB group by a dimension key with a perfect hash table (``PERFECT_HT_MAX_BITS``).

    The setting is global to the DuckDB database behind ``con``; it is only ever raised, never
    lowered, so a connection the caller tuned keeps its value if that is higher."""
    bits = perfect_ht_bits(schema)
    cur = con.con.execute("SELECT current_setting('perfect_ht_threshold')").fetchall()[0][0]
    if int(cur) < bits:
        con.con.execute(f"SET perfect_ht_threshold = {bits}")


def read_split(directory: str | os.PathLike) -> pa.Table:
    """The reconstructed table (same row multiset, column order and types as the split input)."""
    d = Path(directory).resolve()
    schema = read_schema(d)
    con = duckdb.connect()
    try:
        tables = [schema["fact"]] + list(schema["dims"])
        if schema["storage"] == "parquet":
            refs = []
            for t in tables:
                lit = str(d / t["file"]).replace("'", "''")
                refs.append(f"read_parquet('{lit}')")
        else:
            db = str(d / schema.get("database", DATABASE_FILE)).replace("'", "''")
            con.execute(f"ATTACH '{db}' AS s (READ_ONLY)")
            refs = [f"s.{quote(t['table'])}" for t in tables]
        try:
            return con.sql(_join_sql(schema, refs[0], refs[1:], None)).to_arrow_table()
        except duckdb.Error as exc:
            raise SplitError(f"{d}: cannot read split: {exc}") from exc
    finally:
        con.close()

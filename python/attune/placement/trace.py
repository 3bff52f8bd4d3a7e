"""Workload traces: which columns each table scan of each query reads, extracted from SQL.

A query is parsed with SQLGlot (DuckDB dialect), its columns qualified against the schema, and
every occurrence of a base table in a FROM or JOIN becomes one scan: the table and the columns
read through that occurrence anywhere in the query (correlated subqueries included). A CTE or
subquery read twice scans its tables twice, as an engine that does not share scans would.

A trace file is JSON lines, one object per query: ``{"query": "q01", "scans": [{"table":
"lineitem", "columns": ["l_quantity", ...]}, ...]}``.
"""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path

import sqlglot
from sqlglot import exp
from sqlglot.errors import SqlglotError
from sqlglot.optimizer.qualify import qualify
from sqlglot.optimizer.scope import traverse_scope

from attune.errors import InvalidArgumentError, WorkloadError
from attune.placement.model import Scan

#: The TPC-H schema (column names; types as in the specification).
TPCH_SCHEMA: dict[str, dict[str, str]] = {
    "region": {"r_regionkey": "INT", "r_name": "TEXT", "r_comment": "TEXT"},
    "nation": {
        "n_nationkey": "INT",
        "n_name": "TEXT",
        "n_regionkey": "INT",
        "n_comment": "TEXT",
    },
    "supplier": {
        "s_suppkey": "INT",
        "s_name": "TEXT",
        "s_address": "TEXT",
        "s_nationkey": "INT",
        "s_phone": "TEXT",
        "s_acctbal": "DECIMAL",
        "s_comment": "TEXT",
    },
    "customer": {
        "c_custkey": "INT",
        "c_name": "TEXT",
        "c_address": "TEXT",
        "c_nationkey": "INT",
        "c_phone": "TEXT",
        "c_acctbal": "DECIMAL",
        "c_mktsegment": "TEXT",
        "c_comment": "TEXT",
    },
    "part": {
        "p_partkey": "INT",
        "p_name": "TEXT",
        "p_mfgr": "TEXT",
        "p_brand": "TEXT",
        "p_type": "TEXT",
        "p_size": "INT",
        "p_container": "TEXT",
        "p_retailprice": "DECIMAL",
        "p_comment": "TEXT",
    },
    "partsupp": {
        "ps_partkey": "INT",
        "ps_suppkey": "INT",
        "ps_availqty": "INT",
        "ps_supplycost": "DECIMAL",
        "ps_comment": "TEXT",
    },
    "orders": {
        "o_orderkey": "INT",
        "o_custkey": "INT",
        "o_orderstatus": "TEXT",
        "o_totalprice": "DECIMAL",
        "o_orderdate": "DATE",
        "o_orderpriority": "TEXT",
        "o_clerk": "TEXT",
        "o_shippriority": "INT",
        "o_comment": "TEXT",
    },
    "lineitem": {
        "l_orderkey": "INT",
        "l_partkey": "INT",
        "l_suppkey": "INT",
        "l_linenumber": "INT",
        "l_quantity": "DECIMAL",
        "l_extendedprice": "DECIMAL",
        "l_discount": "DECIMAL",
        "l_tax": "DECIMAL",
        "l_returnflag": "TEXT",
        "l_linestatus": "TEXT",
        "l_shipdate": "DATE",
        "l_commitdate": "DATE",
        "l_receiptdate": "DATE",
        "l_shipinstruct": "TEXT",
        "l_shipmode": "TEXT",
        "l_comment": "TEXT",
    },
}


def tpch_queries() -> dict[str, str]:
    """The 22 TPC-H queries (DuckDB dialect), ``q01`` .. ``q22``, as the installed ibis package
    ships them (``ibis/backends/tests/tpc/queries/duckdb/h/NN.sql``; ibis is a dependency of
    attune), so that no copy of the TPC's query text lives in this repository."""
    try:
        base = resources.files("ibis") / "backends" / "tests" / "tpc" / "queries" / "duckdb" / "h"
        return {
            f"q{i:02d}": (base / f"{i:02d}.sql").read_text(encoding="utf-8") for i in range(1, 23)
        }
    except (ModuleNotFoundError, FileNotFoundError) as e:
        raise WorkloadError(
            f"the TPC-H queries come from the installed ibis-framework package and were not "
            f"found there ({e}); reinstall it with `pip install 'ibis-framework[duckdb]'`"
        ) from None


def extract_scans(
    sql: str, schema: dict[str, dict[str, str]], *, name: str = "query"
) -> list[Scan]:
    """The table scans of one SQL query, in the order their tables appear."""
    try:
        tree = sqlglot.parse_one(sql, read="duckdb")
    except SqlglotError as e:
        raise WorkloadError(f"{name}: cannot parse SQL: {e}") from None
    # `EXISTS (SELECT * ...)` reads no columns through its star: count only what it filters on.
    for ex in tree.find_all(exp.Exists):
        inner = ex.this
        if isinstance(inner, exp.Select) and any(
            isinstance(e, exp.Star) for e in inner.expressions
        ):
            inner.set("expressions", [exp.Literal.number(1)])
    try:
        tree = qualify(tree, schema=schema, dialect="duckdb", validate_qualify_columns=True)
    except SqlglotError as e:
        raise WorkloadError(f"{name}: {e}") from None
    scopes = traverse_scope(tree)
    # one entry per base-table occurrence: (scope id, alias) -> [table, set of columns]
    occ: dict[tuple[int, str], tuple[str, set[str]]] = {}
    order: list[tuple[int, str]] = []
    for sc in scopes:
        for alias, source in sc.selected_sources.items():
            node = source[1] if isinstance(source, tuple) else source
            if isinstance(node, exp.Table):
                table = node.name.lower()
                if table not in schema:
                    raise WorkloadError(f"{name}: unknown table {node.name!r}")
                occ[(id(sc), alias)] = (table, set())
                order.append((id(sc), alias))
    for sc in scopes:
        for col in sc.columns:
            if not col.table:
                continue
            owner = sc
            while owner is not None and col.table not in owner.selected_sources:
                owner = owner.parent
            if owner is None:
                continue
            entry = occ.get((id(owner), col.table))
            if entry is None:
                continue  # a derived table or CTE column: its own scans cover it
            table, cols = entry
            if col.name not in schema[table]:
                raise WorkloadError(f"{name}: unknown column {table}.{col.name}")
            cols.add(col.name)
    scans = []
    for key in order:
        table, cols = occ[key]
        ordered = tuple(c for c in schema[table] if c in cols)
        scans.append(Scan(table, ordered))
    return scans


def extract_workload(
    queries: dict[str, str], schema: dict[str, dict[str, str]]
) -> dict[str, list[Scan]]:
    return {q: extract_scans(sql, schema, name=q) for q, sql in queries.items()}


def write_trace(path: str | Path, queries: dict[str, list[Scan]]) -> None:
    with open(path, "w", encoding="utf-8") as f:
        for q, scans in queries.items():
            rec = {
                "query": q,
                "scans": [{"table": s.table, "columns": list(s.columns)} for s in scans],
            }
            f.write(json.dumps(rec) + "\n")


def read_trace(path: str | Path) -> dict[str, list[Scan]]:
    out: dict[str, list[Scan]] = {}
    try:
        lines = Path(path).read_text(encoding="utf-8").splitlines()
    except OSError as e:
        raise InvalidArgumentError(f"trace {path}: cannot read: {e}") from None
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
            q = str(rec["query"])
            scans = [
                Scan(str(s["table"]), tuple(str(c) for c in s["columns"])) for s in rec["scans"]
            ]
        except (ValueError, KeyError, TypeError) as e:
            raise WorkloadError(f"trace {path}:{n}: not a trace record ({e})") from None
        out.setdefault(q, []).extend(scans)
    if not out:
        raise WorkloadError(f"trace {path}: no queries")
    return out

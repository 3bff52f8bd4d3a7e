"""attune.frames: split dataframes (source chapter 4).

- ``split_file`` / ``split_arrow``: choose attribute groups with SplitGen (``splitgen``) from column
  statistics and exact functional dependencies (``stats``; ``strategy="paper"`` for Algorithm 6
  as printed) and write a fact table, dimension tables and ``schema.json`` (``split``).
- ``connect``: open a split directory through Ibis (DuckDB or PySpark) as one table, joining only
  the dimensions each query needs (``splitdf``).
- ``read_split``: the reconstructed table as a pyarrow.Table.

Errors are ``SplitError`` (an ``attune.Error``). Functions are safe to call from several threads
on different directories; a ``SplitFrame`` is for one thread at a time. Design: docs/splitdf.md.
"""

from attune.frames.errors import SplitError
from attune.frames.split import SplitResult, split_arrow, split_file
from attune.frames.splitdf import SplitFrame, connect, read_schema, read_split
from attune.frames.splitgen import (
    APPROX,
    EXACT,
    FD,
    PAPER,
    STRATEGIES,
    ColumnStats,
    Dependency,
    Plan,
    TableStats,
    gen_attribute_groups,
)

__all__ = [
    "APPROX",
    "EXACT",
    "FD",
    "PAPER",
    "STRATEGIES",
    "ColumnStats",
    "Dependency",
    "Plan",
    "SplitError",
    "SplitFrame",
    "SplitResult",
    "TableStats",
    "connect",
    "gen_attribute_groups",
    "read_schema",
    "read_split",
    "split_arrow",
    "split_file",
]

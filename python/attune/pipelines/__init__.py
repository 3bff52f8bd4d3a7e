"""Zero-copy, zero-duplication Arrow pipelines across processes (Kelvin, on stock Linux).

* :mod:`attune.pipelines.sipc` — tables shared by reference: one small table file plus one
  tmpfs file per column and one for dictionaries; readers map read-only; outputs whose buffers
  lie in mapped inputs are written as references (resharing).
* :mod:`attune.pipelines.arena` — shared-file memory for producers that can write into memory
  they are given (the allocation path that needs no copy), and the measured copy path otherwise.
* :mod:`attune.pipelines.dag` — DAGs of Python functions Table -> Table, each node in its own
  process, edges passing SIPC references.
* :mod:`attune.pipelines.decache` — shared loaders keyed by (file, dictionary columns),
  reference-counted across processes.
* :mod:`attune.pipelines.shmpool` — pyarrow's allocations in shared files;
  :mod:`attune.pipelines.recycle` — dropped tables' files kept, bounded, as warm pages for the
  next segments.

Design: docs/kelvin.md; format: docs/formats/sipc.md.
"""

from __future__ import annotations

from attune.pipelines.arena import Arena
from attune.pipelines.dag import (
    DAG,
    Node,
    NodeFailedError,
    PipelineError,
    RunResult,
    UnguardedMainError,
    WorkerPool,
    close_shared_pools,
    shared_pool,
)
from attune.pipelines.decache import DeCache
from attune.pipelines.sipc import WriteStats, read_table, table_files, write_table

__all__ = [
    "DAG",
    "Arena",
    "DeCache",
    "Node",
    "NodeFailedError",
    "PipelineError",
    "RunResult",
    "UnguardedMainError",
    "WorkerPool",
    "WriteStats",
    "close_shared_pools",
    "read_table",
    "shared_pool",
    "table_files",
    "write_table",
]

"""Shared-file memory for producers: the allocation path that needs no copy.

Linux shares memory through files (tmpfs); ``malloc`` hands out anonymous memory, which cannot be
shared without a copy (the source's "data origination" challenge). Without a kernel module that
re-labels anonymous pages as file pages (DeAnon), the only copy-free path is to give the producer
shared-file memory to write into. An :class:`Arena` does that: every allocation is a tmpfs file
mapped read-write and registered with SIPC's range registry, so when the node's output table
holds buffers from the arena, :func:`attune.pipelines.sipc.write_table` writes references to
those files instead of copying them.

Who can use it: any producer that writes into memory it is given — numpy ``out=`` arguments,
``np.frombuffer`` views, ``pyarrow.Array.from_buffers`` over arena buffers, file reads with
``readinto``. Producers that allocate for themselves (pyarrow compute kernels via their memory
pool, DuckDB, pandas) take the copy path: their buffers are written into the column files once,
and the writer counts those bytes (``WriteStats.bytes_copied``). docs/kelvin.md says what a
pyarrow memory pool over the arena needs (a C++ ``arrow::MemoryPool``) and what DeAnon adds.

An allocation is one file (no sub-allocation): allocations a producer makes for output columns
are few and large. Thread-safety: one arena per thread (or an outside lock).
"""

from __future__ import annotations

import itertools
import mmap
import os

import numpy as np
import pyarrow as pa

from attune.errors import InvalidArgumentError
from attune.pipelines.sipc import register_range

__all__ = ["Arena"]


class Arena:
    """Allocates writable shared-file buffers under ``directory`` (a tmpfs directory).

    The files stay after the arena's maps are gone (a table written from them refers to them);
    files no table refers to are removed with the directory that holds them (a DAG run's
    directory) or by :meth:`attune.pipelines.dag.Store.collect`.
    """

    _counter = itertools.count()

    def __init__(self, directory: str | os.PathLike, *, prefix: str = "arena") -> None:
        self.directory = os.path.abspath(os.fspath(directory))
        self.prefix = f"{prefix}-{os.getpid()}-{next(self._counter)}"
        self._n = 0
        self.bytes_allocated = 0
        self.paths: list[str] = []

    def buffer(self, nbytes: int) -> pa.Buffer:
        """A mutable pyarrow buffer of ``nbytes`` zero bytes in a new shared file."""
        if nbytes < 0:
            raise InvalidArgumentError(f"cannot allocate {nbytes} bytes")
        path = os.path.join(self.directory, f"{self.prefix}.{self._n}")
        self._n += 1
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            if nbytes == 0:
                return pa.py_buffer(bytearray())
            os.ftruncate(fd, nbytes)
            mm = mmap.mmap(fd, nbytes, flags=mmap.MAP_SHARED, prot=mmap.PROT_READ | mmap.PROT_WRITE)
        finally:
            os.close(fd)
        buf = pa.py_buffer(mm)
        register_range(mm, buf, path)
        self.bytes_allocated += nbytes
        self.paths.append(path)
        return buf

    def empty(self, shape: int | tuple[int, ...], dtype: object = np.float64) -> np.ndarray:
        """A numpy array in shared-file memory (zero-filled, like tmpfs pages are)."""
        dt = np.dtype(dtype)
        count = int(np.prod(shape)) if not isinstance(shape, int) else shape
        if count < 0:
            raise InvalidArgumentError(f"bad shape {shape}")
        buf = self.buffer(count * dt.itemsize)
        return np.frombuffer(buf, dtype=dt, count=count).reshape(shape)

    def array(self, values: np.ndarray) -> pa.Array:
        """A pyarrow array over an arena-backed 1-d numpy array (no copy, no nulls)."""
        if values.ndim != 1:
            raise InvalidArgumentError("Arena.array takes a 1-d array")
        return pa.array(values, from_pandas=False)

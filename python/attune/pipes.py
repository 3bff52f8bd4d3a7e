"""Data Pipes from Python: declare where data lives, connect locators with pipes, move bytes.

Locators (:class:`Locator`): ``Locator.dram(n)`` (memory the library owns),
``Locator.core_cache(core)`` (a buffer the size of that core's L2 cache),
``Locator.pmem(path, n)`` (a shared file mapping, under ``/dev/shm`` or a DAX mount: the
persistent-memory stand-in) and ``Locator.file(path, direct=False, write=False, create=False)``.
A :class:`Runtime` chooses the mechanism (io_uring, else pread/pwrite threads, else mmap copies;
memcpy between memories) and reports any fallback in ``Runtime.report()``.

Flavours: ``pipe.transfer_blocking(src_off, dst_off, n)`` waits (the GIL released);
:func:`transfer` returns a :class:`concurrent.futures.Future` of the bytes moved (``cancel()``
stops the transfer); ``pipe.fileno()`` is an eventfd for ``select``/``selectors`` that becomes
readable when a transfer ends. :func:`sort` is the external sort built on pipes.

Memory is never borrowed from Python: ``Locator.read`` / ``Locator.write`` copy, and are refused
(``attune.Error``) while a transfer uses the memory. Errors: a short file, a full disk or a failed
read or write raise :class:`attune.StorageIOError` (``path``, ``offset``); bad locators, ranges,
alignment and paths the runtime cannot serve raise :class:`attune.InvalidArgumentError`.
Design and measurements: docs/data-pipes.md.
"""

from __future__ import annotations

import concurrent.futures
import os
import threading
from collections.abc import Callable

from attune._native import (
    Locator,
    Pipe,
    PipeTransfer,
    pipes_gen_lines,
    pipes_gen_records,
    pipes_sort,
)
from attune._native import PipeRuntime as Runtime

__all__ = [
    "Locator",
    "Pipe",
    "PipeTransfer",
    "Runtime",
    "TransferFuture",
    "generate_lines",
    "generate_records",
    "sort",
    "transfer",
]


class TransferFuture(concurrent.futures.Future):
    """A future of one transfer's bytes; ``cancel()`` stops the transfer itself."""

    def __init__(self, handle: PipeTransfer) -> None:
        super().__init__()
        self._handle = handle

    def cancel(self) -> bool:
        self._handle.cancel()
        return super().cancel()

    @property
    def bytes_done(self) -> int:
        return self._handle.bytes_done


def transfer(pipe: Pipe, src_offset: int, dst_offset: int, length: int) -> TransferFuture:
    """Starts moving ``length`` bytes through ``pipe``; returns a future of the bytes moved.

    The future completes from a small waiter thread (which holds no GIL while it waits), so
    callbacks added with ``add_done_callback`` run on that thread."""
    handle = pipe.transfer(src_offset, dst_offset, length)
    fut = TransferFuture(handle)

    def waiter() -> None:
        try:
            n = handle.wait()
        except BaseException as exc:  # noqa: BLE001 - handed to the future
            if not fut.cancelled():
                fut.set_exception(exc)
            return
        if not fut.cancelled():
            fut.set_result(n)

    threading.Thread(target=waiter, name="attune-pipes-future", daemon=True).start()
    return fut


def sort(
    input: str | os.PathLike,
    output: str | os.PathLike,
    *,
    memory_bytes: int = 256 << 20,
    run_bytes: int | None = None,
    fan_in: int = 4,
    merge_fan_in: int | None = None,
    merge_select: str = "heap",
    block_bytes: int | None = None,
    staging_dir: str | os.PathLike | None = None,
    threads: int | None = None,
    double_buffering: bool = True,
    early_spill: bool = True,
    direct_io: bool = True,
    mechanism: str = "auto",
    progress: Callable[[str, int, int], None] | None = None,
    record_format: str = "fixed",
) -> dict:
    """Sorts a file of 100-byte records by their first 10 bytes (the sort benchmark's format)
    into ``output``, using at most ``memory_bytes`` of buffers. The output is written under a
    temporary name and renamed when complete: an error or Ctrl-C leaves no partial output.
    ``record_format="lines"`` sorts lines ended by ``\n`` instead, of any length up to
    ``block_bytes`` (default 1,024,000 with the ``\n``), byte by byte on the whole line (the
    order of ``LC_ALL=C sort``); an empty input gives an empty output, a last line without
    ``\n`` gets one, a longer line is an ``InvalidArgumentError`` naming its offset. Lines are merged
    with a heap (``merge_select`` must stay ``"heap"``).
    ``merge_select`` picks how merges find the next record: ``"heap"`` (default, a binary
    heap), ``"loser-tree"`` (log2(k) comparisons per record) or ``"scan"`` (k comparisons).
    ``direct_io`` reads and writes the files with O_DIRECT where the file system allows it
    (``False``: through the page cache).
    ``progress(phase, done_bytes, total_bytes)`` is called after each run and merge step.
    Returns the sort's report (records, runs spilled, merge passes, seconds per phase, ...)."""
    return pipes_sort(
        os.fspath(input),
        os.fspath(output),
        memory_bytes=memory_bytes,
        run_bytes=run_bytes,
        fan_in=fan_in,
        merge_fan_in=merge_fan_in,
        merge_select=merge_select,
        block_bytes=block_bytes,
        staging_dir=None if staging_dir is None else os.fspath(staging_dir),
        threads=threads,
        double_buffering=double_buffering,
        early_spill=early_spill,
        direct_io=direct_io,
        mechanism=mechanism,
        progress=progress,
        record_format=record_format,
    )


def generate_lines(
    path: str | os.PathLike,
    lines: int,
    *,
    min_bytes: int = 10,
    max_bytes: int = 200,
    seed: int = 1,
) -> int:
    """Writes ``lines`` lines of ``min_bytes..max_bytes`` printable characters (uniform length,
    then ``\n``) to ``path``, the same stream for the same seed; returns the bytes written."""
    return pipes_gen_lines(os.fspath(path), lines, min_bytes, max_bytes, seed)


def generate_records(path: str | os.PathLike, records: int, *, seed: int = 1) -> int:
    """Writes ``records`` sort-benchmark records (100 bytes, 10-byte key, gensort's ASCII layout)
    to ``path``, the same stream for the same seed; returns the bytes written."""
    return pipes_gen_records(os.fspath(path), records, seed)

"""Recycled files: the pages of dropped tables, kept for the next shared-pool allocation.

A node's output lives in tmpfs files; when the driver drops a table (its last consumer
finished, or a DeCache entry is cleared), unlinking its files gives their pages back to the
kernel, and the next node or decode that allocates from the shared pool takes fresh pages:
one page fault, one allocation and one zeroed page per 4 KiB, about half again the CPU of a
Parquet decode into pages a process already has (docs/kelvin.md). Ray's object store and
jemalloc keep such memory for the next allocation. Here the driver moves a dropped table's
files into a directory of this process (``<root>/attune-dag.<pid>.recycle``), named
``<bytes>.<pid>.<n>`` (``bytes``: the file's size, what a pool may map), and a node's pool
(``_shmpool.cpp``, ``TakeRecycled``) takes the smallest one that holds a new segment instead of
creating a file. The pool claims a file by renaming it, then checks with a write lease that no
process has it open or mapped (a reader that still maps a dropped table: an input a worker
holds for its next node, a table a node's code kept): only then are its pages written again;
otherwise the file goes back for a later try. A reader therefore never sees a table's bytes
change under it.

Bounded: at most ``bytes_max`` bytes of files (sizes, :data:`BYTES_MAX` by default; a run's
``DAG.run(recycle_bytes_max=)``), files of at least :data:`FILE_BYTES_MIN`, and nothing is kept
while the machine's available memory is short (:func:`memory_short`); the directory is emptied
when memory is short at a run's start, when a run fails, by :func:`release` and at the
interpreter's exit (only by the process that made it). A driver killed outright leaves it like
a run directory (its name carries the pid), and ``attune dag clean`` removes it.

Thread-safety: functions may be called from any thread; the directory is shared with node
processes through renames only (atomic), so no locks are needed.
"""

from __future__ import annotations

import atexit
import contextlib
import itertools
import os
import shutil
import threading

__all__ = [
    "BYTES_MAX",
    "FILE_BYTES_MIN",
    "directory",
    "held_bytes",
    "memory_short",
    "put",
    "register",
    "release",
]

#: Bytes of dropped tables' files kept for recycling at most (per directory, by file size). One
#: GiB: more than a decoded table and its preprocessed columns in the benchmarks (2M payments
#: decode into about 250 MB), a few percent of a machine's memory; 0 switches recycling off.
BYTES_MAX = 1 << 30
#: Files smaller than this are removed, not kept: their pages cost less than a millisecond to
#: fault in again, and a table's small files (its schema file) would only crowd the directory.
FILE_BYTES_MIN = 1 << 20
#: Nothing is kept while the machine's available memory, after the file, would be below this
#: fraction of its total (the kernel needs the room more than the next node needs warm pages).
MEMORY_AVAILABLE_FRACTION_MIN = 0.125

_names = itertools.count()
_lock = threading.Lock()
# Directories this process made or will make: st_dev of the root -> (directory, bytes_max).
_registered: dict[int, tuple[str, int]] = {}


def directory(root: str) -> str:
    """This process's recycle directory under ``root`` (not created here)."""
    return os.path.join(os.path.abspath(root), f"attune-dag.{os.getpid()}.recycle")


def register(root: str, bytes_max: int) -> str:
    """Makes ``root``'s recycle directory the one files of that file system go to (a run with
    recycling on calls it; DeCache's clearing uses it too). Returns the directory."""
    d = directory(root)
    with _lock:
        _registered[os.stat(root).st_dev] = (d, bytes_max)
    return d


def memory_short(extra_bytes: int = 0) -> bool:
    """Whether the machine's available memory, less ``extra_bytes``, is below
    :data:`MEMORY_AVAILABLE_FRACTION_MIN` of its total (False when /proc/meminfo is unreadable)."""
    fields: dict[str, int] = {}
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                name, _, rest = line.partition(":")
                if name in ("MemTotal", "MemAvailable"):
                    fields[name] = int(rest.split()[0]) * 1024
    except (OSError, ValueError, IndexError):
        return False
    if len(fields) < 2:
        return False
    return fields["MemAvailable"] - extra_bytes < MEMORY_AVAILABLE_FRACTION_MIN * fields["MemTotal"]


def held_bytes(d: str) -> int:
    """Bytes (file sizes, from the names) waiting in recycle directory ``d``."""
    total = 0
    try:
        names = os.listdir(d)
    except FileNotFoundError:
        return 0
    for name in names:
        with contextlib.suppress(ValueError):
            total += int(name.split(".", 1)[0])
    return total


def put(path: str, d: str | None = None, bytes_max: int | None = None) -> bool:
    """Moves ``path`` (a file of a dropped table, which no new reader will open) into recycle
    directory ``d`` (default: the one registered for its file system) if it is large enough,
    fits the bound and memory is not short. Returns False when it did not (the caller removes
    the file as before)."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return False
    if d is None or bytes_max is None:
        with _lock:
            reg = _registered.get(st.st_dev)
        if reg is None:
            return False
        d, bytes_max = (reg[0] if d is None else d), (reg[1] if bytes_max is None else bytes_max)
    if bytes_max <= 0 or st.st_size < FILE_BYTES_MIN or st.st_blocks * 512 < FILE_BYTES_MIN:
        return False
    if held_bytes(d) + st.st_size > bytes_max or memory_short(st.st_blocks * 512):
        return False
    try:
        os.makedirs(d, mode=0o700, exist_ok=True)
        _made.add((d, os.getpid()))
        os.rename(path, os.path.join(d, f"{st.st_size}.{os.getpid()}.{next(_names)}"))
    except OSError:  # another file system (EXDEV), or the directory went away
        return False
    return True


_made: set[tuple[str, int]] = set()  # (directory, pid of the process that made it)


def release(d: str | None = None) -> None:
    """Removes recycle directory ``d`` (default: every one this process made) with its files.
    A file a node process is claiming at that moment is either gone before it renames it (it
    takes a fresh segment) or already its own."""
    for made, pid in list(_made):
        if pid != os.getpid() or (d is not None and made != d):
            continue
        shutil.rmtree(made, ignore_errors=True)
        _made.discard((made, pid))


atexit.register(release)

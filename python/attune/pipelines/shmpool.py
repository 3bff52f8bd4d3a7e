"""A pyarrow memory pool over shared tmpfs files: pyarrow producers' buffers without a copy.

pyarrow allocates every buffer from a memory pool (jemalloc or mimalloc by default: anonymous
memory, which cannot be shared without a copy). :func:`install` replaces the process's default
pool with an ``arrow::MemoryPool`` written in C++ (``_shmpool.cpp`` beside this file) that bumps
through segment files in the run's directory, mapped ``MAP_SHARED``. Every pyarrow kernel,
reader and builder the node calls then writes straight into shareable memory, and SIPC writes the
node's output as references into the segments (see :func:`attune.pipelines.sipc.add_range_source`).

Lifecycle in a node process: :func:`install` before the node's function runs; :func:`freeze`
after it returned and before the output is shared (freed pages are no longer returned to the
kernel, so a shared buffer keeps its pages); :func:`trim` after sharing returns every page of
the segments that the output does not refer to (temporaries the node still held).

Allocations outside pyarrow's pool (numpy, pandas, DuckDB) stay anonymous and take SIPC's copy
path, measured as ``bytes_copied``. docs/kelvin.md compares this with DeAnon.

The extension is compiled on first use with the system C++ compiler against pyarrow's own
headers and libraries (``pyarrow.get_include()``), into a cache directory keyed by the source
and the pyarrow version; ``make build`` builds it ahead. Without a compiler :func:`available`
says why and the DAG runs with pyarrow's default pool (the copy path).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import importlib.util
import os
import subprocess
import sys
import sysconfig
from typing import Any

import pyarrow as pa

from attune.errors import Error
from attune.pipelines import sipc

__all__ = [
    "DetachedPool",
    "available",
    "build",
    "finish_release",
    "freeze",
    "install",
    "installed",
    "recycled",
    "release",
    "segments",
    "trim",
    "uninstall",
]

_SOURCE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_shmpool.cpp")
#: Default segment size: large enough that a node's allocations live in few files, small enough
#: that the unused tail of the last segment (never touched, so never resident) is cheap.
SEGMENT_BYTES = 64 << 20
#: An allocation at least this large (up to half a segment) gets a segment of its own, so that a
#: large temporary can be kept warm for a reused process's next node (:func:`release`); 0 puts
#: every block below half a segment into the shared bump segment (the earlier layout, the
#: benchmarks' ablation). 4 MiB: below it the pages a temporary could keep warm cost less than
#: a millisecond to fault in; above it a file per buffer stays few files per node.
OWN_SEGMENT_BYTES_MIN = 4 << 20

_module: Any = None
_error: str | None = None
_pool: Any = None


def _cache_dir() -> str:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    with open(_SOURCE, "rb") as f:
        digest = hashlib.sha256(f.read() + pa.__version__.encode()).hexdigest()[:16]
    return os.path.join(base, "attune", f"shmpool-{pa.__version__}-{digest}")


def build() -> str:
    """Compiles the extension if needed (once per source and pyarrow version, under a lock) and
    returns the path of the shared object."""
    out_dir = _cache_dir()
    os.makedirs(out_dir, exist_ok=True)
    so = os.path.join(out_dir, "_attune_shmpool.so")
    if os.path.exists(so):
        return so
    lock = os.open(os.path.join(out_dir, "build.lock"), os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if os.path.exists(so):
            return so
        libdir = pa.get_library_dirs()[0]
        arrow_so = sorted(n for n in os.listdir(libdir) if n.startswith("libarrow.so."))
        py_so = sorted(n for n in os.listdir(libdir) if n.startswith("libarrow_python.so"))
        if not arrow_so or not py_so:
            raise Error(f"pyarrow's libraries are not in {libdir}")
        tmp = so + f".tmp-{os.getpid()}"
        cmd = [
            os.environ.get("CXX", "c++"), "-O2", "-std=c++20", "-shared", "-fPIC",
            f"-I{pa.get_include()}", f"-I{sysconfig.get_paths()['include']}", _SOURCE,
            "-o", tmp, f"-L{libdir}", f"-l:{arrow_so[0]}", f"-l:{py_so[0]}",
            f"-Wl,-rpath,{libdir}",
        ]  # fmt: skip
        try:
            done = subprocess.run(cmd, capture_output=True, text=True, check=False)
        except FileNotFoundError as e:
            raise Error(f"no C++ compiler for the shared memory pool ({e})") from None
        if done.returncode != 0:
            raise Error(f"building the shared memory pool failed: {done.stderr[-2000:]}")
        os.rename(tmp, so)
        return so
    finally:
        os.close(lock)


def _load() -> Any:
    global _module, _error
    if _module is not None or _error is not None:
        return _module
    try:
        so = build()
        spec = importlib.util.spec_from_file_location("_attune_shmpool", so)
        if spec is None or spec.loader is None:
            raise Error(f"cannot load {so}")
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        _module = mod
    except (Error, OSError, ImportError) as e:
        _error = str(e)
    return _module


def available() -> tuple[bool, str]:
    """(True, "") when the pool can be used here, else (False, why)."""
    _load()
    return (_module is not None, _error or "")


def install(
    directory: str,
    prefix: str,
    segment_bytes: int = SEGMENT_BYTES,
    reuse_freed: bool = True,
    spare_dir: str | None = None,
    recycle_dir: str | None = None,
) -> pa.MemoryPool:
    """Makes a pool over segment files ``DIRECTORY/PREFIX.N`` this process's default pyarrow
    pool and tells SIPC about its segments. A process has one pool: in a reused node process
    (after :func:`release`) a second call only names the next node's segments ``PREFIX.N``
    (``directory`` is the run's, the same for every node).

    ``reuse_freed``: a freed block serves the next request of its size class while the node
    runs (no page faults or zeroing for a kernel's temporaries the second time; freed blocks
    give their pages back at :func:`freeze`, at most 256 MiB of them are kept); off, every
    allocation takes fresh pages and a freed block is punched at once.

    ``spare_dir``: a process that outlives runs (a :class:`~attune.pipelines.dag.WorkerPool`
    worker) names its own directory here, where spare segments wait between nodes; a later call
    with another ``directory`` (the next run's) moves the next segments there. The first call's
    ``segment_bytes`` and ``reuse_freed`` stay.

    ``recycle_dir``: where the driver keeps dropped tables' files (:mod:`attune.pipelines.recycle`);
    a new segment is one of those when one fits and no process maps it any more (checked with a
    write lease), its pages still there. None: every new segment is a fresh file. Also used by a
    :class:`DetachedPool` made in this process afterwards (a DeCache decode in a node)."""
    global _pool, _dirs, _original, _recycle_dir
    mod = _load()
    if mod is None:
        raise Error(f"the shared memory pool is unavailable: {_error}")
    dirs = (os.path.abspath(directory), os.path.abspath(spare_dir) if spare_dir else "")
    _recycle_dir = os.path.abspath(recycle_dir) if recycle_dir else ""
    if _pool is not None:
        if dirs != _dirs:
            mod.set_dirs(*dirs)
            _dirs = dirs
        mod.set_prefix(prefix)
        mod.set_recycle_dir(_recycle_dir)
        pa.set_memory_pool(_pool)  # again, after an uninstall()
        return _pool
    _original = pa.default_memory_pool()
    _pool = mod.create(dirs[0], prefix, segment_bytes, reuse_freed, OWN_SEGMENT_BYTES_MIN)
    if dirs[1]:
        mod.set_dirs(*dirs)
    mod.set_recycle_dir(_recycle_dir)
    _dirs = dirs
    pa.set_memory_pool(_pool)
    sipc.add_range_source(segments)
    return _pool


_dirs: tuple[str, str] = ("", "")
_original: Any = None
_recycle_dir = ""


def recycled() -> tuple[int, int]:
    """(segments, bytes of pages they held) taken from recycle directories by every pool of
    this process so far (0, 0 when the pool was never loaded)."""
    return tuple(_module.recycled()) if _module is not None else (0, 0)  # type: ignore[return-value]


def installed() -> bool:
    """Whether this process's default pyarrow pool is the shared pool."""
    return _pool is not None and pa.default_memory_pool().backend_name == _pool.backend_name


def uninstall() -> None:
    """Gives this process its original pyarrow pool back (a reused process whose next node runs
    without the shared pool). The shared pool's segments stay as they are."""
    if _pool is not None and _original is not None:
        pa.set_memory_pool(_original)


def segments() -> list[tuple[int, int, str]]:
    """(address, length, path) of every segment of this process's pool."""
    return _module.segments() if _module is not None and _pool is not None else []


def freeze() -> None:
    """Stops returning freed pages to the kernel (call before sharing an output)."""
    if _module is not None and _pool is not None:
        _module.freeze()


def trim(used: dict[str, list[tuple[int, int]]]) -> int:
    """After sharing: frees every whole page of the pool's segments that no shared buffer uses
    (``used``: path -> [(offset, length)] from :class:`attune.pipelines.sipc.WriteStats`), and
    removes segments nothing refers to. Returns the bytes of address range released."""
    freed = 0
    for _addr, length, path in segments():
        ranges = sorted(used.get(path, []))
        if not ranges:
            try:
                os.unlink(path)
            except FileNotFoundError:
                pass
            _module.punch(path, 0, length)
            freed += length
            continue
        pos = 0
        for off, n in [*ranges, (length, 0)]:
            if off > pos:
                _module.punch(path, pos, off - pos)
                freed += off - pos
            pos = max(pos, off + n)
    return freed


def release(
    used: dict[str, list[tuple[int, int]]], recycle: bool = True, defer: bool = False
) -> tuple[int, int]:
    """After a node of a reused process shared its output and dropped every reference to its
    tables: unmaps the node's segments that hold no live allocation, returns their pages that
    the output does not use (``used`` as for :func:`trim`; a segment the output does not use is
    unlinked) and forgets their address ranges, so the next node starts with an empty pool.
    Segments still holding allocations (a buffer the node's code kept, e.g. in a global) stay
    mapped, retired. With ``recycle``, segments the output does not use (up to eight, and two
    standard segments' bytes together) stay mapped as spares with their pages, and the next
    node's segments are those (renamed; a request takes the smallest spare that holds it): its
    allocations then touch no fresh pages. A large temporary (4 MiB up to half a segment) has a
    segment of its own, so that it can become such a spare even when the output lies in the
    node's other segments. Returns (bytes released, bytes retained).

    ``defer``: the segments are forgotten now, but unmapping them (a TLB shootdown: tens of
    milliseconds of wall time per node on a busy VM) and returning their pages to the kernel
    (hole punching: milliseconds per hundred MB) wait for :func:`finish_release`, which a
    worker calls after it reported the node, off the node's critical path (or, when its next
    node is already waiting, after that one). Until then the run's files still hold the node's
    temporaries, and the worker still maps them (no allocation is in them any more)."""
    if _module is None or _pool is None:
        return 0, 0
    unused = [path for _a, _n, path in segments() if not used.get(path)]
    released, recycled, retained = _module.restart(unused if recycle else [], defer)
    sipc.forget_ranges(released)
    sipc.forget_ranges(recycled)  # kept mapped as spares; renamed when a node takes one
    work: list[tuple[str, list[tuple[int, int]]]] = []
    freed = 0
    for _addr, length, path in released:
        ranges = sorted(used.get(path, []))
        if not ranges:
            work.append((path, []))
            freed += length
            continue
        holes = []
        pos = 0
        for off, n in [*ranges, (length, 0)]:
            if off > pos:
                holes.append((pos, off - pos))
                freed += off - pos
            pos = max(pos, off + n)
        work.append((path, holes))
    _pending.extend(work)  # after what an earlier deferred release left, if any
    if not defer:
        finish_release()
    return freed, retained


#: Released segments whose pages are still to be returned: (path, holes); [] = unlink it.
_pending: list[tuple[str, list[tuple[int, int]]]] = []


def finish_release() -> None:
    """Returns the pages a deferred :func:`release` left (idempotent)."""
    global _pending
    if _module is not None and _pool is not None:
        _module.finish_unmap()
    work, _pending = _pending, []
    for path, holes in work:
        try:
            if not holes:
                os.unlink(path)
                continue
            for off, n in holes:
                _module.punch_file(path, off, n)
        except FileNotFoundError:
            pass  # the driver already removed it (a table nothing needs any more)


def resident_bytes(path: str, used: list[tuple[int, int]]) -> int:
    """The tmpfs bytes ``path`` will hold once only the pages of ``used`` ranges are left (what
    a released segment occupies after :func:`finish_release`)."""
    pages = 0
    end = 0  # first page not yet counted
    for off, n in sorted(used):
        first, last = max(off // 4096, end), (off + n + 4095) // 4096
        if last > first:
            pages += last - first
            end = last
    return min(pages * 4096, sipc.file_bytes(path))


class DetachedPool:
    """A pool of its own over segment files ``DIRECTORY/PREFIX.N``, used only by code it is
    passed to (``memory_pool=``), never the process's default pool: DeCache decodes a Parquet
    file with it straight into the cache entry's files, so a miss writes the decoded table once.

    Lifecycle: allocate (decode) -> :meth:`freeze` -> share (``sipc.write_table(...,
    reshare_from=pool.segments())``) -> drop the decoded table -> :meth:`trim` (pages and
    segments the table does not use) -> :meth:`close` (unmaps; the files stay). ``close`` is
    safe at any point (also after a failure; the caller removes the files)."""

    def __init__(
        self,
        directory: str,
        prefix: str,
        segment_bytes: int = SEGMENT_BYTES,
        recycle_dir: str | None = None,
    ) -> None:
        """``recycle_dir``: as for :func:`install`; None takes the directory this process's
        :func:`install` named (a decode in a node process), if any."""
        mod = _load()
        if mod is None:
            raise Error(f"the shared memory pool is unavailable: {_error}")
        self._mod = mod
        recycle = _recycle_dir if recycle_dir is None else os.path.abspath(recycle_dir)
        self._handle, self.pool = mod.create_detached(
            os.path.abspath(directory), prefix, segment_bytes, True, recycle
        )
        self._closed = False

    def segments(self) -> list[tuple[int, int, str]]:
        """(address, length, path) of every segment still mapped."""
        return [] if self._closed else self._mod.detached_segments(self._handle)

    def freeze(self) -> None:
        """Nothing is punched or reused from here on (before the table is shared)."""
        self._mod.detached_freeze(self._handle)

    def trim(self, used: dict[str, list[tuple[int, int]]]) -> int:
        """Returns every whole page no shared buffer uses (``used`` as for :func:`trim`) and
        removes segment files nothing refers to. Call only when no other buffer of this pool is
        alive (``pool.bytes_allocated() == 0``). Returns the bytes released."""
        freed = 0
        for _addr, length, path in self.segments():
            ranges = sorted(used.get(path, []))
            if not ranges:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(path)
                self._mod.detached_punch(self._handle, path, 0, length)
                freed += length
                continue
            pos = 0
            for off, n in [*ranges, (length, 0)]:
                if off > pos:
                    self._mod.detached_punch(self._handle, path, pos, off - pos)
                    freed += off - pos
                pos = max(pos, off + n)
        return freed

    def close(self) -> int:
        """Unmaps every segment no buffer is alive in; returns the bytes still mapped."""
        if self._closed:
            return 0
        self._closed = True
        return int(self._mod.detached_close(self._handle))


if __name__ == "__main__":  # `python -m attune.pipelines.shmpool` builds it (make build)
    ok, why = available()
    print("shared memory pool:", "ready" if ok else f"unavailable ({why})")
    sys.exit(0 if ok else 1)

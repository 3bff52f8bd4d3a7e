"""DeCache: shared loaders keyed by (file, dictionary columns), reference-counted across processes.

Every DAG that starts by loading the same Parquet file decodes it again, and each copy occupies
memory of its own. A :class:`DeCache` keeps one decoded copy as a SIPC table in a tmpfs
directory: the first loader decodes and writes it (under an exclusive lock, so twenty DAGs
starting together decode once), every later loader — in any process — maps it read-only, and a
loader node's output refers to the cached files (resharing), so downstream nodes never copy it.
A miss decodes straight into the entry's files (a :class:`~attune.pipelines.shmpool.DetachedPool`
given to pyarrow's Parquet reader), so the decoded table is written once.

Key: the source file's real path, size and modification time (a rewritten file is a new key)
and the sorted dictionary-encoded columns (the same file read with other columns
dictionary-encoded is a different table).

Reference counts are lease files, one per holder (``<key>.refs/<pid>-<n>``): a holder that
dies without releasing is recognised by its process id no longer existing, so a crash never pins
an entry forever. :meth:`DeCache.evict` removes entries without live leases, least recently used
first; a resource manager calls it before it evicts anything else ("evicted first"), since a
cached load can always be decoded again.

Layout under ``root``: ``<key>/`` (the SIPC table ``table.sipc``, its data files — the
decode's pool segments ``seg-<pid>-<ns>.N``, or with ``direct=False`` column files
``t-<pid>-<ns>.cK`` — and ``source.json``), ``<key>.lock`` (flock), ``<key>.refs/``. Evicted and cleared entries' data files are recycled
(:mod:`attune.pipelines.recycle`) when a run of this process registered a recycle directory on
their file system. Thread-safety: methods may be called
from any thread and process; cross-process exclusion is ``flock`` on the key's lock file.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import itertools
import json
import os
import shutil
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from attune._process import pid_alive
from attune.errors import CorruptionError, InvalidArgumentError
from attune.pipelines import recycle, shmpool, sipc

__all__ = ["DeCache", "Lease", "read_parquet"]

_LEASES = itertools.count()

#: Lock files this process has open (held or being taken). A child forked meanwhile by another
#: thread (a DAG run starting a node process) would hold the same lock for as long as it lives,
#: since flock belongs to the open file and the child's copy of the descriptor shares it: the
#: child closes its copies at once.
_HELD: set[int] = set()


def _close_held_in_child() -> None:
    for fd in list(_HELD):
        with contextlib.suppress(OSError):
            os.close(fd)
    _HELD.clear()


os.register_at_fork(after_in_child=_close_held_in_child)


def read_parquet(
    path: str | os.PathLike,
    dictionary_columns: Sequence[str] = (),
    threads: int | None = None,
    memory_pool: pa.MemoryPool | None = None,
) -> pa.Table:
    """Decodes a Parquet file like ``pq.read_table(path, read_dictionary=...)``, one top-level
    column per thread (``threads``: default one per CPU; 1 is one reader for all columns).
    ``memory_pool``: where every buffer of the decode is allocated (default: pyarrow's default
    pool).

    pyarrow parallelises a read across row groups; a file with one row group (a small or
    freshly written file) then decodes on one core. While twenty DAGs wait on one shared
    decode, that decode is the critical path, so DeCache decodes columns side by side (each
    thread opens the file itself; pyarrow releases the GIL while decoding).

    A file that is not valid Parquet raises :class:`~attune.errors.CorruptionError` naming it."""
    path = os.fspath(path)
    try:
        return _read_parquet(path, dictionary_columns, threads, memory_pool)
    except (pa.ArrowInvalid, pa.ArrowIOError) as e:
        raise CorruptionError(f"cannot decode Parquet file {path}: {e}", path=path) from None


def _read_parquet(
    path: str,
    dictionary_columns: Sequence[str],
    threads: int | None,
    memory_pool: pa.MemoryPool | None,
) -> pa.Table:
    read_dictionary = list(dictionary_columns) or None
    threads = threads or os.cpu_count() or 1
    if memory_pool is not None:
        return _read_with_pool(path, read_dictionary, threads, memory_pool)
    if threads <= 1:
        return pq.read_table(path, read_dictionary=read_dictionary)
    schema = pq.read_schema(path)
    names = schema.names
    if len(names) <= 1 or len(set(names)) != len(names):
        return pq.read_table(path, read_dictionary=read_dictionary)

    def one(name: str) -> pa.Table:
        f = pq.ParquetFile(path, read_dictionary=read_dictionary)
        return f.read(columns=[name], use_threads=False)

    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=min(threads, len(names))) as ex:
        parts = list(ex.map(one, names))
    return _join(parts)


def _join(parts: list[pa.Table]) -> pa.Table:
    fields = [t.schema.field(0) for t in parts]
    return pa.Table.from_arrays(
        [t.column(0) for t in parts], schema=pa.schema(fields, metadata=parts[0].schema.metadata)
    )


def _read_with_pool(
    path: str, read_dictionary: list[str] | None, threads: int, pool: pa.MemoryPool
) -> pa.Table:
    """The decode with every buffer from ``pool``: ``pq.ParquetFile`` takes no pool, so this
    opens pyarrow's Parquet reader (``pyarrow._parquet.ParquetReader``, what ``ParquetFile``
    wraps) with one. Raises :class:`_NoPoolReader` when this pyarrow's reader does not take
    one (the caller decodes the ordinary way)."""
    try:
        from pyarrow._parquet import ParquetReader
    except ImportError as e:  # pragma: no cover - every supported pyarrow has it
        raise _NoPoolReader(str(e)) from None

    def reader() -> Any:
        try:
            r = ParquetReader(memory_pool=pool)
            r.open(path, read_dictionary=read_dictionary)
        except TypeError as e:  # pragma: no cover - a pyarrow whose reader changed
            raise _NoPoolReader(str(e)) from None
        return r

    first = reader()
    # Leaf column indices of each top-level column (a nested column has several leaves).
    leaves: dict[str, list[int]] = {}
    for i, p in enumerate(first.column_paths):
        leaves.setdefault(p[0], []).append(i)
    names = first.schema_arrow.names
    if threads <= 1 or len(names) <= 1 or len(set(names)) != len(names):
        return first.read_all(use_threads=threads > 1)

    def one(name: str) -> pa.Table:
        return reader().read_all(column_indices=leaves[name], use_threads=False)

    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=min(threads, len(names))) as ex:
        parts = list(ex.map(one, names))
    return _join(parts)


class _NoPoolReader(Exception):
    """pyarrow's Parquet reader here takes no memory pool."""


@dataclass
class Lease:
    """One holder's reference to a cache entry; :meth:`release` (or leaving the ``with``)."""

    cache: DeCache
    key: str
    path: str

    def release(self) -> None:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.path)

    def __enter__(self) -> Lease:  # noqa: PYI034 - a dataclass, not subclassed
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


class DeCache:
    """Decoded Parquet files shared by every DAG on the machine; see the module documentation.
    ``enabled=False`` turns it into a plain loader (decode every time), for measuring."""

    def __init__(
        self,
        root: str | os.PathLike | None = None,
        *,
        enabled: bool = True,
        threads: int | None = None,
        direct: bool = True,
    ) -> None:
        """``enabled=False`` decodes on every load (the baseline); ``threads`` is the decode's
        column parallelism (:func:`read_parquet`; default one per CPU, 1 = ``pq.read_table``),
        the same with the cache on or off; ``direct=False`` decodes a miss into ordinary memory
        and copies the table into the entry's files (the decode-then-copy baseline)."""
        if root is None:
            from attune.pipelines.dag import default_root

            root = os.path.join(default_root(), "attune-decache")
        self.root = os.path.abspath(os.fspath(root))
        self.enabled = enabled  # the directory is made by the first lease or load
        self.threads = threads
        self.direct = direct

    # -- keys and leases -----------------------------------------------------------------------

    def key(self, path: str | os.PathLike, dictionary_columns: Sequence[str] = ()) -> str:
        real = os.path.realpath(os.fspath(path))
        try:
            st = os.stat(real)
        except FileNotFoundError:
            raise InvalidArgumentError(f"no such file to load: {real}") from None
        ident = json.dumps([real, st.st_size, st.st_mtime_ns, sorted(dictionary_columns)])
        return hashlib.sha256(ident.encode()).hexdigest()[:32]

    @contextlib.contextmanager
    def _locked(self, key: str) -> Iterator[None]:
        os.makedirs(self.root, exist_ok=True)
        fd = os.open(os.path.join(self.root, key + ".lock"), os.O_RDWR | os.O_CREAT, 0o600)
        _HELD.add(fd)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            if fd in _HELD:  # (a forked child closed its copy already)
                _HELD.discard(fd)
                os.close(fd)  # closing releases the lock

    def lease(self, key: str) -> Lease:
        """Takes a reference on ``key`` (the entry need not exist yet)."""
        refs = os.path.join(self.root, key + ".refs")
        with self._locked(key):
            os.makedirs(refs, exist_ok=True)
            path = os.path.join(refs, f"{os.getpid()}-{next(_LEASES)}")
            with open(path, "w"):
                pass
        return Lease(self, key, path)

    def refcount(self, key: str) -> int:
        """Live leases on ``key``; leases of dead processes are removed on the way."""
        refs = os.path.join(self.root, key + ".refs")
        n = 0
        try:
            names = os.listdir(refs)
        except FileNotFoundError:
            return 0
        for name in names:
            pid = int(name.split("-", 1)[0]) if name.split("-", 1)[0].isdigit() else -1
            if pid > 0 and pid_alive(pid):
                n += 1
            else:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(os.path.join(refs, name))
        return n

    # -- loading --------------------------------------------------------------------------------

    def load(
        self,
        path: str | os.PathLike,
        dictionary_columns: Sequence[str] = (),
        stats: dict[str, Any] | None = None,
    ) -> pa.Table:
        """The decoded table of ``path`` (Parquet) with ``dictionary_columns`` dictionary-encoded:
        mapped from the cache, or decoded now and cached. ``stats['decache']`` says which
        (``hit``, ``load``, or ``off``)."""
        dictionary_columns = list(dictionary_columns)
        if not self.enabled:
            if stats is not None:
                stats["decache"] = "off"
            return read_parquet(path, dictionary_columns, self.threads)
        key = self.key(path, dictionary_columns)
        entry = os.path.join(self.root, key)
        table_path = os.path.join(entry, "table.sipc")
        with self._locked(key):
            if os.path.exists(table_path):
                os.utime(entry)  # recency for eviction
                if stats is not None:
                    stats["decache"] = "hit"
                return sipc.read_table(table_path)
            # A loader that died mid-write left data files but no table file (it appears last,
            # by rename): start over.
            shutil.rmtree(entry, ignore_errors=True)
            os.makedirs(entry)
            try:
                with open(os.path.join(entry, "source.json"), "w") as f:
                    json.dump(
                        {
                            "path": os.path.realpath(os.fspath(path)),
                            "dictionary_columns": sorted(dictionary_columns),
                            "created": time.time(),
                        },
                        f,
                    )
                how = self._fill(entry, path, dictionary_columns)
            except BaseException:
                shutil.rmtree(entry, ignore_errors=True)
                raise
            if stats is not None:
                stats["decache"] = "load"
                stats["decache_fill"] = how
            return sipc.read_table(table_path)

    def _fill(self, entry: str, path: str | os.PathLike, dictionary_columns: list[str]) -> str:
        """Decodes ``path`` into the entry directory as the SIPC table ``table.sipc``. Returns
        ``"direct"`` when the decode wrote into the entry's own files (a detached shared pool:
        the table refers to its segments, nothing is copied) or ``"copy"`` when the decoded
        table was copied in (``direct=False``, or no shared pool here)."""
        # Data files are named per fill: a process may still map the files of an earlier entry
        # of the same key (cleared, then filled again), and a name never names two files.
        token = f"{os.getpid()}-{time.time_ns()}"
        if self.direct and shmpool.available()[0]:
            pool = shmpool.DetachedPool(entry, f"seg-{token}")
            try:
                try:
                    decoded = read_parquet(path, dictionary_columns, self.threads, pool.pool)
                except _NoPoolReader:
                    decoded = None
                if decoded is not None:
                    pool.freeze()
                    written = sipc.write_table(
                        decoded, entry, f"t-{token}", reshare_from=pool.segments()
                    )
                    del decoded
                    if pool.pool.bytes_allocated() == 0:  # nothing else of the decode alive
                        pool.trim(written.ranges)
                    os.rename(written.path, os.path.join(entry, "table.sipc"))
                    return "direct"
            finally:
                pool.close()
            for name in os.listdir(entry):  # segments of a decode that could not use the pool
                if name.startswith("seg-"):
                    os.unlink(os.path.join(entry, name))
        decoded = read_parquet(path, dictionary_columns, self.threads)
        # Copied into the entry's own files: the decoded buffers may live in the loading
        # node's memory pool, whose files go away with its run.
        written = sipc.write_table(decoded, entry, f"t-{token}", reshare=False)
        os.rename(written.path, os.path.join(entry, "table.sipc"))
        return "copy"

    # -- inspection and eviction ---------------------------------------------------------------

    def entries(self) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        if not os.path.isdir(self.root):
            return out
        for name in sorted(os.listdir(self.root)):
            entry = os.path.join(self.root, name)
            if not os.path.isdir(entry) or "." in name:
                continue
            try:
                with open(os.path.join(entry, "source.json")) as f:
                    src = json.load(f)
            except (OSError, ValueError):
                src = {}
            nbytes = sum(e.stat().st_blocks * 512 for e in os.scandir(entry))
            out.append(
                {
                    "key": name,
                    "source": src.get("path"),
                    "dictionary_columns": src.get("dictionary_columns", []),
                    "bytes": nbytes,
                    "refs": self.refcount(name),
                    "used": os.stat(entry).st_mtime,
                }
            )
        return out

    def evict(self, bytes_needed: int | None = None) -> int:
        """Removes unreferenced entries, least recently used first, until ``bytes_needed`` bytes
        are freed (all of them when None). Returns the bytes freed. A process that still maps
        an evicted table keeps its pages until it unmaps them."""
        freed = 0
        for e in sorted(self.entries(), key=lambda e: e["used"]):
            if bytes_needed is not None and freed >= bytes_needed:
                break
            with self._locked(e["key"]):
                if self.refcount(e["key"]) > 0:
                    continue
                _recycle_entry(os.path.join(self.root, e["key"]))
                shutil.rmtree(os.path.join(self.root, e["key"]), ignore_errors=True)
                shutil.rmtree(os.path.join(self.root, e["key"] + ".refs"), ignore_errors=True)
            with contextlib.suppress(FileNotFoundError):
                os.unlink(os.path.join(self.root, e["key"] + ".lock"))
            freed += e["bytes"]
        return freed

    def clear(self) -> None:
        """Removes the whole cache directory (leases included)."""
        with contextlib.suppress(FileNotFoundError):
            for name in os.listdir(self.root):
                _recycle_entry(os.path.join(self.root, name))
        shutil.rmtree(self.root, ignore_errors=True)


def _recycle_entry(entry: str) -> None:
    """An entry's data files go to this process's recycle directory of their file system, if a
    DAG run registered one (:mod:`attune.pipelines.recycle`): the next decode, in any node,
    writes into their pages once nothing maps them."""
    if not os.path.isdir(entry) or os.path.basename(entry).endswith(".refs"):
        return
    with contextlib.suppress(FileNotFoundError):
        for name in os.listdir(entry):
            if name.startswith(("seg-", "t-")):
                recycle.put(os.path.join(entry, name))

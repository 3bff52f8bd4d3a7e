"""Embedding tables larger than memory: a typed front over the Rust crate ``attune-embed``.

A recommendation inference looks up one key in each of N embedding tables; a request is served
from memory only when all N keys are cached (a *perfect hit*). :class:`EmbeddingStore` keeps the
tables in flat files (one per table, see docs/formats/embed-table.md) or, with
``backend="kv"``, in one Attune-DB database (docs/formats/embed-kv.md), behind one or two
in-memory tiers managed by a group-aware policy (EV-LFU by default) at 32, 16, 8 or 4 bits per
value. Design and measurements: docs/evstore.md.

>>> import numpy as np, tempfile
>>> from attune.embed import EmbeddingStore, load_table
>>> d = tempfile.mkdtemp()
>>> for t in ("C1", "C2"):
...     load_table(d, t, np.zeros((100, 36), dtype=np.float32))
>>> store = EmbeddingStore(d, tables=["C1", "C2"], cache_bytes=1 << 20)
>>> store.lookup(np.array([[1, 2], [3, 4]])).shape
(2, 2, 36)

Errors are :class:`attune.Error` subclasses: :class:`InvalidArgumentError` (a ``ValueError``)
for wrong dims, unknown tables, keys out of range and non-finite values; :class:`CorruptionError`
for a damaged table file; :class:`StorageIOError` for OS errors; :class:`ClosedError` after
:meth:`EmbeddingStore.close`.

Thread-safety: a store may be shared between threads; lookups run with the GIL released and are
serialised by the store's lock.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any, Self

from attune import _native
from attune.errors import InvalidArgumentError

#: Back ends of a store: ``file`` (one flat file per table, docs/formats/embed-table.md) and
#: ``kv`` (every table in one Attune-DB database, docs/formats/embed-kv.md).
BACKENDS = ("file", "kv")

#: Policy names accepted by :class:`EmbeddingStore` and :func:`simulate`.
POLICIES = (
    "lru",
    "lfu",
    "clock",
    "arc",
    "car",
    "lirs",
    "lecar",
    "clockpro",
    "clocklirs",
    "cacheus",
    "ev-lfu",
    "ev-lfu-inserted",
    "ev-lfu-noflush",
    "ev-lfu-prose",
    "ev-lfu-decay",
    "ev-lfu-miss0",
    "ev-lfu-misshalf",
    "ev-lfu-tinylfu",
    "ev-lfu-miss0-tinylfu",
    "ev-lfu-sum",
    "ev-lfu-miss0-sum",
    "ev-arc",
    "ev-arc-inserted",
    "ev-arc-noflush",
    "ev-car",
    "ev-loss",
    "ev-loss-noaging",
    "ev-clockpro",
    "ev-clockpro-t1",
    "ev-clockpro-t4",
    "ev-lfu-hist",
    "ev-lfu-hist-flat",
    "ev-lfu-hist-s",
    "ev-lfu-hist-c",
    "ev-lfu-hist-c-auto",
    "ev-lfu-hist-c-auto-half-fine-r16-open",
    "ev-lfu-hist-c-auto-perfect-steady-open",
    "ev-lfu-hist-m5",
    "ev-lfu-hist-lru1",
    "ev-lfu-hist-free",
    "ev-lfu-hist-free-s4",
    "clockpro-charged",
    "clockpro-g8",
    "arc-charged",
    "car-charged",
    "clocklirs-charged",
)


def _np():
    try:
        import numpy as np
    except ImportError as e:  # pragma: no cover - numpy is a dependency of the embed extra
        raise InvalidArgumentError("attune.embed needs numpy (pip install 'attune[embed]')") from e
    return np


def _keys_bytes(keys: Any, width: int | None = None) -> tuple[bytes, tuple[int, ...]]:
    """Keys as little-endian uint64 bytes, rejecting negative, non-integer or ragged input."""
    np = _np()
    try:
        a = np.asarray(keys)
    except ValueError as e:
        raise InvalidArgumentError(f"keys must be a rectangular integer array: {e}") from None
    if a.dtype.kind not in "iu":
        if a.dtype.kind == "f" and a.size and np.all(np.isfinite(a)) and np.all(a == np.floor(a)):
            a = a.astype(np.int64)
        elif a.size == 0:
            a = a.astype(np.uint64)
        else:
            raise InvalidArgumentError(f"keys must be integers, got dtype {a.dtype}")
    if a.dtype.kind == "i" and a.size and int(a.min()) < 0:
        i = np.unravel_index(int(np.argmin(a)), a.shape)
        raise InvalidArgumentError(f"negative key {int(a[i])} at index {tuple(int(j) for j in i)}")
    if width is not None and (a.ndim != 2 or a.shape[1] != width):
        raise InvalidArgumentError(
            f"keys must have shape [batch, {width}] (one key per table), got {list(a.shape)}"
        )
    return np.ascontiguousarray(a, dtype="<u8").tobytes(), a.shape


def _backend(backend: str) -> str:
    if backend not in BACKENDS:
        raise InvalidArgumentError(f"unknown backend `{backend}`; use one of {', '.join(BACKENDS)}")
    return backend


def load_table(path: str | os.PathLike, name: str, values: Any, *, backend: str = "file") -> None:
    """Writes table ``name`` under directory ``path`` from a 2-D float array ``[rows, dim]``.

    ``backend="file"`` writes a temporary file and renames it into place; ``backend="kv"``
    writes the rows under a fresh table id and switches the table's record to it in one synced
    batch. Either way a crash mid-load leaves the previous table or the new one, never a mix. Non-finite values, a non-2-D array and bad
    names raise :class:`InvalidArgumentError`."""
    _backend(backend)
    np = _np()
    a = np.asarray(values)
    if a.ndim != 2 or a.shape[1] == 0:
        raise InvalidArgumentError(
            f"table `{name}`: values must be a 2-D array [rows, dim], got shape {list(a.shape)}"
        )
    if a.dtype.kind not in "fiu":
        raise InvalidArgumentError(f"table `{name}`: values must be numeric, got dtype {a.dtype}")
    os.makedirs(path, exist_ok=True)
    with np.errstate(over="ignore", invalid="ignore"):
        data = np.ascontiguousarray(a, dtype="<f4")
    finite = np.isfinite(data)
    if not finite.all():
        r, c = (int(x) for x in np.argwhere(~finite)[0])
        raise InvalidArgumentError(
            f"table `{name}`: non-finite value {a[r, c]} at row {r}, column {c}"
            " (float32 holds at most 3.4e38)"
        )
    _native.embed_load_table(os.fspath(path), name, int(a.shape[1]), data.tobytes(), backend)


def verify_table(path: str | os.PathLike, name: str, *, backend: str = "file") -> tuple[int, int]:
    """Re-reads table ``name`` and checks its checksums; returns ``(rows, dim)``."""
    return _native.embed_verify_table(os.fspath(path), name, _backend(backend))


def list_tables(path: str | os.PathLike, *, backend: str = "file") -> list[str]:
    """Names of the tables under directory ``path``, sorted."""
    return _native.embed_list_tables(os.fspath(path), _backend(backend))


class EmbeddingStore:
    """N embedding tables of one dimension behind an in-memory cache.

    ``tables``: names in lookup order (column ``t`` of a key batch goes to ``tables[t]``); an
    int ``n`` means ``C1 .. Cn``. ``cache_bytes``: memory for cached rows over all tiers
    (encoded sizes), 0 for none. ``policy``: one of :data:`POLICIES`. ``precisions``: bits of L1
    and optionally L2 (``[32]``, ``[16]``, ``[8, 4]``...). ``l1_share``: L1's share of
    ``cache_bytes`` with two tiers (default 0.5). ``backend``: where the rows live, ``"file"``
    (default) or ``"kv"`` (an Attune-DB database at ``path``, opened read-only and shared; a
    request's misses are read with one ``multi_get``); load tables with the same ``backend``.

    EVProx: ``surrogates`` maps a table (name or index) to its offline surrogate array (one
    surrogate row per row, ``-1`` for none; see :func:`surrogates`). ``l3_share`` is the share
    of ``cache_bytes`` given to the key → surrogate cache (default 0.04 when ``surrogates`` is
    given, else 0; at most 0.5). A key missing from L1/L2 whose mapping is cached and whose
    surrogate is resident is served with the surrogate's row."""

    def __init__(
        self,
        path: str | os.PathLike,
        tables: Sequence[str] | int,
        cache_bytes: int = 0,
        policy: str = "ev-lfu",
        precisions: Sequence[int] = (32,),
        l1_share: float = 0.5,
        surrogates: Mapping[str | int, Any] | None = None,
        l3_share: float | None = None,
        backend: str = "file",
    ) -> None:
        if isinstance(tables, int):
            tables = [f"C{i + 1}" for i in range(tables)]
        if isinstance(tables, str):
            raise InvalidArgumentError("tables must be a list of names, not one string")
        if cache_bytes < 0:
            raise InvalidArgumentError(f"cache_bytes must be >= 0, got {cache_bytes}")
        if l3_share is None:
            l3_share = 0.04 if surrogates else 0.0
        try:
            self._s = _native.EmbedStore(
                os.fspath(path),
                list(tables),
                int(cache_bytes),
                policy,
                list(precisions),
                l1_share,
                float(l3_share),
                _backend(backend),
            )
        except (OverflowError, TypeError) as e:
            raise InvalidArgumentError(f"bad EmbeddingStore argument: {e}") from None
        names, dim, rows, pol, c1, c2 = self._s.info()
        self.path = os.fspath(path)
        #: The back end, ``file`` or ``kv``.
        self.backend: str = backend
        #: Table names in lookup order.
        self.tables: list[str] = names
        #: Values per row.
        self.dim: int = dim
        #: Rows of each table.
        self.rows: list[int] = rows
        #: The policy's name.
        self.policy: str = pol
        #: Rows L1 and L2 hold.
        self.capacity: tuple[int, int] = (c1, c2)
        #: Mappings EVProx's L3 holds (0: off).
        self.l3_capacity: int = self._s.l3_capacity()
        for table, mapping in (surrogates or {}).items():
            self.set_surrogates(table, mapping)

    def set_surrogates(self, table: str | int, mapping: Any) -> None:
        """Sets (or replaces: a remap) the surrogate array of ``table`` (name or index): one
        surrogate row of the same table per row, ``-1`` for none."""
        np = _np()
        if isinstance(table, str):
            if table not in self.tables:
                raise InvalidArgumentError(
                    f"unknown table `{table}`; the store holds: {', '.join(self.tables)}"
                )
            index = self.tables.index(table)
        else:
            index = int(table)
        a = np.asarray(mapping)
        if a.ndim != 1 or a.dtype.kind not in "iu":
            raise InvalidArgumentError(
                f"surrogates of table `{table}` must be a 1-D integer array, got "
                f"{a.dtype} {list(a.shape)}"
            )
        if a.dtype.kind == "i" and a.size and int(a.min()) < -1:
            raise InvalidArgumentError(f"surrogates of table `{table}`: {int(a.min())} < -1")
        data = np.where(a < 0, np.uint64(2**64 - 1), a.astype(np.uint64)) if a.size else a
        self._s.set_surrogates(index, np.ascontiguousarray(data, dtype="<u8").tobytes())

    def lookup(self, batch: Any) -> Any:
        """Looks up ``batch`` (integer array ``[batch, N]``, one key per table) and returns
        float32 ``[batch, N, dim]`` (a writable array over the native result, no further copy).
        """
        np = _np()
        data, shape = _keys_bytes(batch, len(self.tables))
        out = self._s.lookup(data)
        return np.frombuffer(out, dtype="<f4").reshape(shape[0], len(self.tables), self.dim)

    def stats(self) -> dict[str, Any]:
        """Counters since open: ``requests``, ``keys``, ``l1_hits``, ``l2_hits``, ``misses``,
        ``perfect_l1`` and ``perfect`` (requests with every key in L1 / in memory),
        ``clipped``, ``demotions``, ``promotions``, EVProx's ``l3_hits`` (keys served by a
        surrogate), ``perfect_approx`` (requests served from memory, surrogates included) and
        ``l3_inserts``, and the derived rates ``hit_rate``, ``l1_hit_rate``, ``perfect_rate``,
        ``perfect_approx_rate``."""
        s = dict(self._s.stats())
        s["hit_rate"] = (s["l1_hits"] + s["l2_hits"]) / max(1, s["keys"])
        s["l1_hit_rate"] = s["l1_hits"] / max(1, s["keys"])
        s["perfect_rate"] = s["perfect"] / max(1, s["requests"])
        s["perfect_approx_rate"] = s["perfect_approx"] / max(1, s["requests"])
        s["policy"] = self.policy
        s["capacity_rows"] = list(self.capacity)
        return s

    def close(self) -> None:
        """Releases the files and the cache; later calls raise :class:`ClosedError`."""
        self._s.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def simulate(
    keys: Any, *, policy: str, capacity: int, warmup: int = 0
) -> dict[str, float | int | str]:
    """Hit rates of ``policy`` with ``capacity`` rows on grouped requests ``keys``
    (``[requests, N]``, column ``t`` = table ``t``), not counting the first ``warmup`` requests.
    """
    np = _np()
    a = np.asarray(keys)
    if a.ndim != 2:
        raise InvalidArgumentError(f"keys must be 2-D [requests, tables], got {list(a.shape)}")
    data, shape = _keys_bytes(a, a.shape[1])
    if capacity < 0:
        raise InvalidArgumentError(f"capacity must be >= 0, got {capacity}")
    req, nkeys, hits, perfect = _native.embed_simulate(
        policy, int(capacity), int(shape[1]), data, int(warmup)
    )
    return {
        "policy": policy,
        "capacity": capacity,
        "requests": req,
        "keys": nkeys,
        "hits": hits,
        "perfect": perfect,
        "hit_rate": hits / max(1, nkeys),
        "perfect_rate": perfect / max(1, req),
    }


def surrogates(
    values: Any,
    counts: Any,
    *,
    k: int = 10,
    metric: str = "euclidean",
    chunk: int = 1024,
) -> Any:
    """EVProx's offline step: for each row of ``values`` (``[rows, dim]``) its ``k`` nearest
    other rows (``"euclidean"`` or ``"cosine"`` distance, exact, computed in blocks of
    ``chunk`` rows with numpy), and of those the one with the most accesses in ``counts``
    (``[rows]``, e.g. a history's access counts; ties to the nearer). Returns int64 ``[rows]``
    (``-1`` when the table has a single row). Exact search costs ``rows² · dim``: meant for
    tables up to some 10⁵ rows."""
    np = _np()
    x = np.asarray(values, dtype=np.float32)
    c = np.asarray(counts)
    if x.ndim != 2:
        raise InvalidArgumentError(f"values must be 2-D [rows, dim], got {list(x.shape)}")
    if c.shape != (x.shape[0],):
        raise InvalidArgumentError(
            f"counts must have one entry per row ({x.shape[0]}), got {list(c.shape)}"
        )
    if metric not in ("euclidean", "cosine"):
        raise InvalidArgumentError(f"metric must be euclidean or cosine, got `{metric}`")
    if k < 1 or chunk < 1:
        raise InvalidArgumentError(f"k and chunk must be >= 1, got {k} and {chunk}")
    if not np.all(np.isfinite(x)):
        raise InvalidArgumentError("values must be finite")
    rows = x.shape[0]
    out = np.full(rows, -1, dtype=np.int64)
    if rows < 2:
        return out
    k = min(k, rows - 1)
    if metric == "cosine":
        norm = np.linalg.norm(x, axis=1, keepdims=True)
        x = x / np.where(norm > 0, norm, 1.0)
    sq = np.einsum("ij,ij->i", x, x)
    c = c.astype(np.float64)
    for lo in range(0, rows, chunk):
        hi = min(rows, lo + chunk)
        # Squared euclidean (cosine: on unit vectors, the same order as cosine distance).
        d = sq[lo:hi, None] - 2.0 * (x[lo:hi] @ x.T) + sq[None, :]
        d[np.arange(hi - lo), np.arange(lo, hi)] = np.inf  # never itself
        nn = np.argpartition(d, k - 1, axis=1)[:, :k]
        nd = np.take_along_axis(d, nn, axis=1)
        cn = c[nn]
        order = np.lexsort((nd, -cn), axis=1)  # most accessed first, then nearest
        out[lo:hi] = np.take_along_axis(nn, order[:, :1], axis=1)[:, 0]
    return out


def access_stream(keys: Any, *, policy: str, capacity: int) -> int:
    """Hits of a single-key ``policy`` of ``capacity`` items over the flat key stream ``keys``
    (each key accessed alone; for cross-checks against other simulators)."""
    data, _ = _keys_bytes(_np().asarray(keys).ravel())
    return _native.embed_access_stream(policy, int(capacity), data)


__all__ = [
    "POLICIES",
    "EmbeddingStore",
    "access_stream",
    "list_tables",
    "load_table",
    "simulate",
    "surrogates",
    "verify_table",
]

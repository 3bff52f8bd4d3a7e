"""Workload generators: key sets, request distributions, YCSB and Wiscer streams.

A typed front over the Rust crate ``attune-workload`` (see docs/workload.md). Every stream is a
pure function of its parameters and ``seed``. Generation happens in Rust in chunks (the GIL is
released while a chunk is made), so iterating a stream of billions of items uses constant memory.

Bad parameters (unknown names, theta < 0, proportions not summing to 1, zero records) raise
:class:`WorkloadError`, an :class:`attune.Error`, before any work is done.

Operations are ``(op, key, n)`` tuples: ``op`` is one of ``read``, ``update``, ``insert``,
``scan``, ``rmw``, ``delete``; ``n`` is the value length in bytes for writes, the record count for
scans and 0 otherwise.

Thread-safety: the iterators returned here are not meant to be shared between threads; create one
per thread (with distinct seeds for independent streams).
"""

from __future__ import annotations

from collections.abc import Iterator

from attune import _native
from attune.errors import WorkloadError

Key = int | bytes
OpTuple = tuple[str, int, int]

#: Items generated per call into Rust when iterating. Default 65536: large enough that the
#: per-call overhead is negligible, small enough to keep memory flat.
CHUNK_ITEMS = 65_536


def _call(fn, *args, **kwargs):
    """``fn(*args, **kwargs)``; the native module raises WorkloadError itself, but PyO3 rejects an
    argument of the wrong type or range (a negative count, a str for an int) before the call
    starts, with TypeError or OverflowError: those become WorkloadError here."""
    try:
        return fn(*args, **kwargs)
    except OverflowError as e:
        raise WorkloadError(f"parameter out of range: {e}") from None
    except TypeError as e:
        raise WorkloadError(f"bad parameter type: {e}") from None


def keys(
    name: str,
    n: int,
    seed: int = 0,
    *,
    order: str = "sequential",
    as_bytes: bool = False,
    start: int = 0,
    count: int | None = None,
) -> list[Key]:
    """Keys ``start .. start+count`` of key set ``name`` in load ``order``, as a list.

    ``name``: linear, seg1, seg10, normal, lognormal, uniform-dense, uniform-sparse, osm (and the
    parameterised forms listed in docs/workload.md). ``order``: ``sequential`` (ascending) or
    ``random`` / ``random:SEED``. ``as_bytes`` gives 16-byte order-preserving encodings (8-byte
    big-endian integer, then 8 zero bytes).
    """
    return _call(
        _native.workload_keys,
        name,
        n,
        seed,
        order=order,
        start=start,
        count=count,
        as_bytes=as_bytes,
    )


def iter_keys(
    name: str,
    n: int,
    seed: int = 0,
    *,
    order: str = "sequential",
    as_bytes: bool = False,
    chunk: int = CHUNK_ITEMS,
) -> Iterator[Key]:
    """All ``n`` keys in load ``order``, generated ``chunk`` at a time."""
    # Validate eagerly so errors surface at the call, not at the first next().
    keys(name, n, seed, order=order, as_bytes=as_bytes, start=0, count=0)

    def gen() -> Iterator[Key]:
        for start in range(0, n, chunk):
            yield from keys(name, n, seed, order=order, as_bytes=as_bytes, start=start, count=chunk)

    return gen()


def requests(dist: str, n: int, count: int, seed: int = 0) -> list[int]:
    """``count`` items of request distribution ``dist`` over ``[0, n)`` (e.g. ``zipfian:0.99``,
    ``hotspot:0.2:0.8``, ``latest``), as a list."""
    stream = _call(_native.RequestStream, dist, n, count, seed)
    return _call(stream.take, count)


def iter_requests(
    dist: str, n: int, count: int, seed: int = 0, *, chunk: int = CHUNK_ITEMS
) -> Iterator[int]:
    """As :func:`requests`, generated ``chunk`` at a time."""
    stream = _call(_native.RequestStream, dist, n, count, seed)

    def gen() -> Iterator[int]:
        while True:
            part = stream.take(chunk)
            if not part:
                return
            yield from part

    return gen()


def _ops(stream, chunk: int) -> Iterator[OpTuple]:
    while True:
        part = stream.take(chunk)
        if not part:
            return
        yield from part


def ycsb(
    letter: str,
    records: int,
    operations: int,
    seed: int = 0,
    *,
    phase: str = "run",
    insert_order: str = "hashed",
    field_count: int = 10,
    field_length: int = 100,
    request_distribution: str | None = None,
    chunk: int = CHUNK_ITEMS,
) -> Iterator[OpTuple]:
    """YCSB core workload ``letter`` (a-f) as ``(op, key, n)`` tuples.

    ``phase="load"`` yields the ``records`` inserts of the load phase; ``phase="run"`` yields
    ``operations`` operations with YCSB's CoreWorkload semantics. Keys are the stored key numbers
    (``fnvhash64(keynum)`` with ``insert_order="hashed"``); YCSB's string name is
    ``f"user{key}"``.
    """
    stream = _call(
        _native.workload_ycsb,
        letter,
        records,
        operations,
        seed,
        phase=phase,
        insert_order=insert_order,
        field_count=field_count,
        field_length=field_length,
        request_distribution=request_distribution,
    )
    return _ops(stream, chunk)


def wiscer(
    zipf: float,
    initial_size: int,
    operations: int,
    seed: int = 0,
    *,
    fetch: float = 1.0,
    insert: float = 0.0,
    delete: float = 0.0,
    dist_shift_freq: int = 0,
    dist_shift_prct: float = 0.0,
    key_pattern: str = "random",
    key_order: str = "random",
    phase: str = "run",
    chunk: int = CHUNK_ITEMS,
) -> Iterator[OpTuple]:
    """Wiscer's stream over ``initial_size`` keys: ``phase="load"`` yields the initial inserts in
    insertion order, ``phase="run"`` the operations (fetches appear as ``read``)."""
    stream = _call(
        _native.workload_wiscer,
        zipf,
        initial_size,
        operations,
        seed,
        fetch=fetch,
        insert=insert,
        delete=delete,
        dist_shift_freq=dist_shift_freq,
        dist_shift_prct=dist_shift_prct,
        key_pattern=key_pattern,
        key_order=key_order,
        phase=phase,
    )
    return _ops(stream, chunk)


def mixgraph(
    num: int,
    operations: int,
    seed: int = 0,
    *,
    keyrange: tuple[int, float, float, float, float] | None = None,
    key_dist: tuple[float, float] | None = None,
    mix: tuple[float, float, float] | None = None,
    chunk: int = CHUNK_ITEMS,
) -> Iterator[OpTuple]:
    """RocksDB db_bench mix_graph stream (gets as ``read``, puts as ``update``, seeks as ``scan``).

    Defaults to the FAST '20 example parameters (30 key ranges, two-term exponential hotness
    14.18, -2.917, 0.0164, -0.08082; power key model 0.002312, 0.3467; 85/14/1 get/put/seek).
    ``keyrange=(ranges, a, b, c, d)``, ``key_dist=(a, b)`` and ``mix=(get, put, seek)`` override.
    """
    stream = _call(
        _native.workload_mixgraph,
        num,
        operations,
        seed,
        keyrange=keyrange,
        key_dist=key_dist,
        mix=mix,
    )
    return _ops(stream, chunk)


TraceRecord = tuple[int, int, int, str, int]


def write_trace(
    path: str,
    patterns: list[str],
    count: int,
    seed: int = 0,
    *,
    fmt: str = "bin",
    size: int = 4096,
    range_bytes: int = 1 << 30,
    write_fraction: float = 0.0,
    combine: str = "mixture",
    mean_gap_ns: float = 1000.0,
) -> int:
    """Write a synthetic block-I/O trace of ``count`` records to ``path``; returns ``count``.

    Each pattern (``seq``, ``seq:RUN_LEN``, ``stride:BYTES``, ``random``) is one stream over its
    own ``range_bytes`` region; streams are mixed with equal weights (``combine="mixture"``) or
    take turns (``"interleave:BURST"``); arrivals are Poisson with mean gap ``mean_gap_ns``.
    ``fmt`` is ``bin`` (docs/formats/block-trace.md) or ``csv``.
    """
    return _call(
        _native.workload_trace_write,
        str(path),
        list(patterns),
        count,
        seed,
        fmt=fmt,
        size=size,
        range_bytes=range_bytes,
        write_fraction=write_fraction,
        combine=combine,
        mean_gap_ns=mean_gap_ns,
    )


def read_trace(path: str, *, chunk: int = CHUNK_ITEMS) -> Iterator[TraceRecord]:
    """Stream ``(timestamp_ns, offset, size, "R"|"W", latency_ns)`` records from a binary or CSV
    trace. Corrupt or truncated input raises :class:`WorkloadError` naming the byte offset (binary)
    or line number (CSV)."""
    reader = _call(_native.TraceReader, str(path))

    def gen() -> Iterator[TraceRecord]:
        while True:
            part = _call(reader.take, chunk)
            if not part:
                return
            yield from part

    return gen()


def criteo(
    count: int,
    *,
    tables: int = 26,
    scale: float = 0.01,
    seed: int = 0,
    theta: float = 1.05,
    clusters: int = 10_000,
    cluster_theta: float = 0.9,
    correlation: float = 0.8,
    pool: int = 4,
    profile: str = "zipf",
    coverage: float | None = None,
    click_logit: float | None = None,
) -> dict:
    """``count`` requests of the Criteo-like generator (``tables`` of Criteo-Kaggle's 26
    categorical tables, cardinalities times ``scale``, zipfian keys of exponent ``theta``
    correlated across tables through ``clusters`` latent clusters; see docs/workload.md).

    ``profile`` ``"kaggle"`` is the calibrated generator (a uniform tail per table that touches
    ``coverage`` = 0.8 of its rows within one scaled pass of Criteo-Kaggle's 45.8 M samples, and
    its 25.6 % click rate); ``"zipf"`` (the default) has no tail. ``coverage`` and
    ``click_logit`` override the profile's values.

    Returns a dict of numpy arrays: ``keys`` (uint64 ``[count, tables]``), ``dense`` (uint32
    ``[count, 13]``), ``clicks`` (bool ``[count]``) and ``cardinalities`` (uint64 ``[tables]``).
    Deterministic by ``seed``."""
    import numpy as np

    keys, dense, clicks, cards = _call(
        _native.workload_criteo,
        tables,
        scale,
        count,
        seed,
        theta,
        clusters,
        cluster_theta,
        correlation,
        pool,
        profile,
        coverage,
        click_logit,
    )
    return {
        "keys": np.frombuffer(keys, dtype="<u8").reshape(count, tables),
        "dense": np.frombuffer(dense, dtype="<u4").reshape(count, 13),
        "clicks": np.frombuffer(clicks, dtype=np.uint8).astype(bool),
        "cardinalities": np.asarray(cards, dtype=np.uint64),
    }


__all__ = [
    "CHUNK_ITEMS",
    "WorkloadError",
    "criteo",
    "iter_keys",
    "iter_requests",
    "keys",
    "mixgraph",
    "read_trace",
    "requests",
    "wiscer",
    "write_trace",
    "ycsb",
]

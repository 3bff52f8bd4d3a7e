"""Block traces as numpy columns: loading (MSR, CloudPhysics, Attune formats), windows and the
chapter's augmentations (re-rating and resizing).

The parsing is the Rust readers' (``attune-io``'s ``trace`` module, through
``attune._native.io_read_trace``); this module only opens files (gzip'd or not), keeps the columns
and cuts them. A malformed line raises :class:`attune.CorruptionError` naming the file (for
:func:`load_trace`) and its line number.
"""

from __future__ import annotations

import gzip
import os
import zlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from attune import _native
from attune.errors import CorruptionError, Error, InvalidArgumentError, StorageIOError

#: Formats :func:`load_trace` reads (``None`` sniffs the first bytes).
FORMATS = ("msr", "cloudphysics", "attune-csv", "attune")


#: Allowed re-rating factors (:meth:`Trace.rerate`): a thousandth to a thousand times the
#: arrival rate keeps nanosecond timestamps meaningful and in 64 bits.
RERATE_RANGE = (1e-3, 1e3)
#: Allowed resizing factors (:meth:`Trace.resize`): beyond 1024× every I/O of a real trace is
#: gigabytes (the chapter's augmentations are 0.1× to 2×).
RESIZE_RANGE = (1e-3, 1024.0)
#: Largest :func:`synthetic_trace`.
SYNTHETIC_IOS_MAX = 100_000_000
#: Allowed arrival rates of :func:`synthetic_trace` (I/Os per second; the longest trace then
#: spans 10**8 s, within 64-bit nanoseconds).
SYNTHETIC_IOPS_RANGE = (1.0, 1e9)


def check_factor(name: str, value: float, allowed: tuple[float, float]) -> float:
    """``value`` as a float if it is a finite number in ``allowed`` (inclusive), else
    :class:`attune.InvalidArgumentError` naming ``name`` and the range."""
    lo, hi = allowed
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise InvalidArgumentError(f"{name} must be a number in [{lo:g}, {hi:g}], got {value!r}")
    if not (np.isfinite(v) and lo <= v <= hi):
        raise InvalidArgumentError(
            f"{name} must be a finite factor in [{lo:g}, {hi:g}], got {value!r}"
        )
    return v


def check_seed(seed: object, name: str = "seed") -> int:
    """``seed`` if it is an integer in 0..2**64-1 (what the simulator takes), else
    :class:`attune.InvalidArgumentError`."""
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)):
        raise InvalidArgumentError(f"{name} must be an integer in 0..2**64-1, got {seed!r}")
    if not 0 <= int(seed) < 2**64:
        raise InvalidArgumentError(f"{name} must be in 0..2**64-1, got {seed}")
    return int(seed)


@dataclass(frozen=True)
class Trace:
    """A block trace: arrival time (ns from the first I/O), byte offset, size, read flag.

    The loaders sort the I/Os by time (stably: equal timestamps keep their file order);
    ``reordered`` is how many of them that sort moved (0 for a trace already in time order)."""

    timestamp_ns: np.ndarray
    offset: np.ndarray
    size: np.ndarray
    is_read: np.ndarray
    name: str = ""
    reordered: int = 0

    def __len__(self) -> int:
        return int(self.timestamp_ns.shape[0])

    @property
    def duration_ns(self) -> int:
        if not len(self):
            return 0
        return int(self.timestamp_ns.max()) - int(self.timestamp_ns.min())

    def columns(self) -> tuple[list[int], list[int], list[int], list[bool]]:
        """The four columns as Python lists (what the native functions take)."""
        return (
            self.timestamp_ns.tolist(),
            self.offset.tolist(),
            self.size.tolist(),
            self.is_read.tolist(),
        )

    def slice(self, start: int, stop: int) -> Trace:
        """I/Os ``start..stop`` with time rebased to 0."""
        ts = self.timestamp_ns[start:stop]
        ts = ts - ts[0] if len(ts) else ts
        return Trace(
            ts, self.offset[start:stop], self.size[start:stop], self.is_read[start:stop], self.name
        )

    def rerate(self, rate: float) -> Trace:
        """Arrivals ``rate`` times as intense (inter-arrival times divided by ``rate``);
        ``rate`` in :data:`RERATE_RANGE`."""
        rate = check_factor("rate", rate, RERATE_RANGE)
        scaled = np.round(self.timestamp_ns / rate)
        if len(self) and scaled.max() >= 2.0**64:
            i = int(np.argmax(scaled >= 2.0**64))
            raise InvalidArgumentError(
                f"rate {rate:g}: timestamp {int(self.timestamp_ns[i])} ns (I/O {i}) would exceed "
                "2**64-1 ns after re-rating; use a larger rate or a shorter trace"
            )
        ts = scaled.astype(np.uint64)
        return Trace(ts, self.offset, self.size, self.is_read, self.name, self.reordered)

    def resize(self, factor: float) -> Trace:
        """Every I/O ``factor`` times as large (at least 1 byte); ``factor`` in
        :data:`RESIZE_RANGE`. A size that would exceed 2**32-1 bytes raises
        :class:`attune.InvalidArgumentError` naming the factor and the first such I/O."""
        factor = check_factor("factor", factor, RESIZE_RANGE)
        scaled = np.round(self.size.astype(np.float64) * factor)
        too_big = scaled > 2**32 - 1
        if too_big.any():
            i = int(np.argmax(too_big))
            raise InvalidArgumentError(
                f"factor {factor:g}: I/O {i} of {int(self.size[i])} bytes would exceed "
                "2**32-1 bytes after resizing; use a smaller factor"
            )
        size = np.maximum(scaled, 1).astype(np.uint32)
        return Trace(self.timestamp_ns, self.offset, size, self.is_read, self.name, self.reordered)


def concat_traces(traces: list[Trace], gap_ns: int = 1_000_000) -> Trace:
    """``traces`` one after another (each shifted to start ``gap_ns`` after the previous one
    ends), named after all of them: a workload whose regime changes at every join."""
    if not traces:
        raise InvalidArgumentError("no traces to concatenate")
    parts, t0 = [], 0
    for t in traces:
        ts = t.timestamp_ns.astype(np.uint64) - (t.timestamp_ns[0] if len(t) else 0)
        parts.append(ts + np.uint64(t0))
        t0 += (int(ts[-1]) if len(t) else 0) + gap_ns
    return Trace(
        np.concatenate(parts).astype(np.uint64),
        np.concatenate([t.offset for t in traces]),
        np.concatenate([t.size for t in traces]),
        np.concatenate([t.is_read for t in traces]),
        "+".join(t.name for t in traces),
    )


def parse_trace(data: bytes, fmt: str | None = None, name: str = "") -> Trace:
    """A trace from (decompressed) bytes, sorted by time (:attr:`Trace.reordered` says how many
    I/Os moved); ``fmt`` one of :data:`FORMATS` or ``None`` to sniff."""
    if fmt is not None and fmt not in FORMATS:
        raise InvalidArgumentError(f"unknown trace format {fmt!r}; valid: {', '.join(FORMATS)}")
    ts, off, size, read, moved = _native.io_read_trace(data, fmt)
    return Trace(
        np.asarray(ts, dtype=np.uint64),
        np.asarray(off, dtype=np.uint64),
        np.asarray(size, dtype=np.uint32),
        np.asarray(read, dtype=bool),
        name,
        moved,
    )


def display_name(name: str) -> str:
    """``name`` (a file name that may hold undecodable bytes as surrogate escapes, as
    ``os.fsdecode`` gives them) as text that is valid UTF-8 everywhere: each undecodable byte
    becomes U+FFFD. Trace names are labels (titles, JSON rows), never paths to reopen."""
    try:
        raw = os.fsencode(name)
    except UnicodeEncodeError:
        raw = name.encode("utf-8", "replace")
    return raw.decode("utf-8", "replace")


def check_path(path: object, what: str) -> Path:
    """``path`` (``str``, ``bytes`` or ``os.PathLike``) as a :class:`~pathlib.Path`, else
    :class:`attune.InvalidArgumentError` naming ``what``."""
    try:
        return Path(os.fsdecode(path))  # type: ignore[arg-type]
    except TypeError:
        raise InvalidArgumentError(
            f"{what} must be str, bytes or os.PathLike, not {type(path).__name__}"
        ) from None


def check_trace(trace: object, what: str = "trace") -> Trace:
    """``trace`` if it is a :class:`Trace`, else :class:`attune.InvalidArgumentError`."""
    if not isinstance(trace, Trace):
        raise InvalidArgumentError(
            f"{what} must be an attune.io.Trace (load_trace, parse_trace or synthetic_trace), "
            f"not {type(trace).__name__}"
        )
    return trace


def read_trace_bytes(p: Path) -> bytes:
    """The bytes of trace file ``p``, decompressed when they start with the gzip magic (a name
    ending in ``.gz`` must). :class:`attune.StorageIOError` when the file cannot be read,
    :class:`attune.CorruptionError` when its gzip data is damaged or missing; both name it."""
    try:
        raw = p.read_bytes()
    except OSError as e:
        raise StorageIOError(f"cannot read trace {p}: {e.strerror or e}", str(p)) from e
    if raw[:2] == b"\x1f\x8b":
        try:
            return gzip.decompress(raw)
        except (OSError, EOFError, zlib.error) as e:
            raise CorruptionError(f"cannot decompress trace {p}: {e}", str(p), 0) from e
    if p.suffix == ".gz" and raw:
        raise CorruptionError(
            f"trace {p} is not gzip (its name ends in .gz but it lacks the gzip magic 1f 8b)",
            str(p),
            0,
        )
    return raw


def load_trace(path: str | bytes | os.PathLike, fmt: str | None = None) -> Trace:
    """Reads a trace file (gzip'd when it starts with the gzip magic; a name ending in ``.gz``
    must). ``path`` is a ``str``, ``bytes`` or ``os.PathLike``. Every error names the file."""
    p = check_path(path, "a trace path")
    return parse_trace_file(read_trace_bytes(p), fmt, p)


def parse_trace_file(raw: bytes, fmt: str | None, p: Path) -> Trace:
    """:func:`parse_trace` of the bytes ``raw`` read from file ``p``; an error names the file."""
    try:
        return parse_trace(raw, fmt, display_name(p.name))
    except Error as e:
        raise type(e)(f"trace {p}: {e}", str(p), e.offset) from e


def synthetic_trace(
    n: int = 4000, *, write_fraction: float = 0.7, iops: float = 20_000, seed: int = 0
) -> Trace:
    """A small random trace (for tests and examples without the real samples): ``n`` I/Os
    (1..:data:`SYNTHETIC_IOS_MAX`) arriving as a Poisson process of ``iops`` per second (in
    :data:`SYNTHETIC_IOPS_RANGE`), each a write with probability ``write_fraction`` (in [0, 1]);
    ``seed`` in 0..2**64-1. A bad argument raises :class:`attune.InvalidArgumentError`."""
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)):
        raise InvalidArgumentError(f"n must be an integer, got {n!r}")
    if not 1 <= n <= SYNTHETIC_IOS_MAX:
        raise InvalidArgumentError(f"n must be in 1..{SYNTHETIC_IOS_MAX}, got {n}")
    write_fraction = check_factor("write_fraction", write_fraction, (0.0, 1.0))
    iops = check_factor("iops", iops, SYNTHETIC_IOPS_RANGE)
    seed = check_seed(seed)
    rng = np.random.default_rng(seed)
    gaps = rng.exponential(1e9 / iops, n)
    ts = np.cumsum(gaps).astype(np.uint64)
    ts -= ts[0]
    is_read = rng.random(n) >= write_fraction
    size = np.where(is_read, 4096 * rng.integers(1, 5, n), 4096 * rng.integers(4, 33, n))
    offset = rng.integers(0, 1 << 22, n).astype(np.uint64) * 4096
    return Trace(ts, offset, size.astype(np.uint32), is_read, f"synthetic-{seed}")

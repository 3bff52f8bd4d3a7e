"""The SQLite study of the SSD-profiling chapter, on the simulated SSD.

SQLite runs the chapter's benchmark (32-byte keys, 100-byte values; per iteration a phase of
inserts, one per transaction, then a phase of point selects; scaled down) in a child process
under ``strace``. Its file calls (reads, writes, fsyncs, and phase marks the child makes by
trying to open ``/attune-mark/NAME``) are replayed on the simulated SSD through the page-cache
model of ``attune_io::osreplay`` (``attune._native.device_replay_os``), once as SQLite laid
them out and once rewritten for one of the chapter's two layout changes:

* **use-hot-locations** (rollback journal, §2.4.1): the B-tree file is placed at the learned hot
  offset (its device extent starts ``hot_offset`` bytes past a stripe boundary, the chapter's
  "offset I/O requests to the B+-tree file by 32 KB"), and writeback never crosses a stripe
  boundary (the chapter's extra fsync, a barrier against merging). Measured: select and insert
  throughput per simulated device second.
* **write-aligned-stripes** (WAL mode, §2.4.2): WAL frames become exactly one database page, at
  page-aligned offsets: the WAL header keeps its own first page-sized slot and each 24-byte frame
  header moves into the last 24 bytes of its page (the chapter reserves them with
  ``SQLITE_TESTCTRL_RESERVE``; here the rewrite moves the header bytes and SQLite's pages are not
  shrunk, a 0.04 % capacity difference the chapter measured as +0.1 % database pages).
  Measured: flash pages the WAL programs, and those over the minimum, per iteration.

The rule checker (:func:`attune.device.check`) also runs over each original trace with the
device's learned parameters: these are SQLite's real violations.

The workload runs in a fresh directory under ``/dev/shm`` (so fsync costs no real time) or the
system temporary directory, which is always removed.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from attune import _native
from attune.device.traces import MARK, READ, SYNC, WRITE, CallColumns, parse_strace_calls
from attune.errors import InvalidArgumentError, StorageIOError

#: The syscalls the study traces.
TRACED = "openat,close,lseek,read,write,pread64,pwrite64,fsync,fdatasync"

#: WAL file header and frame header bytes (sqlite.org/fileformat.html, "WAL file format").
WAL_HEADER_BYTES = 32
WAL_FRAME_HEADER_BYTES = 24

#: Device bytes between the files' regions on the simulated SSD (each file is contiguous).
REGION_BYTES = 1 << 32

_WORKLOAD = r"""
import os, random, sqlite3, sys
db, mode, page, rows, iters, ops, per_txn, cache_kib, seed = sys.argv[1:10]
page, rows, iters, ops, per_txn, cache_kib, seed = map(int, (page, rows, iters, ops, per_txn,
                                                             cache_kib, seed))
rng = random.Random(seed)
def mark(name):
    try:
        os.close(os.open("/attune-mark/" + name, os.O_RDONLY))
    except OSError:
        pass
con = sqlite3.connect(db, isolation_level=None)
con.execute(f"PRAGMA page_size={page}")
con.execute(f"PRAGMA journal_mode={mode}")
con.execute("PRAGMA synchronous=FULL")
if mode == "wal":
    con.execute("PRAGMA wal_autocheckpoint=0")
con.execute("CREATE TABLE kv (k BLOB PRIMARY KEY, v BLOB) WITHOUT ROWID")
keys = []
def put():
    k = rng.randbytes(32)
    keys.append(k)
    con.execute("INSERT OR REPLACE INTO kv VALUES (?, ?)", (k, rng.randbytes(100)))
con.execute("BEGIN")
for _ in range(rows):
    put()
con.execute("COMMIT")
if mode == "wal":
    con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
con.close()
con = sqlite3.connect(db, isolation_level=None)
con.execute(f"PRAGMA cache_size=-{cache_kib}")
con.execute("PRAGMA synchronous=FULL")
if mode == "wal":
    con.execute("PRAGMA wal_autocheckpoint=0")
for it in range(iters):
    mark(f"insert-{it}")
    for j in range(ops):
        if j % per_txn == 0:
            con.execute("BEGIN")
        put()
        if (j + 1) % per_txn == 0 or j + 1 == ops:
            con.execute("COMMIT")
    mark(f"select-{it}")
    for _ in range(ops):
        con.execute("SELECT v FROM kv WHERE k = ?", (rng.choice(keys),)).fetchone()
    if mode == "wal":
        mark(f"checkpoint-{it}")
        con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
mark("end")
con.close()
"""


def _workdir() -> Path:
    shm = Path("/dev/shm")
    base = shm if shm.is_dir() and os.access(shm, os.W_OK) else None
    return Path(tempfile.mkdtemp(prefix="attune-sqlite-", dir=base))


def trace_sqlite(
    *,
    mode: str = "delete",
    page_bytes: int = 65536,
    rows: int = 50_000,
    iterations: int = 3,
    ops: int = 2_000,
    per_txn: int = 1,
    cache_kib: int | None = None,
    seed: int = 1,
    keep_trace: str | os.PathLike | None = None,
) -> CallColumns:
    """Runs the benchmark under strace and returns SQLite's file calls (files under the work
    directory only). ``mode`` is SQLite's ``journal_mode`` (``delete`` or ``wal``); the page
    cache defaults to a tenth of the loaded database, as in the chapter. ``keep_trace`` copies
    the raw strace log there."""
    if mode not in ("delete", "wal"):
        raise InvalidArgumentError(f"journal mode {mode!r}: use 'delete' or 'wal'")
    for name, v in (("rows", rows), ("iterations", iterations), ("ops", ops), ("per_txn", per_txn)):
        if v < 1:
            raise InvalidArgumentError(f"{name} {v}: must be at least 1")
    if page_bytes < 512 or page_bytes > 65536 or page_bytes & (page_bytes - 1):
        raise InvalidArgumentError(f"page size {page_bytes}: a power of two in 512..65536")
    strace = shutil.which("strace")
    if strace is None:
        raise StorageIOError("the SQLite study needs strace (apt-get install strace)", "strace")
    if cache_kib is None:
        # About 200 bytes a row in the B-tree: a tenth of that.
        cache_kib = max(page_bytes // 1024 * 2, rows * 200 // 10 // 1024)
    work = _workdir()
    try:
        log = work / "strace.txt"
        cmd = [strace, "-f", "-y", "-e", f"trace={TRACED}", "-o", str(log)]
        cmd += [sys.executable, "-I", "-c", _WORKLOAD, str(work / "bench.db"), mode]
        cmd += [str(x) for x in (page_bytes, rows, iterations, ops, per_txn, cache_kib, seed)]
        r = subprocess.run(cmd, capture_output=True, text=True, check=False)
        if r.returncode != 0:
            tail = (r.stderr or r.stdout).strip().splitlines()[-3:]
            raise StorageIOError(
                f"the traced SQLite run failed (exit {r.returncode}): {' | '.join(tail)}",
                str(work),
            )
        text = log.read_text(errors="replace")
        if keep_trace is not None:
            shutil.copyfile(log, keep_trace)
        return parse_strace_calls(text, log.name, under=str(work) + "/")
    finally:
        shutil.rmtree(work, ignore_errors=True)


def file_role(path: str) -> str:
    """``db``, ``wal``, ``journal`` or ``other`` from a SQLite file name."""
    if path.endswith("-wal"):
        return "wal"
    if path.endswith("-journal"):
        return "journal"
    if path.endswith(".db"):
        return "db"
    return "other"


def wal_aligned_pieces(offset: int, size: int, page: int) -> list[tuple[int, int]]:
    """Where bytes ``[offset, offset + size)`` of SQLite's WAL go in the aligned layout: the
    32-byte WAL header stays at 0 (in a first slot of one page), frame ``i``'s page at
    ``page * (i + 1)`` and its 24-byte header in that page's last 24 bytes."""
    out: list[tuple[int, int]] = []
    end = offset + size
    pos = offset
    frame = page + WAL_FRAME_HEADER_BYTES
    while pos < end:
        if pos < WAL_HEADER_BYTES:
            stop = min(end, WAL_HEADER_BYTES)
            out.append((pos, stop - pos))
        else:
            i, r = divmod(pos - WAL_HEADER_BYTES, frame)
            slot = page * (i + 1)
            if r < WAL_FRAME_HEADER_BYTES:
                stop = min(end, pos + WAL_FRAME_HEADER_BYTES - r)
                out.append((slot + page - WAL_FRAME_HEADER_BYTES + r, stop - pos))
            else:
                stop = min(end, pos + frame - r)
                out.append((slot + r - WAL_FRAME_HEADER_BYTES, stop - pos))
        pos = stop
    return out


def rewrite_wal_aligned(calls: CallColumns, page: int) -> CallColumns:
    """``calls`` with every WAL read and write moved as :func:`wal_aligned_pieces` says."""
    wal = {i for i, p in enumerate(calls.files) if file_role(p) == "wal"}
    out = CallColumns(files=list(calls.files), marks=list(calls.marks), skipped=calls.skipped)
    for k, f, o, n in zip(calls.kind, calls.file, calls.offset, calls.size, strict=True):
        if f in wal and k in (READ, WRITE) and n > 0:
            for po, pn in wal_aligned_pieces(o, n, page):
                out.add(k, f, po, pn)
        else:
            out.add(k, f, o, n)
    return out


def replay(
    calls: CallColumns,
    params: dict[str, Any],
    *,
    stripe: int,
    db_shift: int = 0,
    split: bool = False,
    seed: int = 0,
) -> dict[str, Any]:
    """Replays ``calls`` on the simulated SSD: each file in its own stripe-aligned region, the
    B-tree file ``db_shift`` bytes further; ``split`` cuts writeback at stripe boundaries.
    Returns the phases (named by the marks; the first is ``setup``) and flash pages per role."""
    if stripe <= 0:
        raise InvalidArgumentError(f"stripe {stripe}: must be positive")
    bases = []
    for i, p in enumerate(calls.files):
        shift = db_shift if file_role(p) == "db" else 0
        bases.append(REGION_BYTES * (i + 1) + shift)
    r = _native.device_replay_os(
        calls.kind,
        calls.file,
        calls.offset,
        calls.size,
        bases,
        params,
        seed,
        131072,
        stripe if split else 0,
    )
    names = ["setup", *calls.marks]
    phases = dict(zip(names, r["phases"], strict=True))
    roles: dict[str, list[int]] = {}
    for p, (pages, least) in zip(calls.files, r["file_pages"], strict=True):
        acc = roles.setdefault(file_role(p), [0, 0])
        acc[0] += pages
        acc[1] += least
    return {"phases": phases, "pages_by_role": roles}


def phase_totals(phases: dict[str, dict[str, int]], prefix: str) -> dict[str, int]:
    """Counters summed over the phases whose name starts with ``prefix``."""
    out: dict[str, int] = {}
    for name, c in phases.items():
        if name.startswith(prefix):
            for k, v in c.items():
                out[k] = out.get(k, 0) + int(v)
    return out


def count_kinds(calls: CallColumns) -> dict[str, int]:
    """Calls by kind (for reports)."""
    names = {READ: "reads", WRITE: "writes", SYNC: "fsyncs", MARK: "marks"}
    out = dict.fromkeys(names.values(), 0)
    for k in calls.kind:
        out[names[k]] += 1
    return out

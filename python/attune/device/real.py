"""Experiments 1 and 2 on real files under a directory.

The files live in a fresh hidden directory under PATH and are removed when the run ends, however
it ends (an error, Ctrl-C or SIGTERM). Writes use O_DIRECT when the file system accepts it at
the write size (else buffered writes); every write is followed by fsync, as in the chapter.
Reads use O_DIRECT when the file system accepts it at the read's alignment; where it does not,
the experiment's offset unit is raised to the smallest alignment O_DIRECT accepts (said in the
result), because buffered reads would measure the page cache, not the device. Latencies are
``time.perf_counter_ns`` around each ``preadv``; the rule is the same as the simulated run's
(``attune._native.device_analyze``).
"""

from __future__ import annotations

import contextlib
import errno
import mmap
import os
import random
import shutil
import signal
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from attune import _native
from attune._process import pid_alive
from attune.errors import InvalidArgumentError, StorageIOError

#: The real-disk scale: 8 MiB files, 4 read rounds, 4 chunks per offset group (minutes on a
#: virtual disk; see docs/ssd-profile.md).
REAL_DEFAULTS: dict[str, Any] = {"file_bytes": 8 << 20, "samples_per_group": 4}
REAL_ROUNDS = 4


class _Interrupted(Exception):
    pass


@contextlib.contextmanager
def _sigterm_raises() -> Iterator[None]:
    """SIGTERM becomes an exception for the duration, so that cleanup runs."""

    def handler(signum, frame):
        raise _Interrupted("terminated by SIGTERM")

    try:
        old = signal.signal(signal.SIGTERM, handler)
    except ValueError:  # not the main thread
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, old)


def _direct_ok(path: Path, size: int, offset: int) -> bool:
    """Whether an O_DIRECT write and read of ``size`` bytes at ``offset`` work in ``path``."""
    if not hasattr(os, "O_DIRECT"):
        return False
    probe = path / "probe"
    buf = mmap.mmap(-1, max(size, mmap.PAGESIZE))
    try:
        fd = os.open(probe, os.O_RDWR | os.O_CREAT | os.O_DIRECT, 0o600)
    except OSError:
        return False
    try:
        mv = memoryview(buf)[:size]
        os.pwrite(fd, mv, offset)
        os.preadv(fd, [mv], offset)
        return True
    except OSError:
        return False
    finally:
        os.close(fd)
        with contextlib.suppress(OSError):
            os.unlink(probe)


def _direct_unit(path: Path) -> int | None:
    """Smallest power of two ≥ 512 at which O_DIRECT works here (None: not at all)."""
    for unit in (512, 1024, 2048, 4096, 8192, 16384, 65536):
        if _direct_ok(path, unit, unit):
            return unit
    return None


def check_dir(path: str | Path) -> Path:
    """The directory, checked: it exists, is a directory and is writable. Raises
    :class:`attune.InvalidArgumentError` naming what is wrong."""
    if not isinstance(path, (str, os.PathLike)):
        raise InvalidArgumentError(
            f"profile path must be a str or os.PathLike, got {type(path).__name__}"
        )
    p = Path(path)
    if not p.exists():
        raise InvalidArgumentError(f"profile path {p} does not exist")
    if not p.is_dir():
        raise InvalidArgumentError(f"profile path {p} is not a directory")
    if not os.access(p, os.W_OK | os.X_OK):
        raise InvalidArgumentError(f"profile path {p} is not writable")
    return p


def check_path(
    path: str | Path, need_bytes: int, file_bytes: int | None = None, least: int | None = None
) -> Path:
    """:func:`check_dir`, and ``need_bytes`` free (plus 10 %). ``file_bytes`` is the size of one
    test file and ``least`` the smallest the settings allow: when even files of that size do not
    fit, the error's advice is to free space or profile elsewhere, not to shrink the files."""
    p = check_dir(path)
    free = shutil.disk_usage(p).free
    want = int(need_bytes * 1.1)
    if free < want:
        mib = f"{file_bytes / 2**20:g} MiB" if file_bytes else ""
        smallest = bool(file_bytes and least and need_bytes // file_bytes * least * 1.1 > free)
        if smallest:
            advice = (
                f"even the smallest files the profile allows ({least / 2**20:g} MiB each) do not "
                f"fit: free space under {p}, or profile a directory with more room on the same "
                "device"
            )
        else:
            advice = (
                "use smaller files: --file-mb on the command line, the file_bytes setting in "
                "the Python API"
                + (f" (now {mib} each" if mib else "")
                + (f"; {least / 2**20:g} MiB is the smallest these settings allow" if least else "")
                + (")" if mib else "")
            )
        raise InvalidArgumentError(
            f"too little free space under {p}: the profile needs {want / 2**20:.0f} MiB, "
            f"{free / 2**20:.0f} MiB are free; {advice}"
        )
    return p


def min_file_bytes(cfg: dict[str, Any]) -> int:
    """The smallest test file the settings allow: 4 × the largest of the read size, the
    largest write and the largest chunk guess (``ProfileConfig::validate``)."""
    return 4 * max(cfg["read_bytes"], cfg["max_write"], cfg["max_guess"])


def profile_path(
    path: str | Path,
    config: dict | None = None,
    rounds: int = REAL_ROUNDS,
    progress: Callable[[int, int], None] | None = None,
) -> dict[str, Any]:
    """Runs both experiments under ``path`` and applies the rule. Returns the same keys as
    :func:`attune.device.profile_simulated` (without ``expected``) plus ``io_mode``, ``seconds``
    and ``notes``."""
    # The path first: a missing directory is the first thing to say, before any setting.
    p = check_dir(path)
    from attune.device import _checked_config

    # The settings and the free space are checked before the random orders are built (their
    # size grows with the files).
    user = {**REAL_DEFAULTS, **(_checked_config(config) or {})}
    cfg = _native.device_profile_config(user, orders=False)
    if isinstance(rounds, bool) or not isinstance(rounds, int) or rounds < 1:
        raise InvalidArgumentError(f"rounds must be an integer of at least 1, got {rounds!r}")
    sizes: list[int] = cfg["write_sizes"]
    notes: list[str] = remove_stale(p)
    fb = cfg["file_bytes"]
    base = check_path(p, fb * len(sizes), fb, min_file_bytes(cfg))
    cfg = _native.device_profile_config(user)
    start = time.monotonic()
    with _sigterm_raises():
        try:
            work = Path(
                tempfile.mkdtemp(prefix=f"{STALE_PREFIX}{os.getpid()}@{_host()}.", dir=base)
            )
        except OSError as e:
            raise StorageIOError(
                f"cannot create files under {base}: {e.strerror or e}", str(base)
            ) from e
        try:
            # The O_DIRECT alignment decides the offset unit and the smallest guess, before any
            # long work: a setting it makes impossible fails now, not after Experiment 1.
            unit = _direct_unit(work)
            if unit is None:
                notes.append(
                    "O_DIRECT is not supported here: reads may be served by the page cache"
                )
            elif unit > cfg["offset_unit"]:
                raised = {"offset_unit": unit}
                if cfg["min_guess"] < 2 * unit:
                    raised["min_guess"] = 2 * unit
                    if cfg["max_guess"] < 2 * unit:
                        raised["max_guess"] = 2 * unit
                notes.append(
                    f"O_DIRECT needs {unit}-byte alignment here: the offset unit is raised from "
                    f"{cfg['offset_unit']} B to {unit} B"
                    + (
                        f" and the smallest chunk guess from {cfg['min_guess']} B to "
                        f"{raised['min_guess']} B"
                        if "min_guess" in raised
                        else ""
                    )
                    + f" (flash pages below {2 * unit} B cannot be seen)"
                )
                cfg = _native.device_profile_config({**user, **raised})
            return _run(work, cfg, rounds, progress, start, unit, notes)
        except _Interrupted as e:
            raise StorageIOError(f"profile stopped: {e}; its files were removed", str(base)) from e
        except StorageIOError:
            raise  # already says what failed (and is an OSError too)
        except OSError as e:
            if e.errno == errno.ENOSPC:
                raise StorageIOError(
                    f"the device under {base} ran out of space during the profile: "
                    f"{e.strerror or e}; its files were removed (use smaller files: --file-mb, or "
                    "file_bytes in the Python API)",
                    str(base),
                ) from e
            raise StorageIOError(
                f"profile I/O failed under {base}: {e.strerror or e}; its files were removed",
                str(base),
            ) from e
        finally:
            shutil.rmtree(work, ignore_errors=True)


#: Work directories are ``.attune-profile-<pid>@<host>.<random>``.
STALE_PREFIX = ".attune-profile-"


def _host() -> str:
    return os.uname().nodename.replace("@", "_").replace("/", "_") or "host"


def _own_file(name: str) -> bool:
    """Whether ``name`` is one the profiler writes in its work directory: ``NNkb-seq`` /
    ``NNNb-seq`` (Experiment 1's files) or ``probe`` (the O_DIRECT probe)."""
    if name == "probe":
        return True
    for suffix in ("kb-seq", "b-seq"):
        if name.endswith(suffix) and name[: -len(suffix)].isdigit():
            return True
    return False


def _foreign_entries(d: Path) -> list[str]:
    """Entries of ``d`` the profiler would not have written (a subdirectory, a symbolic link or
    another name); an unreadable directory counts as foreign."""
    try:
        return [
            e.name
            for e in d.iterdir()
            if not _own_file(e.name) or e.is_symlink() or not e.is_file()
        ]
    except OSError as e:
        return [f"(cannot list it: {e.strerror or e})"]


def remove_stale(base: Path) -> list[str]:
    """Removes work directories of earlier runs under ``base`` that were killed (SIGKILL, power
    loss): those whose name carries a pid of this host that is no longer running, and that hold
    only the profiler's own files. Others (another host's, older names without a pid, a
    symbolic link, a directory holding anything else) are reported, not touched. Returns
    notes."""
    notes: list[str] = []
    try:
        entries = [e for e in base.iterdir() if e.name.startswith(STALE_PREFIX)]
    except OSError:
        return notes
    for e in sorted(entries):
        if e.is_symlink():
            notes.append(
                f"{e} has a profile directory's name but is a symbolic link, which a profile "
                "never creates: left alone"
            )
            continue
        if not e.is_dir():
            continue
        owner, at, rest = e.name[len(STALE_PREFIX) :].partition("@")
        host = rest.rsplit(".", 1)[0] if at else ""
        if at and owner.isdigit() and host == _host():
            if pid_alive(int(owner)):
                notes.append(f"{e} belongs to running process {owner}: left alone")
                continue
            foreign = _foreign_entries(e)
            if foreign:
                shown = ", ".join(sorted(foreign)[:3]) + (" ..." if len(foreign) > 3 else "")
                notes.append(
                    f"{e} looks like a killed run's directory (process {owner} is gone) but holds "
                    f"entries a profile does not write ({shown}): left alone; remove it yourself "
                    "if it is not needed"
                )
                continue
            try:
                shutil.rmtree(e)
            except OSError as err:
                notes.append(
                    f"stale profile directory {e} (process {owner} is gone) could not be "
                    f"removed: {err.strerror or err}"
                )
            else:
                notes.append(f"removed stale profile directory {e} (process {owner} is gone)")
        else:
            notes.append(
                f"profile directory {e} may be left by a killed run (its owner cannot be "
                "checked from here): remove it if no profile is running"
            )
    return notes


def _run(
    work: Path,
    cfg: dict[str, Any],
    rounds: int,
    progress: Callable[[int, int], None] | None,
    start: float,
    unit: int | None,
    notes: list[str],
) -> dict[str, Any]:
    sizes: list[int] = cfg["write_sizes"]
    guesses: list[int] = cfg["guesses"]
    total = len(sizes) * 2 + len(guesses)
    step = 0

    def tick() -> None:
        nonlocal step
        step += 1
        if progress:
            progress(step, total)

    offset_unit = cfg["offset_unit"]
    fb = cfg["file_bytes"]
    # Page-aligned buffers for O_DIRECT (anonymous maps; freed with their last view).
    buf = mmap.mmap(-1, max(fb, cfg["read_bytes"], cfg["max_guess"]) + mmap.PAGESIZE)
    buffered_writes = 0
    # Experiment 1: write each file with its request size, fsync after every write.
    files = []
    for w in sizes:
        f = work / f"{w // 1024 if w >= 1024 else w}{'kb' if w >= 1024 else 'b'}-seq"
        direct = unit is not None and w % unit == 0
        flags = os.O_RDWR | os.O_CREAT | (os.O_DIRECT if direct else 0)
        buffered_writes += not direct
        fd = os.open(f, flags, 0o600)
        try:
            mv = memoryview(buf)[:w]
            for i in range(fb // w):
                os.pwrite(fd, mv, i * w)
                os.fsync(fd)
        finally:
            os.close(fd)
        files.append(f)
        tick()
    if buffered_writes:
        notes.append(
            f"{buffered_writes} write sizes below the O_DIRECT alignment were buffered writes"
        )
    rflags = os.O_RDONLY | (os.O_DIRECT if unit is not None else 0)
    order: list[int] = cfg["read_order"]
    rb = cfg["read_bytes"]
    # Reads interleave the files (read r of every file, then read r+1), so that a drift of
    # the device or of the host under a virtual disk touches every file alike.
    lat1: list[list[float]] = [[] for _ in files]
    rfds = [os.open(f, rflags) for f in files]
    try:
        if unit is None:
            for fd in rfds:
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        mv = memoryview(buf)[:rb]
        for _ in range(rounds):
            for r in order:
                for k, fd in enumerate(rfds):
                    t0 = time.perf_counter_ns()
                    os.preadv(fd, [mv], r * rb)
                    lat1[k].append(float(time.perf_counter_ns() - t0))
    finally:
        for fd in rfds:
            os.close(fd)
    for _ in files:
        tick()
    # Experiment 2 on the file written with the largest requests.
    fd = os.open(files[-1], rflags)
    loc = []
    rng = random.Random(cfg["seed"])
    try:
        # One untimed pass first, so that no group is the first to touch the file.
        warm = memoryview(buf)[: cfg["read_bytes"]]
        for r in range(fb // cfg["read_bytes"]):
            os.preadv(fd, [warm], r * cfg["read_bytes"])
        for g in guesses:
            chunks: list[int] = cfg["sampled_chunks"][g]
            mv = memoryview(buf)[:g]
            n_groups = g // offset_unit
            groups: list[list[float]] = [[0.0] * len(chunks) for _ in range(n_groups)]
            # Every (group, chunk) read in one random order: no group is read first or last.
            pairs = [(i, s) for i in range(n_groups) for s in range(len(chunks))]
            rng.shuffle(pairs)
            for i, s in pairs:
                if unit is None:
                    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
                t0 = time.perf_counter_ns()
                os.preadv(fd, [mv], chunks[s] * g + i * offset_unit)
                groups[i][s] = float(time.perf_counter_ns() - t0)
            loc.append((g, offset_unit, groups))
            tick()
    finally:
        os.close(fd)
    analyze_cfg = {
        k: cfg[k]
        for k in (
            "file_bytes",
            "min_write",
            "max_write",
            "read_bytes",
            "min_guess",
            "max_guess",
            "samples_per_group",
            "seed",
            "rel_threshold",
            "size_rel_threshold",
            "t_threshold",
        )
    }
    analyze_cfg["offset_unit"] = offset_unit
    learned = _native.device_analyze(sizes, lat1, loc, analyze_cfg)
    return {
        "source": "path",
        "sizes": sizes,
        "size_latencies_ns": lat1,
        "guesses": loc,
        "learned": learned,
        "io_mode": f"O_DIRECT (alignment {unit} B)" if unit else "buffered with FADV_DONTNEED",
        "notes": notes,
        "ios": sum(fb // w for w in sizes)
        + len(lat1) * len(order) * rounds
        + sum(len(x[2]) * len(x[2][0]) for x in loc),
        "seconds": time.monotonic() - start,
    }

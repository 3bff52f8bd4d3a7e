"""Emulated storage devices on one machine, the retriever that reads from them, and calibration.

Three modes (``MODES``):

* ``kernel``: each device is an ext4 file system in a loop-mounted image file (``losetup
  --direct-io=on``, so the image's own pages are not cached twice), and a cgroup-v1 ``blkio``
  group throttles reads of each loop device to the device's bytes/s (and optionally IOPS).
  Reads happen in the kernel at the device's speed; the reading process joins the group only
  while it measures. Needs root, ``/dev/loop-control``, ``losetup``, ``mkfs.ext4`` and the
  ``blkio`` controller.
* ``inprocess``: each device is a plain directory; the retriever's reads of a device share a
  token bucket at the device's bytes/s. Used where the kernel mode is impossible (the reason is
  recorded).
* ``model``: no reads at all; the cost model's prediction only.

The page cache is dropped per file (``posix_fadvise(DONTNEED)``) before a scan reads it, never
machine-wide.

The retriever follows the source (§2.3.3): a table scan's columns are read in parallel, one pool
of ``readers`` threads per device, each reader reading its column file sequentially in 1 MiB
chunks; with ``on_file`` each file's bytes are handed over as soon as it is read, so that the
caller (:mod:`attune.placement.measure`) decodes it while the other files are still read.

Everything :class:`Emulator` sets up (loop devices, mounts, the cgroup, images) is removed on
leaving the ``with`` block, on an exception, on Ctrl-C and on SIGTERM.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import statistics
import subprocess
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Self

from attune.errors import InvalidArgumentError, StorageIOError
from attune.placement.devices import Device

MODES = ("kernel", "inprocess", "model")
CHUNK = 1 << 20
BLKIO = Path("/sys/fs/cgroup/blkio")


def kernel_unavailable() -> str | None:
    """Why the kernel mode cannot run here, or None when it can."""
    if os.name != "posix" or not hasattr(os, "geteuid"):
        return "not a POSIX system"
    if os.geteuid() != 0:
        return "not root (loop devices, mounts and blkio cgroups need root)"
    if not Path("/dev/loop-control").exists():
        return "no /dev/loop-control (no loop devices)"
    if not (BLKIO / "blkio.throttle.read_bps_device").exists():
        return "no cgroup-v1 blkio controller with throttling at /sys/fs/cgroup/blkio"
    for tool in ("losetup", "mkfs.ext4", "mount", "umount"):
        if shutil.which(tool) is None:
            return f"{tool} not found"
    return None


def drop_cache(path: Path) -> None:
    """Evicts one file's pages from the page cache."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


class _Bucket:
    """A token bucket at ``rate`` bytes/s shared by the threads reading one device."""

    def __init__(self, rate: float):
        self.rate = rate
        self.lock = threading.Lock()
        self.next_free = time.perf_counter()

    def take(self, n: int) -> None:
        with self.lock:
            now = time.perf_counter()
            start = max(now, self.next_free)
            self.next_free = start + n / self.rate
            wait = self.next_free - now
        if wait > 0:
            time.sleep(wait)


def _run(cmd: list[str]) -> str:
    try:
        r = subprocess.run(cmd, check=True, capture_output=True, text=True)
    except subprocess.CalledProcessError as e:
        raise StorageIOError(f"{' '.join(cmd)} failed: {e.stderr.strip() or e}") from None
    return r.stdout.strip()


@dataclass
class _Dev:
    device: Device
    rate: float  # emulated bytes/s
    iops: float | None
    path: Path
    image: Path | None = None
    loop: str | None = None
    mounted: bool = False
    bucket: _Bucket | None = None


@dataclass
class Emulator:
    """Emulated devices at ``speed`` times their catalogue throughput (see the module doc).

    ``mode`` is ``kernel``, ``inprocess`` or ``auto`` (kernel when possible). ``image_bytes``
    sizes each device's file system (sparse). ``iops`` optionally caps each device's read IOPS
    (kernel mode; it emulates seeks)."""

    devices: list[Device]
    workdir: Path
    mode: str = "auto"
    speed: float = 0.05
    image_bytes: int = 1 << 30
    iops: dict[str, float] = field(default_factory=dict)
    reason: str | None = None
    _devs: dict[str, _Dev] = field(default_factory=dict)
    _cgroup: Path | None = None
    _old_term: object = None
    _depth: int = 0

    def __post_init__(self) -> None:
        self.workdir = Path(self.workdir)
        if self.mode not in ("auto", "kernel", "inprocess"):
            raise InvalidArgumentError(
                f"emulation mode must be auto, kernel or inprocess, got {self.mode!r}"
            )
        if not 0 < self.speed <= 1000:
            raise InvalidArgumentError(f"speed must be in (0, 1000], got {self.speed}")
        why = kernel_unavailable()
        if self.mode == "kernel" and why:
            raise InvalidArgumentError(f"kernel emulation impossible here: {why}")
        if self.mode == "auto":
            self.mode = "kernel" if why is None else "inprocess"
            self.reason = why

    # -- set-up and clean-up -------------------------------------------------------------------

    def __enter__(self) -> Self:
        if threading.current_thread() is threading.main_thread():
            self._old_term = signal.signal(signal.SIGTERM, _raise_interrupt)
        try:
            self._setup()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _setup(self) -> None:
        self.workdir.mkdir(parents=True, exist_ok=True)
        for d in self.devices:
            rate = d.throughput * self.speed
            path = self.workdir / "mnt" / d.name
            path.mkdir(parents=True, exist_ok=True)
            ed = _Dev(d, rate, self.iops.get(d.name), path)
            self._devs[d.name] = ed
            if self.mode == "inprocess":
                ed.bucket = _Bucket(rate)
                continue
            ed.image = self.workdir / f"{d.name}.img"
            with open(ed.image, "wb") as f:
                f.truncate(self.image_bytes)
            ed.loop = _run(["losetup", "--find", "--show", "--direct-io=on", str(ed.image)])
            _run(["mkfs.ext4", "-q", "-F", "-E", "lazy_itable_init=0,lazy_journal_init=0", ed.loop])
            _run(["mount", "-o", "noatime", ed.loop, str(path)])
            ed.mounted = True
        if self.mode == "kernel":
            self._cgroup = BLKIO / f"attune-place-{os.getpid()}"
            self._cgroup.mkdir(exist_ok=True)
            for ed in self._devs.values():
                rdev = os.stat(ed.loop).st_rdev
                mm = f"{os.major(rdev)}:{os.minor(rdev)}"
                (self._cgroup / "blkio.throttle.read_bps_device").write_text(
                    f"{mm} {int(ed.rate)}\n"
                )
                if ed.iops:
                    (self._cgroup / "blkio.throttle.read_iops_device").write_text(
                        f"{mm} {int(ed.iops)}\n"
                    )

    def close(self) -> None:
        """Removes everything set up; safe to call twice and after a partial set-up."""
        errors = []
        if self._cgroup is not None:
            with contextlib.suppress(OSError):
                self._leave()
            for _ in range(50):
                try:
                    if self._cgroup.exists():
                        self._cgroup.rmdir()
                    break
                except OSError:
                    time.sleep(0.02)
            else:
                errors.append(f"cgroup {self._cgroup} not removed")
            self._cgroup = None
        for ed in self._devs.values():
            if ed.mounted:
                try:
                    _run(["umount", str(ed.path)])
                except StorageIOError:
                    try:
                        _run(["umount", "-l", str(ed.path)])
                    except StorageIOError as e:
                        errors.append(str(e))
                ed.mounted = False
            if ed.loop:
                try:
                    _run(["losetup", "-d", ed.loop])
                except StorageIOError as e:
                    errors.append(str(e))
                ed.loop = None
            if ed.image is not None:
                with contextlib.suppress(FileNotFoundError):
                    ed.image.unlink()
                ed.image = None
        if self._old_term is not None:
            signal.signal(signal.SIGTERM, self._old_term)
            self._old_term = None
        if errors:
            raise StorageIOError("emulated devices not fully removed: " + "; ".join(errors))

    # -- reading -------------------------------------------------------------------------------

    def dirs(self) -> dict[str, Path]:
        return {n: ed.path for n, ed in self._devs.items()}

    def mounted_devices(self) -> list[Device]:
        """The catalogue with each device's mount set to its emulated directory."""
        return [replace(d, mount=str(self._devs[d.name].path)) for d in self.devices]

    def loops(self) -> dict[str, str]:
        return {n: ed.loop for n, ed in self._devs.items() if ed.loop}

    @property
    def cgroup(self) -> Path | None:
        return self._cgroup

    def _join(self) -> None:
        if self._cgroup is not None:
            (self._cgroup / "cgroup.procs").write_text(f"{os.getpid()}\n")

    def _leave(self) -> None:
        if self._cgroup is not None:
            (BLKIO / "cgroup.procs").write_text(f"{os.getpid()}\n")

    @contextlib.contextmanager
    def throttled(self):
        """Within: this process's reads of the loop devices are throttled (kernel mode). Nests;
        joining the cgroup costs milliseconds, so measure inside one outer block."""
        if self._depth == 0:
            self._join()
        self._depth += 1
        try:
            yield
        finally:
            self._depth -= 1
            if self._depth == 0:
                self._leave()

    def device_of(self, path: Path) -> str:
        rp = Path(path).resolve()
        for n, ed in self._devs.items():
            if rp.is_relative_to(ed.path.resolve()):
                return n
        raise InvalidArgumentError(f"{path} is on no emulated device")

    def read_files(self, files: list[Path], *, drop: bool = True, on_file=None) -> dict:
        """Reads ``files`` as one scan: per device a pool of its ``readers`` threads, all
        devices in parallel. Returns wall seconds and bytes per device.

        With ``on_file``, each file's bytes are kept and ``on_file(path, data)`` is called (in
        the reader thread) as soon as that file is read, so the caller can decode it while the
        other files are still being read (the pipelined retriever)."""
        by: dict[str, list[Path]] = {}
        for f in files:
            by.setdefault(self.device_of(f), []).append(Path(f))
        if drop:
            for f in files:
                drop_cache(Path(f))
        got: dict[str, int] = dict.fromkeys(by, 0)
        lock = threading.Lock()

        def read_one(name: str, path: Path) -> None:
            ed = self._devs[name]
            n = 0
            with open(path, "rb", buffering=0) as fh:
                if on_file is not None:
                    data = bytearray(os.fstat(fh.fileno()).st_size)
                    view = memoryview(data)
                    while n < len(data):
                        k = fh.readinto(view[n : n + CHUNK])
                        if not k:
                            break
                        if ed.bucket is not None:
                            ed.bucket.take(k)
                        n += k
                    del view
                else:
                    buf = bytearray(CHUNK)
                    while True:
                        k = fh.readinto(buf)
                        if not k:
                            break
                        if ed.bucket is not None:
                            ed.bucket.take(k)
                        n += k
            with lock:
                got[name] += n
            if on_file is not None:
                on_file(path, data if n == len(data) else data[:n])

        t0 = time.perf_counter()
        with self.throttled():
            pools = {n: ThreadPoolExecutor(max_workers=self._devs[n].device.readers) for n in by}
            try:
                futs = [pools[n].submit(read_one, n, p) for n, ps in by.items() for p in ps]
                for fu in futs:
                    fu.result()
            finally:
                for p in pools.values():
                    p.shutdown(wait=True)
        return {"seconds": time.perf_counter() - t0, "bytes": got}


def _raise_interrupt(signum, frame):
    raise KeyboardInterrupt(f"signal {signum}")


def calibrate(
    emu: Emulator, *, big_bytes: int = 32 << 20, small_files: int = 16, repeats: int = 2
) -> list[Device]:
    """Measures each emulated device as the retriever reads it: the time to read one file cold
    of ``big_bytes`` and of a quarter of that gives the throughput (their difference over the
    size difference, so a fixed per-file cost and any initial burst of the throttle cancel);
    the seek is the mean time to read a 4 KiB file cold. Returns the catalogue with
    ``measured`` throughput (for the device's codec) and ``seek_s`` set; write it with
    :func:`devices_to_toml`."""
    rnd = os.urandom(1 << 20)
    out = []
    with emu.throttled():
        for d in emu.devices:
            base = emu.dirs()[d.name] / "calibration"
            base.mkdir(exist_ok=True)
            sizes = {"big": max(2, big_bytes >> 20), "mid": max(1, big_bytes >> 22)}
            for name, mb in sizes.items():
                with open(base / f"{name}.bin", "wb") as f:
                    f.writelines(rnd for _ in range(mb))
                    f.flush()
                    os.fsync(f.fileno())
            smalls = []
            for i in range(small_files):
                p = base / f"small{i}.bin"
                p.write_bytes(rnd[i * 4096 : (i + 1) * 4096])
                smalls.append(p)
            os.sync()
            rates, seeks = [], []
            for _ in range(repeats):
                tb = emu.read_files([base / "big.bin"])["seconds"]
                tm = emu.read_files([base / "mid.bin"])["seconds"]
                rates.append(((sizes["big"] - sizes["mid"]) << 20) / max(tb - tm, 1e-9))
                per = [emu.read_files([p])["seconds"] for p in smalls]
                seeks.append(max(0.0, statistics.fmean(per) - 4096 / rates[-1]))
            shutil.rmtree(base)
            out.append(
                replace(
                    d,
                    measured={**d.measured, d.codec: statistics.median(rates)},
                    seek_s=statistics.median(seeks),
                )
            )
    return out

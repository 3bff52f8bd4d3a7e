"""Incremental backups of an :class:`attune.DB`, as RocksDB's ``BackupEngine`` keeps them.

A backup directory holds any number of backups of one or more databases::

    BACKUPS/
      LOCK                        one engine at a time mutates the directory (flock)
      shared/<name>.<size>.<crc>  every file of every backup, once: tables and value-log segments
                                  never change once written, so generations share them
      meta/<id>.json              one backup: its files, their sizes and CRC-32s, its sequence
      tmp-<id>/                   a backup being made (removed when it ends or by the next one)

A backup is made from a checkpoint (``DB.checkpoint(..., seal_value_log=True)``: consistent
while the database keeps working; hard links, so the checkpoint itself costs no copy; the
value-log segment being appended to is sealed first, so every segment a backup holds is final and
the next backup shares it). Each file of the checkpoint is
read once to compute its CRC-32; a file already in ``shared/`` under the same name, size and CRC
is not copied again. Copies are written to a temporary name, fsynced and renamed; the backup's
``meta`` file is written last (temporary name, fsync, rename, directory fsync), so a backup cut
short by a crash does not exist, and what it copied is reclaimed by the next :meth:`purge`.

Restoring copies a backup's files into a temporary directory beside the destination, checking
each file's size and CRC as it goes, and renames it into place at the end: a mismatch raises
:class:`attune.CorruptionError` naming the file, and a restore either gives a database that opens
or leaves the destination as it was (a crash leaves only the temporary ``.restoring-*``
directory).

One engine per directory (a lock); its methods may be called from several threads (they run one
at a time). A damaged backup record does not hide the others: :meth:`BackupEngine.list` skips it
and :meth:`BackupEngine.damaged` names it.

Copies are real copies (never links into the live database), so a backup survives the loss or
corruption of the database's own files.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import shutil
import threading
import time
import zlib
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Self

from attune.errors import (
    ClosedError,
    CorruptionError,
    InvalidArgumentError,
    LockedError,
    StorageIOError,
)

#: Bytes read or written per call while copying and checksumming.
CHUNK = 1 << 20
#: Format of ``meta/<id>.json``.
META_VERSION = 1
#: What a file name in a backup record may be: a plain name inside the database directory.
_PLAIN_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._-]{0,254}")


@dataclass(frozen=True)
class BackupFile:
    """One file of a backup: its name in the database directory and its identity in ``shared/``."""

    name: str
    size: int
    crc32: int

    @property
    def shared_name(self) -> str:
        return f"{self.name}.{self.size}.{self.crc32:08x}"


@dataclass(frozen=True)
class BackupInfo:
    """A backup: its id (1, 2, ... in creation order), when it was made (Unix seconds), the
    sequence number of the newest write it holds, its files, and the bytes this backup copied
    that no earlier one had (``bytes_new``; 0 when read back from ``list``)."""

    id: int
    created: float
    sequence: int
    files: tuple[BackupFile, ...]
    bytes_new: int = 0

    @property
    def size(self) -> int:
        return sum(f.size for f in self.files)

    def to_dict(self) -> dict:
        d = asdict(self)
        d["files"] = [asdict(f) for f in self.files]
        d["size"] = self.size
        return d


Progress = Callable[[int], object]


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _crc_of(path: Path, progress: Progress | None = None) -> tuple[int, int]:
    """(size, CRC-32) of a file, read once."""
    crc, size = 0, 0
    with open(path, "rb") as f:
        while chunk := f.read(CHUNK):
            crc = zlib.crc32(chunk, crc)
            size += len(chunk)
            if progress:
                progress(len(chunk))
    return size, crc


def _copy_checked(
    src: Path, dst: Path, want: BackupFile | None, progress: Progress | None = None
) -> tuple[int, int]:
    """Copies ``src`` to ``dst`` through a temporary name with fsync, computing the size and
    CRC-32 of what it copied; with ``want``, a mismatch is a :class:`CorruptionError` (and
    ``dst`` is not created)."""
    tmp = dst.with_name(dst.name + ".tmp")
    crc, size = 0, 0
    try:
        with open(src, "rb") as r, open(tmp, "wb") as w:
            while chunk := r.read(CHUNK):
                crc = zlib.crc32(chunk, crc)
                size += len(chunk)
                w.write(chunk)
                if progress:
                    progress(len(chunk))
            w.flush()
            os.fsync(w.fileno())
        if want is not None and (size, crc) != (want.size, want.crc32):
            raise CorruptionError(
                f"backup file {src} does not match its record: {size} bytes with CRC-32 "
                f"{crc:08x}, recorded {want.size} bytes with {want.crc32:08x}",
                str(src),
                min(size, want.size),
            )
        os.replace(tmp, dst)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return size, crc


class BackupEngine:
    """Incremental backups in ``directory`` (created if missing).

    ``create(db)`` backs up an open database; ``list()``, ``verify(id)``, ``restore(dest, id)``,
    ``delete(id)`` and ``purge(keep)`` manage them. Use it as a context manager or call
    :meth:`close`; while open it holds the directory's lock (another engine on the same
    directory raises :class:`attune.LockedError`).
    """

    def __init__(self, directory: str | os.PathLike[str]):
        if not str(directory):
            raise InvalidArgumentError("backup directory is an empty path; give a directory")
        self.dir = Path(directory)
        self._mutex = threading.RLock()
        self._lock = None
        self._closed = False
        if self.dir.exists():
            if not self.dir.is_dir():
                raise InvalidArgumentError(
                    f"backup directory {self.dir} is a file; give a directory", str(self.dir)
                )
            if (self.dir / "CURRENT").exists() or any(self.dir.glob("MANIFEST-*")):
                raise InvalidArgumentError(
                    f"{self.dir} is a database directory, not a backup directory; give another",
                    str(self.dir),
                )
            self._take_lock()

    def _take_lock(self) -> None:
        """Creates the layout and takes the directory's lock (once)."""
        if self._lock is not None:
            return
        try:
            (self.dir / "shared").mkdir(parents=True, exist_ok=True)
            (self.dir / "meta").mkdir(exist_ok=True)
            lock = open(self.dir / "LOCK", "a+b")  # noqa: SIM115 (held until close)
        except OSError as e:
            raise StorageIOError(
                f"cannot use {self.dir} as a backup directory: {e.strerror}", str(self.dir)
            ) from e
        try:
            fcntl.flock(lock.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            lock.close()
            raise LockedError(
                f"another BackupEngine holds {self.dir}; close it first", str(self.dir)
            ) from None
        self._lock = lock
        for stale in self.dir.glob("tmp-*"):
            shutil.rmtree(stale, ignore_errors=True)

    def close(self) -> None:
        """Releases the directory's lock (idempotent)."""
        with self._mutex:
            self._closed = True
            if self._lock is not None:
                self._lock.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _check_open(self, *, existing: bool = True) -> None:
        """Closed engines refuse everything; reading needs the directory to exist."""
        if self._closed:
            raise ClosedError(f"the BackupEngine on {self.dir} is closed", str(self.dir))
        if existing and self._lock is None:
            raise InvalidArgumentError(
                f"no backup directory at {self.dir}; check the path (create() makes one)",
                str(self.dir),
            )

    # -- reading backups ---------------------------------------------------------------------

    def _meta_path(self, backup_id: int) -> Path:
        return self.dir / "meta" / f"{backup_id}.json"

    def _read_meta(self, path: Path) -> BackupInfo:
        try:
            d = json.loads(path.read_text())
            if not isinstance(d, dict):
                raise TypeError(f"a JSON {type(d).__name__}, not an object")
            if d.get("version") != META_VERSION:
                raise CorruptionError(
                    f"backup record {path} has version {d.get('version')!r}; this build reads "
                    f"{META_VERSION}",
                    str(path),
                    0,
                )
            files = tuple(
                BackupFile(str(f["name"]), int(f["size"]), int(f["crc32"])) for f in d["files"]
            )
            for f in files:
                if not _PLAIN_NAME.fullmatch(f.name) or f.size < 0:
                    raise ValueError(f"file entry {f.name!r} is not a plain file name")
            return BackupInfo(
                int(d["id"]),
                float(d["created"]),
                int(d["sequence"]),
                files,
                int(d.get("bytes_new", 0)),
            )
        except (ValueError, KeyError, TypeError, AttributeError, UnicodeDecodeError) as e:
            raise CorruptionError(
                f"backup record {path} is damaged ({e}); delete it to go on", str(path), 0
            ) from e

    def _scan(self) -> tuple[list[BackupInfo], list[tuple[str, str]]]:
        good, bad = [], []
        for p in (self.dir / "meta").glob("*.json"):
            if not p.stem.isdigit():
                continue
            try:
                good.append(self._read_meta(p))
            except CorruptionError as e:
                bad.append((str(p), str(e)))
        return sorted(good, key=lambda b: b.id), sorted(bad)

    def list(self) -> list[BackupInfo]:
        """Every readable backup, oldest first (a damaged record is skipped: see
        :meth:`damaged`)."""
        with self._mutex:
            self._check_open()
            return self._scan()[0]

    def damaged(self) -> list[tuple[str, str]]:
        """(path, reason) of every backup record that cannot be read."""
        with self._mutex:
            self._check_open()
            return self._scan()[1]

    def _get(self, backup_id: int | None) -> BackupInfo:
        if backup_id is not None and (
            isinstance(backup_id, bool) or not isinstance(backup_id, int)
        ):
            raise InvalidArgumentError(
                f"backup id: an int (or None for the newest), got {type(backup_id).__name__} "
                f"{backup_id!r}"
            )
        backups = self.list()
        if not backups:
            raise InvalidArgumentError(f"{self.dir} holds no backup", str(self.dir))
        if backup_id is None:
            return backups[-1]
        for b in backups:
            if b.id == backup_id:
                return b
        raise InvalidArgumentError(
            f"no backup {backup_id} in {self.dir}; it holds {[b.id for b in backups]}",
            str(self.dir),
        )

    # -- making backups ----------------------------------------------------------------------

    def create(self, db, progress: Progress | None = None) -> BackupInfo:
        """Backs up ``db`` (an open, writable :class:`attune.DB`) as it is now: every write
        acknowledged before the call is in the backup. Returns the new backup."""
        from attune._native import DB

        if not isinstance(db, DB):
            raise InvalidArgumentError(
                f"create() backs up an open attune.DB, got {type(db).__name__}"
            )
        with self._mutex:
            self._check_open(existing=False)
            db_dir = Path(db.path).resolve()
            here = self.dir.resolve()
            if here == db_dir or db_dir in here.parents:
                raise InvalidArgumentError(
                    f"backup directory {self.dir} is inside the database {db.path}; give one "
                    "outside it",
                    str(self.dir),
                )
            self._take_lock()
            return self._create(db, progress)

    def _create(self, db, progress: Progress | None) -> BackupInfo:
        good, bad = self._scan()
        taken = [b.id for b in good] + [int(Path(p).stem) for p, _ in bad]
        backup_id = max(taken, default=0) + 1
        tmp = self.dir / f"tmp-{backup_id}"
        shutil.rmtree(tmp, ignore_errors=True)
        try:
            report = db.checkpoint(tmp, seal_value_log=True)
            files: list[BackupFile] = []
            bytes_new = 0
            for src in sorted(tmp.iterdir()):
                if not src.is_file():
                    continue
                size, crc = _crc_of(src)
                f = BackupFile(src.name, size, crc)
                dst = self.dir / "shared" / f.shared_name
                if not dst.exists():
                    _copy_checked(src, dst, f, progress)
                    bytes_new += size
                elif progress:
                    progress(size)
                files.append(f)
            _fsync_dir(self.dir / "shared")
            info = BackupInfo(
                backup_id, time.time(), int(report["sequence"]), tuple(files), bytes_new
            )
            record = {"version": META_VERSION, **info.to_dict()}
            meta = self._meta_path(backup_id)
            part = meta.with_suffix(".tmp")
            with open(part, "w") as w:
                json.dump(record, w, indent=1)
                w.flush()
                os.fsync(w.fileno())
            os.replace(part, meta)
            _fsync_dir(meta.parent)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        return info

    # -- checking, restoring, deleting ---------------------------------------------------------

    def verify(self, backup_id: int | None = None, progress: Progress | None = None) -> BackupInfo:
        """Reads every file of a backup (the newest by default) and checks its size and CRC-32;
        raises :class:`attune.CorruptionError` naming the first bad or missing file."""
        with self._mutex:
            return self._verify(backup_id, progress)

    def _verify(self, backup_id: int | None, progress: Progress | None) -> BackupInfo:
        b = self._get(backup_id)
        for f in b.files:
            path = self.dir / "shared" / f.shared_name
            if not path.exists():
                raise CorruptionError(f"backup {b.id} is missing {path}", str(path), 0)
            size, crc = _crc_of(path, progress)
            if (size, crc) != (f.size, f.crc32):
                raise CorruptionError(
                    f"backup {b.id}: {path} holds {size} bytes with CRC-32 {crc:08x}, recorded "
                    f"{f.size} bytes with {f.crc32:08x}",
                    str(path),
                    min(size, f.size),
                )
        return b

    def restore(
        self,
        dest: str | os.PathLike[str],
        backup_id: int | None = None,
        progress: Progress | None = None,
    ) -> BackupInfo:
        """Copies a backup (the newest by default) into ``dest``, a new or empty directory, which
        then opens as ``attune.DB(dest)``. Every file is checked as it is copied, into a temporary
        directory beside ``dest`` that is renamed into place at the end: on any error (or a
        crash) ``dest`` is left as it was found."""
        with self._mutex:
            b = self._get(backup_id)
            if not str(dest):
                raise InvalidArgumentError("restore destination is an empty path")
            dest = Path(dest)
            if dest.exists() and (not dest.is_dir() or any(dest.iterdir())):
                raise InvalidArgumentError(
                    f"restore destination {dest} is not an empty directory; give a new path",
                    str(dest),
                )
            dest.parent.mkdir(parents=True, exist_ok=True)
            work = dest.parent / f".{dest.name}.restoring-{os.getpid()}"
            shutil.rmtree(work, ignore_errors=True)
            work.mkdir()
            try:
                for f in b.files:
                    src = self.dir / "shared" / f.shared_name
                    if not src.exists():
                        raise CorruptionError(f"backup {b.id} is missing {src}", str(src), 0)
                    _copy_checked(src, work / f.name, f, progress)
                _fsync_dir(work)
                os.replace(work, dest)  # an empty dest directory is replaced
                _fsync_dir(dest.parent)
            except BaseException:
                shutil.rmtree(work, ignore_errors=True)
                raise
            return b

    def delete(self, backup_id: int) -> None:
        """Deletes one backup's record; files no other backup uses go at the next
        :meth:`purge`."""
        with self._mutex:
            if isinstance(backup_id, bool) or not isinstance(backup_id, int):
                raise InvalidArgumentError(
                    f"backup id: an int, got {type(backup_id).__name__} {backup_id!r}"
                )
            b = self._get(backup_id)
            self._meta_path(b.id).unlink()
            _fsync_dir(self.dir / "meta")

    def purge(self, keep: int | None = None) -> int:
        """Keeps the newest ``keep`` backups (all when None), deletes the others, and removes
        every shared file no kept backup uses (including those of backups cut short). Returns the
        bytes freed."""
        with self._mutex:
            return self._purge(keep)

    def _purge(self, keep: int | None) -> int:
        self._check_open()
        if keep is not None and (isinstance(keep, bool) or not isinstance(keep, int) or keep < 0):
            raise InvalidArgumentError(f"keep: a count of backups >= 0, got {keep!r}")
        backups, damaged = self._scan()
        if keep is not None:
            for b in backups[: max(0, len(backups) - keep)]:
                self._meta_path(b.id).unlink()
            _fsync_dir(self.dir / "meta")
            backups = backups[max(0, len(backups) - keep) :]
        if damaged:
            raise CorruptionError(
                f"{len(damaged)} backup record(s) cannot be read ({damaged[0][0]}); purging could "
                "delete files they need: delete or repair them first",
                damaged[0][0],
                0,
            )
        used = {f.shared_name for b in backups for f in b.files}
        freed = 0
        for p in (self.dir / "shared").iterdir():
            if p.name not in used:
                freed += p.stat().st_size
                p.unlink()
        for p in (self.dir / "meta").glob("*.tmp"):
            p.unlink()
        return freed

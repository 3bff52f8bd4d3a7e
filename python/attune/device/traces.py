"""I/O traces for the rule checker: strace output of any process, and the block traces
``attune.io`` reads (Attune's block traces, MSR-Cambridge, CloudPhysics).

strace: ``strace -f -e trace=openat,open,creat,close,lseek,read,write,pread64,pwrite64,preadv,
pwritev -o OUT CMD`` (``-y``, ``-tt`` and ``-f`` prefixes are understood). File positions are
followed through ``openat``/``lseek``/``read``/``write``; descriptors the trace never opened
(stdin, pipes, sockets) and files under ``/proc``, ``/sys`` and ``/dev`` are left out. The size of
an I/O is its return value (the bytes actually moved); failed calls and ``<unfinished ...>``
halves are counted as skipped.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from attune.errors import CorruptionError, StorageIOError

_PREFIX = r"^(?:\[pid\s+\d+\]\s+|\d+\s+)?(?:\d+(?::\d+)*(?:\.\d+)?\s+)?"
_CALL = re.compile(_PREFIX + r"(\w+)\((.*)\)\s+=\s+(-?\d+|0x[0-9a-f]+)")
_STRING = re.compile(r'"(?:[^"\\]|\\.)*"(?:\.\.\.)?')
_IOV = re.compile(r"\[\{.*\}\]")
_FD = re.compile(r"^\s*(\d+)(?:<([^>]*)>)?")
_SYSCALLS = ("read", "write", "pread64", "pwrite64", "preadv", "pwritev", "preadv2", "pwritev2")
_SKIP_PREFIXES = ("/proc/", "/sys/", "/dev/")


@dataclass
class TraceColumns:
    """An I/O trace as columns: file number (into ``files``), offset, size, write flag."""

    file: list[int] = field(default_factory=list)
    offset: list[int] = field(default_factory=list)
    size: list[int] = field(default_factory=list)
    write: list[bool] = field(default_factory=list)
    files: list[str] = field(default_factory=list)
    format: str = ""
    skipped: int = 0

    def __len__(self) -> int:
        return len(self.file)

    def add(self, file: int, offset: int, size: int, write: bool) -> None:
        self.file.append(file)
        self.offset.append(offset)
        self.size.append(size)
        self.write.append(write)


def looks_like_strace(text: str) -> bool:
    """Whether the first lines look like strace output (a syscall with a result)."""
    for line in text.splitlines()[:50]:
        if _CALL.match(line.strip()):
            return True
    return False


def parse_strace(text: str, name: str = "strace", only: str | None = None) -> TraceColumns:
    """The file I/Os of an strace log; ``only`` keeps files whose path contains it. Raises
    :class:`attune.CorruptionError` (naming the line) when a read/write call cannot be parsed."""

    def keep(path: str) -> bool:
        return not path.startswith(_SKIP_PREFIXES) and (not only or only in path)

    return _parse_calls(text, name, keep).io()


#: A process marks a phase of its run by trying to open ``MARK_PREFIX + name`` (which fails):
#: :func:`parse_strace_calls` turns that into a phase mark.
MARK_PREFIX = "/attune-mark/"

#: Kinds of :class:`CallColumns` rows.
READ, WRITE, SYNC, MARK = 0, 1, 2, 3


@dataclass
class CallColumns:
    """A program's file calls in order, as columns: kind (``READ``, ``WRITE``, ``SYNC``,
    ``MARK``), file number (into ``files``), offset, size; ``marks`` names each ``MARK`` row."""

    kind: list[int] = field(default_factory=list)
    file: list[int] = field(default_factory=list)
    offset: list[int] = field(default_factory=list)
    size: list[int] = field(default_factory=list)
    files: list[str] = field(default_factory=list)
    marks: list[str] = field(default_factory=list)
    skipped: int = 0

    def __len__(self) -> int:
        return len(self.kind)

    def add(self, kind: int, file: int, offset: int, size: int) -> None:
        self.kind.append(kind)
        self.file.append(file)
        self.offset.append(offset)
        self.size.append(size)

    def io(self) -> TraceColumns:
        """The reads and writes alone, for the rule checker."""
        out = TraceColumns(format="strace", files=list(self.files), skipped=self.skipped)
        for k, f, o, n in zip(self.kind, self.file, self.offset, self.size, strict=True):
            if k in (READ, WRITE) and n > 0:
                out.add(f, o, n, k == WRITE)
        return out


def parse_strace_calls(text: str, name: str = "strace", under: str | None = None) -> CallColumns:
    """Reads, writes, ``fsync``/``fdatasync`` and phase marks of an strace log, in order, for
    files whose path starts with ``under`` (every file when None; a given ``under`` may be
    under ``/dev/shm``). Trace with ``-e trace=openat,close,lseek,read,write,pread64,pwrite64,
    fsync,fdatasync``. Raises :class:`attune.CorruptionError` naming the line of a call it
    cannot read."""

    def keep(path: str) -> bool:
        if under is not None:
            return path.startswith(under)
        return not path.startswith(_SKIP_PREFIXES)

    return _parse_calls(text, name, keep)


def _parse_calls(text: str, name: str, keep: Callable[[str], bool]) -> CallColumns:
    """The one strace reader behind :func:`parse_strace` and :func:`parse_strace_calls`: follows
    descriptors and file positions for the files ``keep`` accepts."""
    out = CallColumns()
    fds: dict[int, tuple[int, int]] = {}  # fd -> (file number, position)
    numbers: dict[str, int] = {}

    def file_no(path: str) -> int | None:
        if not keep(path):
            return None
        if path not in numbers:
            numbers[path] = len(out.files)
            out.files.append(path)
        return numbers[path]

    for lineno, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or "<unfinished" in line or "resumed>" in line:
            out.skipped += "<unfinished" in line
            continue
        m = _CALL.match(line)
        if not m:
            continue
        call, args, ret = m.group(1), m.group(2), int(m.group(3), 0)
        if call in ("open", "openat", "creat"):
            s = _STRING.search(args)
            path = s.group(0).rstrip(".")[1:-1] if s else ""
            if path.startswith(MARK_PREFIX):
                out.add(MARK, 0, 0, 0)
                out.marks.append(path[len(MARK_PREFIX) :])
                continue
            if ret >= 0:
                n = file_no(path) if path else None
                if n is None:
                    fds.pop(ret, None)
                else:
                    fds[ret] = (n, 0)
            continue
        fdm = _FD.match(args)
        if not fdm:
            continue
        fd = int(fdm.group(1))
        if fdm.group(2) is not None and fd not in fds and call in _SYSCALLS:
            # strace -y names the file of descriptors opened before tracing started.
            n = file_no(fdm.group(2))
            if n is not None:
                fds[fd] = (n, 0)
        if call == "close":
            fds.pop(fd, None)
            continue
        if fd not in fds:
            continue
        if call == "lseek":
            if ret >= 0:
                fds[fd] = (fds[fd][0], ret)
            continue
        if call in ("fsync", "fdatasync"):
            if ret == 0:
                out.add(SYNC, fds[fd][0], 0, 0)
            continue
        if call not in _SYSCALLS:
            continue
        if ret < 0:
            out.skipped += 1
            continue
        rest = _IOV.sub("", _STRING.sub("", args[fdm.end() :]))
        nums = [p.strip() for p in rest.split(",") if p.strip()]
        n, pos = fds[fd]
        try:
            if call.startswith("p"):
                # (fd, buf, count, offset); (fd, iov, iovcnt, offset[, flags]) for the v2 calls.
                offset = int(nums[-2] if call.endswith("v2") else nums[-1], 0)
            else:
                offset = pos
                fds[fd] = (n, pos + ret)
        except (IndexError, ValueError) as e:
            raise CorruptionError(
                f"malformed strace trace at line {lineno}: cannot read the offset of {call}",
                name,
                lineno,
            ) from e
        out.add(WRITE if call.startswith(("write", "pwrite")) else READ, n, offset, ret)
    return out


def load_io_trace(
    path: str | Path, fmt: str | None = None, only: str | None = None
) -> TraceColumns:
    """Reads ``path`` as strace output (``fmt`` ``"strace"`` or sniffed) or as a block trace of
    ``attune.io`` (``msr``, ``cloudphysics``, ``attune-csv``, ``attune``; one file)."""
    p = Path(path)
    try:
        raw = p.read_bytes()
    except OSError as e:
        raise StorageIOError(f"cannot read trace {p}: {e.strerror or e}", str(p)) from e
    if fmt in (None, "strace") and raw[:2] != b"\x1f\x8b":
        text = raw.decode("utf-8", errors="replace")
        if fmt == "strace" or looks_like_strace(text):
            t = parse_strace(text, p.name, only)
            if fmt == "strace" and not looks_like_strace(text):
                raise CorruptionError(f"{p} does not look like strace output", str(p), 1)
            return t
    from attune.io import load_trace

    bt = load_trace(p, fmt)
    out = TraceColumns(format=fmt or "block", files=[p.name])
    out.file = [0] * len(bt)
    out.offset = [int(x) for x in bt.offset.tolist()]
    out.size = [int(x) for x in bt.size.tolist()]
    out.write = [not bool(x) for x in bt.is_read.tolist()]
    return out

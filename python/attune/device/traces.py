"""I/O traces for the rule checker: strace output of any process, and the block traces
``attune.io`` reads (Attune's block traces, MSR-Cambridge, CloudPhysics).

strace: ``strace -f -y -e trace=openat,open,creat,close,dup,dup2,dup3,fcntl,lseek,read,write,
readv,writev,pread64,pwrite64,preadv,pwritev -o OUT CMD`` (``-y``, ``-tt``, ``-T`` and ``-f``
prefixes are understood). The ``<unfinished ...>`` and ``<... resumed>`` halves ``-f`` writes
when threads interleave are joined by pid. File positions are followed through
``openat``/``dup``/``lseek``/``read``/``write``/``readv``/``writev`` (a ``dup`` shares the
position); an ``O_APPEND`` write lands at the file's size when the trace shows it (``O_TRUNC``,
``O_EXCL``, ``lseek(fd, 0, SEEK_END)``), else it is skipped. Descriptors the trace never opened
are left out, unless ``-y`` names their file: then positioned calls (``pread64``...) are kept and
calls at the unknown file position are skipped. Files under ``/proc``, ``/sys`` and ``/dev`` are
left out. The size of an I/O is its return value (the bytes actually moved). Skipped calls are
counted by reason (``skipped_by``), and lines that are not a complete system call are counted
(``unreadable``); strace's signal and exit notes (``--- SIGCHLD ...``, ``+++ exited ...``), also
after ``-f`` and ``-tt`` prefixes, are neither.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from attune.errors import CorruptionError, InvalidArgumentError

#: Trace formats :func:`load_io_trace` reads.
FORMATS = ("strace", "msr", "cloudphysics", "attune-csv", "attune")

_PREFIX = r"^(?:\[pid\s+\d+\]\s+|\d+\s+)?(?:\d+(?::\d+)*(?:\.\d+)?\s+)?"
_CALL = re.compile(_PREFIX + r"(\w+)\((.*)\)\s+=\s+(-?\d+|0x[0-9a-f]+)")
# Signal deliveries (`--- SIGCHLD {...} ---`) and exits (`+++ exited with 0 +++`), after the same
# pid and time prefixes as calls: strace's own notes, not calls, so never counted as unreadable.
_NOTE = re.compile(_PREFIX + r"(?:---|\+\+\+)\s")
_STRING = re.compile(r'"(?:[^"\\]|\\.)*"(?:\.\.\.)?')
_IOV = re.compile(r"\[\{.*\}\]")
_FD = re.compile(r"^\s*(\d+)(?:<([^>]*)>)?")
_SYSCALLS = (
    "read",
    "write",
    "readv",
    "writev",
    "pread64",
    "pwrite64",
    "preadv",
    "pwritev",
    "preadv2",
    "pwritev2",
)
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
    skipped_by: dict[str, int] = field(default_factory=dict)
    unreadable: int = 0
    vectored: int = 0

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
    #: Skipped calls by reason.
    skipped_by: dict[str, int] = field(default_factory=dict)
    #: Non-empty lines that are not a complete call (junk, a truncated last line).
    unreadable: int = 0
    #: Vectored calls (readv, writev, preadv, pwritev...) among the rows.
    vectored: int = 0

    def __len__(self) -> int:
        return len(self.kind)

    def add(self, kind: int, file: int, offset: int, size: int) -> None:
        self.kind.append(kind)
        self.file.append(file)
        self.offset.append(offset)
        self.size.append(size)

    def io(self) -> TraceColumns:
        """The reads and writes alone, for the rule checker."""
        out = TraceColumns(
            format="strace",
            files=list(self.files),
            skipped=self.skipped,
            skipped_by=dict(self.skipped_by),
            unreadable=self.unreadable,
            vectored=self.vectored,
        )
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


_PID = re.compile(r"^(?:\[pid\s+(\d+)\]\s+|(\d+)\s+)?")
_UNFINISHED = " <unfinished ...>"
_RESUMED = re.compile(_PREFIX + r"<\.\.\. (\w+) resumed>\s?(.*)$")
_DUPS = ("dup", "dup2", "dup3")
_VECTORED = ("readv", "writev", "preadv", "pwritev", "preadv2", "pwritev2")
#: Largest offset or size a trace may carry (the checker's integers are 64-bit).
_MAX = 2**63 - 1


class _Desc:
    """An open file description: shared by descriptors made with ``dup``/``fcntl(F_DUPFD)``."""

    __slots__ = ("append", "file", "pos")

    def __init__(self, file: int, pos: int | None, append: bool = False) -> None:
        self.file = file
        self.pos = pos  # None: unknown (a descriptor the trace never opened)
        self.append = append


def _join_split_calls(text: str) -> list[tuple[int, str]]:
    """The log's lines with ``<unfinished ...>`` / ``<... resumed>`` halves joined by pid (the
    form ``strace -f`` writes when threads interleave); a half without its partner is dropped
    and counted by the caller. Returns (line number, line) pairs."""
    pending: dict[str, tuple[int, str]] = {}
    out: list[tuple[int, str]] = []
    for lineno, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line:
            continue
        pm = _PID.match(line)
        pid = (pm.group(1) or pm.group(2) or "") if pm else ""
        if line.endswith(_UNFINISHED):
            pending[pid] = (lineno, line[: -len(_UNFINISHED)])
            continue
        r = _RESUMED.match(line)
        if r and "resumed>" in line:
            head = pending.pop(pid, None)
            if head is None:
                out.append((lineno, "\0orphan"))
                continue
            out.append((head[0], head[1] + r.group(2)))
            continue
        out.append((lineno, line))
    out.extend((n, "\0orphan") for n, _ in pending.values())
    out.sort(key=lambda x: x[0])
    return out


def _parse_calls(text: str, name: str, keep: Callable[[str], bool]) -> CallColumns:
    """The one strace reader behind :func:`parse_strace` and :func:`parse_strace_calls`: follows
    descriptors (``dup``, ``fcntl(F_DUPFD)`` share a description and its position), file
    positions and, where known, file sizes (for ``O_APPEND``) for the files ``keep`` accepts."""
    out = CallColumns()
    fds: dict[int, _Desc] = {}
    sizes: dict[int, int] = {}  # file number -> size, where the trace shows it
    numbers: dict[str, int] = {}

    def skip(reason: str) -> None:
        out.skipped += 1
        out.skipped_by[reason] = out.skipped_by.get(reason, 0) + 1

    def file_no(path: str) -> int | None:
        if not keep(path):
            return None
        if path not in numbers:
            numbers[path] = len(out.files)
            out.files.append(path)
        return numbers[path]

    def bad(lineno: int, what: str) -> CorruptionError:
        return CorruptionError(f"malformed strace trace at line {lineno}: {what}", name, lineno)

    for lineno, line in _join_split_calls(text):
        if line == "\0orphan":
            skip("unfinished (no matching resumed half)")
            continue
        m = _CALL.match(line)
        if not m:
            if not _NOTE.match(line) and "= ?" not in line:
                out.unreadable += 1
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
                    fds[ret] = _Desc(n, 0, "O_APPEND" in args)
                    if "O_TRUNC" in args or "O_EXCL" in args or call == "creat":
                        sizes[n] = 0
            continue
        fdm = _FD.match(args)
        if not fdm:
            continue
        fd = int(fdm.group(1))
        if call in _DUPS or (call == "fcntl" and "F_DUPFD" in args):
            if ret >= 0:
                if fd in fds:
                    fds[ret] = fds[fd]
                else:
                    fds.pop(ret, None)
            continue
        if fdm.group(2) is not None and fd not in fds and call in _SYSCALLS:
            # strace -y names the file of descriptors the trace never saw opened (before tracing
            # started, or a dup the trace did not record): the position is unknown.
            n = file_no(fdm.group(2))
            if n is not None:
                fds[fd] = _Desc(n, None)
        if call == "close":
            fds.pop(fd, None)
            continue
        if fd not in fds:
            continue
        d = fds[fd]
        if call == "lseek":
            if ret >= 0:
                d.pos = ret
                if args.rstrip().endswith("SEEK_END") and re.search(r",\s*0\s*,", args):
                    sizes[d.file] = ret
            continue
        if call in ("fsync", "fdatasync"):
            if ret == 0:
                out.add(SYNC, d.file, 0, 0)
            continue
        if call not in _SYSCALLS:
            continue
        if ret < 0:
            skip("failed")
            continue
        if ret > _MAX:
            raise bad(lineno, f"{call} returns {ret}, beyond 2^63")
        rest = _IOV.sub("", _STRING.sub("", args[fdm.end() :]))
        nums = [p.strip() for p in rest.split(",") if p.strip()]
        write = call.startswith(("write", "pwrite"))
        if call.startswith("p"):
            # (fd, buf, count, offset); (fd, iov, iovcnt, offset[, flags]) for the v2 calls.
            try:
                offset = int(nums[-2] if call.endswith("v2") else nums[-1], 0)
            except (IndexError, ValueError) as e:
                raise bad(lineno, f"cannot read the offset of {call}") from e
            if offset < 0 or offset > _MAX:
                raise bad(lineno, f"{call} offset {offset} is out of range (0..2^63)")
        elif write and d.append:
            # O_APPEND: the write lands at the end of the file, wherever the position is.
            size = sizes.get(d.file)
            if size is None:
                skip("O_APPEND write to a file of unknown size")
                d.pos = None
                continue
            offset = size
            d.pos = size + ret
        else:
            if d.pos is None:
                skip("descriptor position unknown (opened or duplicated outside the trace)")
                continue
            offset = d.pos
            d.pos += ret
        if write and d.file in sizes:
            sizes[d.file] = max(sizes[d.file], offset + ret)
        if call in _VECTORED:
            out.vectored += 1
        out.add(WRITE if write else READ, d.file, offset, ret)
    return out


def load_io_trace(
    path: str | Path, fmt: str | None = None, only: str | None = None
) -> TraceColumns:
    """Reads ``path`` as strace output (``fmt`` ``"strace"`` or sniffed) or as a block trace of
    ``attune.io`` (``msr``, ``cloudphysics``, ``attune-csv``, ``attune``; one file)."""
    p = Path(path)
    if fmt is not None and fmt not in FORMATS:
        raise InvalidArgumentError(f"unknown trace format {fmt!r}; valid: {', '.join(FORMATS)}")
    from attune.io.trace import parse_trace_file, read_trace_bytes

    raw = read_trace_bytes(p)
    if not raw.strip():
        raise CorruptionError(f"trace {p} is empty", str(p), 0)
    if fmt in (None, "strace"):
        text = raw.decode("utf-8", errors="replace")
        if fmt == "strace" or looks_like_strace(text):
            t = parse_strace(text, p.name, only)
            if fmt == "strace" and not looks_like_strace(text):
                raise CorruptionError(f"{p} does not look like strace output", str(p), 1)
            return t
    try:
        bt = parse_trace_file(raw, fmt, p)
    except CorruptionError as e:
        if fmt is not None:
            raise
        # The format was guessed: say so, and how to name it.
        raise CorruptionError(
            f"{e} (the format was guessed from the content; name it with --format, or fmt= in "
            f"the Python API: {', '.join(FORMATS)})",
            e.path,
            e.offset,
        ) from e
    out = TraceColumns(format=fmt or "block", files=[p.name])
    out.file = [0] * len(bt)
    out.offset = [int(x) for x in bt.offset.tolist()]
    out.size = [int(x) for x in bt.size.tolist()]
    out.write = [not bool(x) for x in bt.is_read.tolist()]
    return out

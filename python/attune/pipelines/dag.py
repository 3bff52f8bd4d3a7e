"""DAGs of Python functions Table -> Table, each node in its own process, edges passing SIPC.

::

    dag = DAG()
    load = dag.node(lambda: pq.read_table("x.parquet"), name="load")
    add = dag.node(lambda t: t.append_column("z", pc.add(t["x"], t["y"])), load, name="add")
    result = dag.run()                 # result.tables["add"] is a pyarrow Table (mapped)

**Processes.** Every node runs in a process other than the driver: by default in workers forked
for the run (they see the driver's functions and module state as they are when the run starts,
so results are those of calling the functions in the driver), else (``processes=``) a worker
of the process's shared :class:`WorkerPool` (started by the first run, kept for later runs, as
Ray keeps its workers; nodes travel pickled with cloudpickle, and a module reloaded or changed
in the driver after the pool started is not seen by its workers) or a child process per node,
started with ``fork`` (the default: the parent's
imports, no pickling) or ``spawn`` (a fresh interpreter: functions must be importable
module-level functions). Up to ``parallel`` nodes whose inputs are ready run at once. A child maps its inputs read-only (SIPC), calls the
function, checks that it returned a table, and only then shares the output (the source's "shared
only after the node returns"): the table file appears in the run's directory, buffers that lie
in mapped inputs or in the node's :class:`~attune.pipelines.arena.Arena` as references, the rest
copied once into per-column files.

**Failure.** A node that raises, returns something other than a table, runs out of memory
(``MemoryError`` under its ``memory_limit_bytes``) or dies (a signal, e.g. the OOM killer's
SIGKILL, or a nonzero exit) fails the run with :class:`NodeFailedError` naming the node and what
happened; the other running nodes are killed and the run's directory is removed, so no shared
file is left behind.

**Results.** The requested outputs (default: the sinks) are mapped by the parent and the run's
directory is removed before :meth:`DAG.run` returns: the tables stay valid (a mapped tmpfs file
lives until its last map is gone) and nothing is left in the file system. Intermediate tables are
removed as soon as their last consumer finished (their files, unless a live table still refers
to them). :meth:`DAG.run_inline` runs the same functions in this process, for comparison.

**Transports** (for measuring against the baselines; results are identical): ``sipc``,
``ipc-file`` (Arrow IPC file written by copy, read by copy) and ``ipc-mmap`` (Arrow IPC file
written by copy, read through a memory map).

Thread-safety: a DAG is built and run from one thread.
"""

from __future__ import annotations

import atexit
import multiprocessing as mp
import os
import pickle
import re
import resource
import shutil
import signal
import sys
import tempfile
import threading
import time
import traceback
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from multiprocessing.connection import wait
from typing import Any

import pyarrow as pa

from attune._process import pid_alive
from attune.errors import Error, InvalidArgumentError
from attune.pipelines import recycle, sipc
from attune.pipelines.arena import Arena
from attune.pipelines.resources import ResourceManager, choose_eviction

__all__ = [
    "DAG",
    "MODES",
    "TRANSPORTS",
    "Node",
    "NodeContext",
    "NodeFailedError",
    "PipelineError",
    "RunResult",
    "UnguardedMainError",
    "WorkerPool",
    "default_root",
    "exit_on_sigterm",
    "proc_io",
    "remove_stale_runs",
    "run_directories",
    "smaps_rollup",
]

TRANSPORTS = ("sipc", "ipc-file", "ipc-mmap")
#: How a run's nodes get processes (``DAG.run(processes=)``): ``run`` workers started for the
#: run and stopped at its end (the default), ``shared`` the workers of this process's shared
#: :class:`WorkerPool`, ``node`` a process per node.
PROCESSES = ("shared", "run", "node")
#: Run directories are ``attune-dag.<driver pid>.<dag name>.<random>`` under the root.
RUN_PREFIX = "attune-dag."
_RUN_NAME = re.compile(r"^attune-dag\.(\d+)\.")


def _safe(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_-]", "_", name)[:40] or "dag"


START_METHODS = ("fork", "spawn")
MODES = ("process", "ray")
MEMORY_POOLS = ("auto", "shm", "shm-bump", "default")
#: Bound on the nodes of one DAG (a limit on every loop and queue).
NODES_MAX = 10_000


class PipelineError(Error):
    """A DAG that cannot be built or run (bad definition, bad options)."""


class NodeFailedError(PipelineError):
    """A node failed: it raised, returned a non-table, ran out of memory or died. ``node`` is its
    name, ``reason`` one of ``exception``, ``not-a-table``, ``out-of-memory``, ``killed``,
    ``exit``, ``timeout``; ``detail`` the child's traceback when there is one."""

    def __init__(self, message: str, node: str, reason: str, detail: str = "") -> None:
        where = _innermost_frame(detail)
        if where and not message.endswith(where):
            message = f"{message} {where}"  # where it raised, as Ray's one-line error shows
        super().__init__(message)
        self.node = node
        self.reason = reason
        self.detail = detail

    def __reduce__(self):  # picklable with its fields
        return (type(self), (str(self), self.node, self.reason, self.detail))

    @property
    def json_extra(self) -> dict[str, str]:
        """The fields the CLI's ``--json`` error object carries besides the message."""
        return {"node": self.node, "reason": self.reason, "detail": self.detail}

    @property
    def cli_detail(self) -> str:
        """What the CLI prints above its one-line error: the node's traceback."""
        return self.detail


class UnguardedMainError(PipelineError):
    """A run under the ``spawn`` start method whose processes could not start: a spawned
    process imports the driver's main module before it runs a node, and that module builds and
    runs a DAG at module level (no ``if __name__ == "__main__":`` guard), so every node process
    would start the whole run again. Not a node's failure: no node ran."""


#: The exit status of a spawned process that found itself asked to run a DAG (or start a
#: :class:`WorkerPool`) while importing the driver's main module (:func:`_refuse_bootstrap_run`);
#: the driver turns it into :class:`UnguardedMainError`. Far from 1 (a Python error) and from
#: what a node's ``sys.exit`` usually passes.
EXIT_UNGUARDED_MAIN = 87


def _unguarded_main_message() -> str:
    main = getattr(sys.modules.get("__main__"), "__file__", None)
    script = f" ({main})" if main else ""
    return (
        "the run's processes could not start: under the spawn start method every node process "
        f"imports the main module{script} first, and that module runs a DAG when imported "
        "(at module level, without a guard), so each process would start the run again. "
        'Put the code that builds and runs the DAG under `if __name__ == "__main__":` '
        "(node functions stay at module level, where spawn imports them), or run with "
        'start_method="fork" (the default), whose processes do not import the main module'
    )


def _refuse_bootstrap_run() -> None:
    """Ends this process with :data:`EXIT_UNGUARDED_MAIN` when it is a process being spawned
    that is still importing the parent's main module (multiprocessing's own test for the same
    mistake, ``_check_not_importing_main``, reads the same flag): a DAG run or worker pool
    started there is the parent's module-level code running again, which would start processes
    recursively. The parent, waiting for this process, explains; this process says it on
    stderr too, for a parent that is not a DAG driver."""
    if not getattr(mp.process.current_process(), "_inheriting", False):
        return
    sys.stderr.write(f"attune.pipelines: {_unguarded_main_message()}\n")
    sys.stderr.flush()
    raise SystemExit(EXIT_UNGUARDED_MAIN)


_FRAME = re.compile(r'^\s*File "([^"]+)", line (\d+), in (\S+)', re.MULTILINE)


def _innermost_frame(traceback_text: str) -> str:
    """``(at file.py:12, in fn)`` for the last frame of a formatted traceback, else ``""``."""
    frames = _FRAME.findall(traceback_text or "")
    if not frames:
        return ""
    path, line, fn = frames[-1]
    return f"(at {os.path.basename(path)}:{line}, in {fn})"


def _raised(e: BaseException) -> str:
    """``raised ValueError: message`` (no dangling colon when the message is empty)."""
    text = str(e)
    return f"raised {type(e).__name__}: {text}" if text else f"raised {type(e).__name__}"


def default_root() -> str:
    """Where runs put their shared files: ``$ATTUNE_PIPE_ROOT``, else /dev/shm (tmpfs), else
    the temporary directory."""
    env = os.environ.get("ATTUNE_PIPE_ROOT")
    if env:
        return env
    return "/dev/shm" if os.path.isdir("/dev/shm") else tempfile.gettempdir()


def root_pages(root: str | None = None, mounts: str = "/proc/self/mounts") -> dict[str, str]:
    """The file system under ``root`` (default: :func:`default_root`) and the pages its files
    get: ``{"path", "mount", "fstype", "huge"}``, ``huge`` being tmpfs's ``huge=`` mount option
    (``never`` when absent, tmpfs's default), or ``"n/a"`` off tmpfs. On a tmpfs without huge
    pages every 4 KiB of a node's output or a decode is a page fault on fresh memory, where
    Ray's workers write into their heap's transparent huge pages: ``huge=within_size`` (for
    example ``mount -o remount,huge=within_size /dev/shm`` as root) removes most of that cost
    (docs/kelvin.md, "Huge pages for the shared files")."""
    path = os.path.realpath(root or default_root())
    best = ("/", "", "")
    try:
        with open(mounts) as f:
            for line in f:
                fields = line.split()
                if len(fields) < 4:
                    continue
                mnt = fields[1].replace("\\040", " ")
                inside = path == mnt or path.startswith(mnt.rstrip("/") + "/")
                if inside and len(mnt) >= len(best[0]):
                    best = (mnt, fields[2], fields[3])
    except OSError:
        pass
    mount, fstype, options = best
    huge = "n/a"
    if fstype == "tmpfs":
        huge = "never"
        for opt in options.split(","):
            if opt.startswith("huge="):
                huge = opt[len("huge=") :]
    return {"path": path, "mount": mount, "fstype": fstype or "unknown", "huge": huge}


def smaps_rollup(pid: int | str = "self") -> dict[str, int]:
    """``/proc/PID/smaps_rollup`` in bytes: Rss, Pss, Pss_Anon, Pss_File, Pss_Shmem, ..."""
    out: dict[str, int] = {}
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            for line in f:
                parts = line.split()
                if len(parts) == 3 and parts[2] == "kB":
                    out[parts[0].rstrip(":")] = int(parts[1]) * 1024
    except OSError:
        pass
    return out


def proc_io(pid: int | str = "self") -> dict[str, int]:
    """``/proc/PID/io``: rchar/wchar count every byte moved by read/write system calls (copies
    into and out of the page cache, tmpfs included); mapped accesses do not count."""
    out: dict[str, int] = {}
    try:
        with open(f"/proc/{pid}/io") as f:
            for line in f:
                k, _, v = line.partition(":")
                out[k] = int(v)
    except OSError:
        pass
    return out


@dataclass
class NodeContext:
    """What a node function may ask for when it takes a ``ctx`` keyword argument: an
    :class:`Arena` whose buffers become the output's data files without a copy."""

    name: str
    directory: str
    _arena: Arena | None = None

    @property
    def arena(self) -> Arena:
        if self._arena is None:
            self._arena = Arena(self.directory, prefix=f"{self.name}.arena")
        return self._arena


@dataclass
class Node:
    """One function of a DAG. Built by :meth:`DAG.node`."""

    name: str
    fn: Callable[..., Any]
    inputs: tuple[Node, ...]
    memory_limit_bytes: int | None = None
    wants_ctx: bool = False
    memory_bytes: int | None = None
    timeout_s: float | None = None

    def __repr__(self) -> str:
        return f"Node({self.name!r}, inputs={[i.name for i in self.inputs]})"


@dataclass
class RunResult:
    """The outputs of a run (name -> Table), per-node measurements and the run's totals."""

    tables: dict[str, pa.Table]
    nodes: dict[str, dict[str, Any]] = field(default_factory=dict)
    seconds: float = 0.0
    transport: str = "sipc"
    start_method: str = "fork"
    memory_pool: str = "default"
    shared_bytes_peak: int = 0
    #: When the run started, on the clock of the nodes' ``started_at`` (time.monotonic()).
    started_at: float = 0.0
    mode: str = "process"
    reuse_processes: bool = False
    #: ``shared``, ``run``, ``node`` (see :data:`PROCESSES`), or ``pool`` (a caller's pool).
    processes: str = "node"
    #: Resource manager decisions: ("start", node, bytes in use, need), ("done", node),
    #: ("evict", node, "rollback" | "limit-drop", bytes given back).
    events: list[tuple[Any, ...]] = field(default_factory=list)

    def __getitem__(self, name: str) -> pa.Table:
        return self.tables[name]

    def __contains__(self, name: object) -> bool:
        return name in self.tables

    def __iter__(self):
        return iter(self.tables)

    def __len__(self) -> int:
        return len(self.tables)

    def keys(self):
        """The output names (as ``result.tables.keys()``)."""
        return self.tables.keys()

    def items(self):
        return self.tables.items()

    def totals(self) -> dict[str, Any]:
        keys = ("bytes_copied", "bytes_reshared", "write_bytes_copied", "read_bytes_copied")
        out: dict[str, Any] = {k: sum(n.get(k, 0) for n in self.nodes.values()) for k in keys}
        out["seconds"] = self.seconds
        out["shared_bytes_peak"] = self.shared_bytes_peak
        out["node_pss_bytes_max"] = max(
            (n.get("pss_bytes", 0) for n in self.nodes.values()), default=0
        )
        # Memory of the run at its fullest: the shared files after a node finished plus the
        # anonymous memory that node added (its output, before its exit freed it).
        out["memory_peak_bytes"] = max(
            (
                n.get("shared_bytes_after", 0) + n.get("anon_growth_bytes", 0)
                for n in self.nodes.values()
            ),
            default=0,
        )
        out["output_file_bytes"] = sum(n.get("output_file_bytes", 0) for n in self.nodes.values())
        return out

    def to_json(self) -> dict[str, Any]:
        return {
            "mode": self.mode,
            "transport": self.transport,
            "start_method": self.start_method,
            "reuse_processes": self.reuse_processes,
            "processes": self.processes,
            "memory_pool": self.memory_pool,
            "outputs": {
                k: {"rows": t.num_rows, "columns": t.num_columns} for k, t in self.tables.items()
            },
            "nodes": self.nodes,
            "totals": self.totals(),
        }


# --------------------------------------------------------------------------------------------
# Transports: how a child reads its inputs and writes its output.


#: A reused worker's output with at most this many bytes in its pool's segments is copied out
#: of them (into the output's own files), so the worker keeps the whole segments warm for its
#: next node instead of faulting fresh pages for it (an aggregate's few KB against 64 MiB).
SMALL_OUTPUT_BYTES = 4 << 20


def _buffers(arr: pa.Array) -> list[pa.Buffer]:
    out = [b for b in arr.buffers() if b is not None]
    if pa.types.is_dictionary(arr.type):
        out += _buffers(arr.dictionary)
    return out


def _small_pool_output(table: pa.Table) -> list[tuple[int, int]] | None:
    """The pool's segments as [(address, length)] when ``table`` has at most
    :data:`SMALL_OUTPUT_BYTES` in them (and something), else None."""
    from attune.pipelines import shmpool

    segs = [(a, n) for a, n, _p in shmpool.segments()]
    if not segs:
        return None
    inside = 0
    for col in table.columns:
        for chunk in col.chunks:
            for b in _buffers(chunk):
                if any(a <= b.address < a + n for a, n in segs):
                    inside += b.size
                    if inside > SMALL_OUTPUT_BYTES:
                        return None
    return segs if inside else None


def _write_output(
    transport: str,
    table: pa.Table,
    directory: str,
    name: str,
    checksums: bool,
    copy_from: list[tuple[int, int]] | None = None,
) -> tuple[str, dict[str, int]]:
    """Shares a node's output; returns its path and what it cost: bytes copied and reshared
    (by the writer's own count) and ``output_file_bytes``, the tmpfs bytes of the files this
    node created (its arena's files included)."""
    if transport == "sipc":
        st = sipc.write_table(table, directory, name, checksums=checksums, copy_from=copy_from)
        own = [
            f
            for f in st.files
            if os.path.dirname(f) == directory and os.path.basename(f).startswith(name + ".")
        ]
        return st.path, {
            "bytes_copied": st.bytes_copied,
            "bytes_reshared": st.bytes_reshared,
            "_own_files": [st.path, *own],
            "_ranges": st.ranges,
        }
    path = os.path.join(directory, name + ".arrow")
    with pa.OSFile(path, "wb") as sink, pa.ipc.new_file(sink, table.schema) as w:
        w.write_table(table)
    return path, {
        "bytes_copied": os.path.getsize(path),
        "bytes_reshared": 0,
        "output_file_bytes": sipc.file_bytes(path),
    }


def _output_path(transport: str, directory: str, name: str) -> str:
    """Where :func:`_write_output` puts the output ``name`` (known before the node runs)."""
    if transport == "sipc":
        return os.path.join(os.path.abspath(directory), name) + sipc.TABLE_SUFFIX
    return os.path.join(directory, name + ".arrow")


def _read_input(transport: str, path: str) -> pa.Table:
    if transport == "sipc":
        return sipc.read_table(path)
    if transport == "ipc-file":
        with pa.OSFile(path, "rb") as src:
            return pa.ipc.open_file(src).read_all()
    return pa.ipc.open_file(pa.memory_map(path, "r")).read_all()


def _table_data_files(transport: str, path: str) -> list[str]:
    if transport == "sipc":
        try:
            return sipc.table_files(path)
        except Error:
            return []
    return []


# --------------------------------------------------------------------------------------------
# The child.


def _set_memory_limit(limit: int) -> None:
    """Caps this process's address space at its current size plus ``limit`` bytes, so that an
    allocation beyond the node's budget fails with MemoryError (deterministic, no cgroup)."""
    with open("/proc/self/status") as f:
        vm = next((int(line.split()[1]) * 1024 for line in f if line.startswith("VmSize:")), 0)
    cap = vm + limit
    resource.setrlimit(resource.RLIMIT_AS, (cap, cap))


#: The driver's ends of the pipes to its node processes that are still open. A forked child
#: inherits a copy of every one of them; it closes them all (:func:`_close_inherited_ends`), or
#: a node process would keep its siblings' pipes open and an idle sibling would not see the
#: driver's death until this one exited.
_DRIVER_ENDS: set[Any] = set()
#: Held from a pipe's creation to its child's start, so that no process is forked in between
#: from another thread with the new driver end not yet registered.
_START_LOCK = threading.Lock()


#: Whether this process has built pyarrow's lazily made state (see :func:`_warm_pyarrow`).
pyarrow_warmed = False


def _warm_pyarrow() -> None:
    """Builds, once in the driver, what pyarrow makes on first use and a forked node process
    would otherwise make again in every worker of every run: Acero's group-by machinery (about
    40 ms of CPU on a table's first ``group_by``, 0.5 ms after; 2.4 ms in a child forked after
    the parent made it), and a dictionary cast's kernels (5 ms). Never fails a run."""
    global pyarrow_warmed
    if pyarrow_warmed:
        return
    pyarrow_warmed = True
    try:
        import pyarrow.compute as pc

        t = pa.table({"k": pa.array(["a", "b", "a"]).dictionary_encode(), "v": [1.0, 2.0, 3.0]})
        t = t.set_column(0, "k", pc.cast(t["k"], pa.string()))
        t.group_by("k", use_threads=False).aggregate([("v", "mean"), ("v", "count")])
    except Exception:  # noqa: BLE001, S110 - a warm-up only; the node makes it itself then
        pass


def _start_node_process(ctx, target, args: tuple, name: str, driver_end, child_end):
    """Starts ``target(*args)`` in a new daemon process whose pipe to the driver is
    ``driver_end`` (kept here) and ``child_end`` (closed here once the child has it). A forked
    process inherits what :func:`_warm_pyarrow` made."""
    if ctx.get_start_method() == "fork":
        _warm_pyarrow()
    with _START_LOCK:
        for c in [c for c in _DRIVER_ENDS if c.closed]:
            _DRIVER_ENDS.discard(c)
        _DRIVER_ENDS.add(driver_end)
        p = ctx.Process(target=target, args=args, name=name, daemon=True)
        try:
            p.start()
        except BaseException:
            _DRIVER_ENDS.discard(driver_end)
            raise
        finally:
            child_end.close()
    return p


def _become_node_process(driver: int, directories: list[str | None]) -> None:
    """What a process started to run nodes does first: ignores Ctrl-C (SIGINT reaches the
    terminal's whole process group, and it is the driver's to handle — its run stops and kills
    the node processes it started — rather than a KeyboardInterrupt traceback from wherever a
    node process was waiting), closes the driver's pipe ends it inherited
    (:func:`_close_inherited_ends`) and starts the driver watchdog (:func:`_watch_driver`).
    Nothing when called elsewhere than as a multiprocessing child's main function (a test
    drives a worker on a thread): all three act on the whole process."""
    if mp.parent_process() is None or threading.current_thread() is not threading.main_thread():
        return
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _close_inherited_ends()
    _watch_driver(driver, directories)


def _close_inherited_ends() -> None:
    """In a node process: closes the driver's pipe ends it inherited with the fork (its own
    and its siblings'; none under spawn or forkserver, which inherit no descriptors), so that
    the driver's death closes every node process's pipe."""
    for c in list(_DRIVER_ENDS):
        c.close()
    _DRIVER_ENDS.clear()


def _watch_driver(driver: int, directories: list[str | None]) -> None:
    """In a node process: a thread that waits for the driver's exit and then removes what the
    driver left (:func:`_orphaned`, with the directories in ``directories`` at that time) and
    ends this process, whatever its node is doing. An idle worker notices the closed pipe
    itself; this covers a node still running (or stuck) when its driver is killed, which would
    otherwise run to its end, or forever, for no one. Waits on a pidfd (Linux 5.3), else
    polls the parent process id once a second."""

    def wait_for_exit() -> None:
        try:
            fd = os.pidfd_open(driver)
        except (AttributeError, OSError):
            fd = None
        if fd is not None:
            import select

            select.select([fd], [], [])  # readable once the process has exited
        while os.getppid() == driver and pid_alive(driver):
            time.sleep(1.0)  # no pidfd, or a spurious wake-up
        _exit_orphaned(driver, directories)

    threading.Thread(target=wait_for_exit, name="attune-dag:driver-watch", daemon=True).start()


#: The clean-up of :func:`_exit_orphaned`: waits for the node process (argv[1]) to be gone,
#: then removes the directories (argv[3:]) whose names start with argv[2].
_CLEANER = """
import os, shutil, sys, time
def gone(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] in ("Z", "X")
    except OSError:
        return True
while not gone(int(sys.argv[1])):
    time.sleep(0.02)
for d in sys.argv[3:]:
    if os.path.basename(d).startswith(sys.argv[2]):
        shutil.rmtree(d, ignore_errors=True)
"""


def _exit_orphaned(driver: int, directories: list[str | None]) -> None:
    """Ends this node process, whose driver is dead, and has what the driver left removed once
    it is gone. Not removed from here: the node's own thread may be writing into the run's
    directory at this moment, and would recreate what a removal took before this process
    ends. A small interpreter started here (which inherits this process's descriptors, so a
    parent that waits for them to close waits for the removal too) removes it after the exit."""
    dirs = [d for d in directories if d]
    if dirs:
        import subprocess

        try:
            subprocess.Popen(
                [sys.executable, "-c", _CLEANER, str(os.getpid()), f"{RUN_PREFIX}{driver}.", *dirs],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                close_fds=False,
                start_new_session=True,
            )
        except OSError:
            _orphaned(driver, *dirs)  # no interpreter to start: remove what can be now
    os._exit(1)


def _orphaned(driver: int, *directories: str | None) -> None:
    """Called by a node process whose driver stopped answering: when the driver (the parent
    that started this process) is dead, removes the run directory (and a pool's directory) it
    left, so a killed driver leaves no shared files behind as long as one of its node processes
    outlives it. A directory is removed only if its name says it belongs to that driver."""
    if os.getppid() == driver and pid_alive(driver):
        return  # still there: it only closed the pipe (it is failing the run and cleans up)
    for d in directories:
        if d and os.path.basename(d).startswith(f"{RUN_PREFIX}{driver}."):
            shutil.rmtree(d, ignore_errors=True)


def _child_main(
    node: Node,
    input_paths: list[str],
    directory: str,
    transport: str,
    checksums: bool,
    conn,
    memory_pool: str = "default",
    measure_memory: bool = True,
    out_name: str | None = None,
    recycle_dir: str | None = None,
) -> None:
    """A node's own process: one node, then exit."""
    _become_node_process(os.getppid(), [directory])
    try:
        if node.memory_limit_bytes is not None:
            try:
                _set_memory_limit(node.memory_limit_bytes)
            except BaseException as e:  # noqa: BLE001 - reported to the parent
                conn.send(("error", "exception", f"cannot set its memory limit: {e}", ""))
                return
        driver = os.getppid()
        msg = _node_body(
            node,
            input_paths,
            directory,
            transport,
            checksums,
            memory_pool,
            measure_memory,
            out_name=out_name,
            recycle_dir=recycle_dir,
        )
        try:
            conn.send(msg)
        except OSError:
            pass
        if os.getppid() != driver:  # the driver died while this node ran
            _orphaned(driver, directory)
    finally:
        conn.close()


def _ship(n: Node) -> bytes:
    """``n`` pickled for a :class:`WorkerPool` worker (without its inputs), with cloudpickle
    when it is installed (a dependency): functions of importable modules travel by reference,
    functions of ``__main__``, lambdas and closures by value, so a function defined after the
    pool's workers were forked still reaches them. Without cloudpickle, plain pickle (functions
    by reference only)."""
    light = Node(n.name, n.fn, (), n.memory_limit_bytes, n.wants_ctx, n.memory_bytes, n.timeout_s)
    try:
        import cloudpickle
    except ImportError:
        cloudpickle = None
    if cloudpickle is not None:
        try:
            return cloudpickle.dumps(light, protocol=pickle.HIGHEST_PROTOCOL)
        except Exception as e:  # noqa: BLE001 - PicklingError, TypeError...
            raise PipelineError(
                f"node {n.name}: its function cannot be shipped to a pool worker: "
                f"{type(e).__name__}: {e}"
            ) from None
    try:
        return pickle.dumps(light, protocol=pickle.HIGHEST_PROTOCOL)
    except Exception as e:  # noqa: BLE001 - PicklingError, AttributeError, TypeError...
        raise PipelineError(
            f"node {n.name}: its function cannot be pickled by reference ({e}); a worker "
            "pool needs module-level functions, or cloudpickle (pip install cloudpickle) for "
            "lambdas and closures"
        ) from None


#: What the driver sends a pool worker whose run ended: drop every table it kept mapped.
FORGET = "forget"

#: Tables a reused worker let go of after its node: unmapped (dropped) after the node's report,
#: off the critical path (see :func:`_hold`).
_UNMAP_LATER: list[pa.Table] = []


def _hold(
    held: dict[str, pa.Table], paths: list[str], tables: list[pa.Table], hold: list[bool]
) -> None:
    """Keeps the node's inputs flagged in ``hold`` mapped in ``held`` (path -> table) for the
    worker's next nodes (the driver flags an input that a node not yet finished still reads);
    every other table of ``held`` and of ``tables`` goes to :data:`_UNMAP_LATER`. A worker
    thus keeps at most the inputs of its last node mapped, and only while another node needs
    them."""
    keep = {p: t for p, t, h in zip(paths, tables, hold) if h}
    _UNMAP_LATER.extend(t for p, t in held.items() if p not in keep)
    _UNMAP_LATER.extend(t for p, t, h in zip(paths, tables, hold) if not h)
    held.clear()
    held.update(keep)


def _unmap_held(held: dict[str, pa.Table] | None = None) -> None:
    """Drops the tables :func:`_hold` let go of (and, given ``held``, every held one): their
    maps are unmapped once nothing else refers to them."""
    if held:
        _UNMAP_LATER.extend(held.values())
        held.clear()
    _UNMAP_LATER.clear()


def _tidy() -> None:
    """A reused worker's clean-up after reporting a node: unmaps the tables it let go of and
    returns the pages a deferred :func:`attune.pipelines.shmpool.release` left."""
    _unmap_held()
    if "attune.pipelines.shmpool" in sys.modules:
        from attune.pipelines import shmpool

        shmpool.finish_release()


def _worker_main(nodes: list[Node], conn, spare_dir: str | None = None) -> None:
    """A reused node process: runs node after node until told to stop. A worker of one run
    (``reuse_processes=True``) got the run's nodes with the fork (or, under spawn, once as
    arguments), and a job names its node by index; a :class:`WorkerPool` worker outlives runs,
    and a job carries its node pickled (:func:`_ship`). A job carries the run's directory and
    transport. After each node every reference to its tables is dropped and, with the shared
    pool, the node's segments are unmapped (:func:`attune.pipelines.shmpool.release`), so a
    worker holds nothing of a finished node. ``spare_dir``: where a pool worker's spare
    segments wait between nodes (they outlive the run's directory). The driver's death closes the
    pipe (an idle worker then removes what the driver left, see :func:`_orphaned`) and wakes the
    watchdog (a busy one, see :func:`_watch_driver`)."""
    kept_memory = False
    driver = os.getppid()
    directory = None
    watched: list[str | None] = [None, spare_dir]  # what the watchdog removes (the run's dir)
    _become_node_process(driver, watched)
    held: dict[str, pa.Table] = {}  # input tables kept mapped for the next node (_hold)
    postponed = False  # the last node's clean-up waits for the end of the next one
    try:
        while True:
            try:
                job = conn.recv()
            except (EOFError, OSError):
                # The driver closed the pipe without a goodbye: it died (SIGKILL, the OOM
                # killer). Whoever survives removes what it left.
                _unmap_held(held)
                _orphaned(driver, directory, spare_dir)
                return
            if job is None:
                _unmap_held(held)
                _tidy()
                return
            if job == FORGET:
                # The run ended (a pool worker goes back idle): nothing of it stays mapped.
                _unmap_held(held)
                _tidy()
                postponed = False
                continue
            (ref, input_paths, memory_pool, measure_memory, out_name, defer) = job[:6]
            directory, transport, checksums, hold, recycle_dir = job[6:11]
            watched[0] = directory
            if kept_memory:
                # A node before this one kept pool memory alive: this worker runs nothing more
                # (the driver, told so by that node's report, runs the job elsewhere).
                continue
            if isinstance(ref, int):
                node = nodes[ref]
            else:
                try:
                    node = pickle.loads(ref)
                except BaseException as e:  # noqa: BLE001 - reported to the parent
                    conn.send(
                        (
                            "error",
                            "exception",
                            f"cannot be loaded in its worker: {type(e).__name__}: {e}",
                            traceback.format_exc(),
                        )
                    )
                    continue
            msg = _node_body(
                node,
                input_paths,
                directory,
                transport,
                checksums,
                memory_pool,
                measure_memory,
                reuse=True,
                out_name=out_name,
                defer_release=defer,
                spare_dir=spare_dir,
                held=held if defer and transport == "sipc" else None,
                hold=hold,
                recycle_dir=recycle_dir,
            )
            try:
                conn.send(msg)
            except OSError:  # the driver is gone
                _unmap_held(held)
                _orphaned(driver, directory, spare_dir)
                return
            kept_memory = msg[0] == "ok" and msg[2].get("pool_bytes_retained", 0) > 0
            if defer and not postponed and conn.poll():
                # The next node is already here (sent ahead): it starts first, and this node's
                # clean-up waits until after it (never more than one node's).
                postponed = True
                continue
            postponed = False
            _tidy()
    finally:
        conn.close()


def _node_body(
    node: Node,
    input_paths: list[str],
    directory: str,
    transport: str,
    checksums: bool,
    memory_pool: str,
    measure_memory: bool = True,
    reuse: bool = False,
    out_name: str | None = None,
    defer_release: bool = False,
    spare_dir: str | None = None,
    held: dict[str, pa.Table] | None = None,
    hold: list[bool] | None = None,
    recycle_dir: str | None = None,
) -> tuple:
    """Read, call, check, share, measure: returns the one message for the parent. Without
    ``measure_memory`` the node skips ``/proc/self/smaps_rollup`` (a walk of every mapped page,
    milliseconds per read once a node maps its tables) and reports no Pss fields. With
    ``defer_release`` (a reused worker, memory not measured, no budget) the pool's pages the
    output does not use are returned after the node is reported (the caller calls
    :func:`attune.pipelines.shmpool.finish_release`), and ``output_file_bytes`` is what the
    output's files hold once that is done.

    ``held`` (a reused worker, with ``defer_release``): input tables the worker kept mapped
    from its earlier nodes, path -> table; an input found there is not mapped again. After the
    node, its inputs flagged in ``hold`` (another node still reads them) are kept there and
    every other table is queued for :func:`_unmap_held` (see :func:`_hold`).

    ``recycle_dir``: the driver's directory of dropped tables' files; the node's new pool
    segments are taken from there when one fits and no process maps it
    (:mod:`attune.pipelines.recycle`); ``recycled_segments`` / ``recycled_bytes`` in the stats."""
    rollup = smaps_rollup if measure_memory else dict
    io0 = proc_io()
    anon0 = rollup().get("Pss_Anon", 0)
    t0 = time.perf_counter()
    at0 = time.monotonic()  # CLOCK_MONOTONIC: comparable between the run's processes
    try:
        shm = memory_pool in ("shm", "shm-bump")
        if shm:
            from attune.pipelines import shmpool

            shmpool.install(
                directory,
                f"{out_name or node.name}.pool",
                reuse_freed=memory_pool != "shm-bump",
                spare_dir=spare_dir,
                recycle_dir=recycle_dir,
            )
            recycled0 = shmpool.recycled()
        elif reuse:
            from attune.pipelines import shmpool

            shmpool.uninstall()  # a pool worker whose earlier run used the shared pool
        if held is not None:
            inputs = [held[p] if p in held else _read_input(transport, p) for p in input_paths]
            held_inputs = sum(p in held for p in input_paths)
        else:
            inputs = [_read_input(transport, p) for p in input_paths]
            held_inputs = 0
        io1 = proc_io()
        t1 = time.perf_counter()
        ctx = NodeContext(node.name, directory)
        c1 = time.process_time()
        f1 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        at1 = time.monotonic()
        out = node.fn(*inputs, ctx=ctx) if node.wants_ctx else node.fn(*inputs)
        at2 = time.monotonic()
        f2 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        c2 = time.process_time()
        t2 = time.perf_counter()
        if isinstance(out, pa.RecordBatch):
            out = pa.Table.from_batches([out])
        if not isinstance(out, pa.Table):
            return (
                "error",
                "not-a-table",
                f"returned {type(out).__module__}.{type(out).__qualname__}, not a pyarrow.Table",
                "",
            )
        if shm:
            shmpool.freeze()  # from here on the output's pages are shared: never punched
            recycled1 = shmpool.recycled()
            wstats_recycled = {
                "recycled_segments": recycled1[0] - recycled0[0],
                "recycled_bytes": recycled1[1] - recycled0[1],
            }
        else:
            wstats_recycled = {}
        rollup_before = rollup()
        io2 = proc_io()
        # A node run again after a rollback writes under a new name: files of its first output
        # may still be referred to by live tables.
        # In a reused worker with the pool's reuse on, a small output leaves the pool's segments
        # entirely (copied), so they stay whole and warm for the next node.
        small = _small_pool_output(out) if reuse and memory_pool == "shm" else None
        path, wstats = _write_output(
            transport, out, directory, out_name or node.name, checksums, small
        )
        t_shared = time.perf_counter()
        c_shared = time.process_time()
        ranges = wstats.pop("_ranges", {})
        stats: dict[str, Any] = {
            "rows": out.num_rows,
            "columns": out.num_columns,
            "output_bytes": out.nbytes,
        }
        if reuse:
            # Nothing of this node may outlive it in the worker: its tables, its context's
            # arena, then (with the pool) its segments.
            del out, ctx
            if held is not None:
                # Inputs another node still needs stay mapped for this worker's next node;
                # the rest are unmapped after the report (unmapping a large shared map costs
                # tens of milliseconds of wall time on a busy machine, little CPU).
                _hold(held, input_paths, inputs, hold or [])
            del inputs
            import gc

            # Tables are freed by reference counting; a full collection (tens of ms with
            # pyarrow, numpy and pandas loaded) only when pool memory is still held, e.g. by a
            # reference cycle the node's code made.
            gc.collect(0)
            if shm and pa.default_memory_pool().bytes_allocated() > 0:
                gc.collect()
            if shm:
                released, retained = shmpool.release(
                    ranges, recycle=memory_pool == "shm", defer=defer_release
                )
                wstats["pool_bytes_trimmed"] = released
                wstats["pool_bytes_retained"] = retained
        elif shm:
            wstats["pool_bytes_trimmed"] = shmpool.trim(ranges)
        t_released = time.perf_counter()
        c_released = time.process_time()
        own_files = wstats.pop("_own_files", None)
        if own_files is not None:
            # Measured after the pool gave back what the output does not use (or, deferred,
            # what the files will hold then).
            if shm and defer_release and reuse:
                wstats["output_file_bytes"] = sum(
                    shmpool.resident_bytes(f, ranges[f]) if f in ranges else sipc.file_bytes(f)
                    for f in own_files
                )
            else:
                wstats["output_file_bytes"] = sum(sipc.file_bytes(f) for f in own_files)
        io3 = proc_io()
        t3 = time.perf_counter()
        at3 = time.monotonic()
        rollup_after = rollup()
        pss: dict[str, Any] = {}
        if measure_memory:
            pss = {
                "pss_bytes": rollup_before.get("Pss", 0),
                "pss_anon_bytes": rollup_before.get("Pss_Anon", 0),
                "pss_shmem_bytes": rollup_before.get("Pss_Shmem", 0),
                "pss_anon_after_write_bytes": rollup_after.get("Pss_Anon", 0),
                # What the node added to anonymous memory (its data, not the interpreter it
                # shares with the parent).
                "anon_growth_bytes": max(0, rollup_after.get("Pss_Anon", 0) - anon0),
            }
        stats.update(
            {
                "read_seconds": t1 - t0,
                "compute_seconds": t2 - t1,
                # CPU time (user + system, all threads) of the call: page faults and zeroing of
                # fresh memory show here, and other processes' load does not.
                "compute_cpu_seconds": c2 - c1,
                # Page faults of the call (every thread): a fresh page of memory costs one
                # (its allocation and zeroing), a page the process already has none.
                "compute_page_faults": f2 - f1,
                "write_seconds": t3 - t2,
                # The parts of write_seconds: sharing the output (SIPC files), then dropping
                # the node's tables and giving its pool memory back (CPU seconds of the latter).
                "share_seconds": t_shared - t2,
                "release_seconds": t_released - t_shared,
                "release_cpu_seconds": c_released - c_shared,
                # When the node's process began the node, called its function, got its result
                # and was done (time.monotonic(), one clock for every process of the machine;
                # RunResult.started_at is the run's start on it): the run's timeline.
                "started_at": at0,
                "compute_started_at": at1,
                "compute_ended_at": at2,
                "ended_at": at3,
                # Inputs the worker still had mapped from its previous node (not mapped again).
                "held_inputs": held_inputs,
                "read_bytes_copied": io1.get("rchar", 0) - io0.get("rchar", 0),
                "write_bytes_copied": io3.get("wchar", 0) - io2.get("wchar", 0),
                **pss,
                "memory_pool": memory_pool,
                "pid": os.getpid(),
                "reused_process": reuse,
                **wstats_recycled,
                **wstats,
            }
        )
        return ("ok", path, stats)
    except MemoryError:
        return ("error", "out-of-memory", "ran out of memory (MemoryError)", traceback.format_exc())
    except BaseException as e:  # noqa: BLE001 - reported to the parent, never lost
        return ("error", "exception", _raised(e), traceback.format_exc())


# --------------------------------------------------------------------------------------------
# Workers that outlive a run.


class WorkerPool:
    """Node worker processes that outlive a run: ``DAG.run(pool=pool)`` runs its nodes in them
    (as ``reuse_processes=True`` does in workers of its own), so a run starts no process and
    none exits when it ends. A node travels as a pickle (:func:`_ship`: module-level functions
    by reference, lambdas and closures by value with cloudpickle); its inputs and output are
    SIPC files of the run's directory as always.

    ``size``: how many idle workers the pool keeps (default: one per CPU) and a run's default
    ``parallel``. A run takes idle workers and starts new ones when none is idle; a worker goes
    back when the run ends, beyond ``size`` idle ones it exits. A worker that dies (a crash, the
    OOM killer) fails only the node it ran: that run raises :class:`NodeFailedError`, the pool
    forgets the worker and starts a new one when one is next needed. When a run fails, its
    workers still running nodes are killed (they would go on writing into a removed directory)
    and replaced the same way; idle ones go back.

    Workers start with ``start_method`` (``fork``: from this process as it is when the pool is
    made, with its imports; ``spawn``: fresh interpreters, functions must be importable), all
    ``size`` of them when the pool is made (``prestart``, the default): a process whose runs
    share the pool from several threads should not fork while other threads hold locks, so
    make the pool before the threads and big enough for them (a run starts a worker only when
    none is idle).
    Spare segments of the shared memory pool wait between runs in the pool's directory
    ``attune-dag.<pid>.pool.*`` under ``root`` (removed by :meth:`close`, or by
    :func:`remove_stale_runs` after this process died). A worker's shared memory pool keeps the
    reuse setting of the first run that used it (``shm`` or ``shm-bump``).

    Thread-safety: runs on different threads may share a pool (each takes its own workers)."""

    def __init__(
        self,
        size: int | None = None,
        *,
        start_method: str = "fork",
        root: str | None = None,
        prestart: bool = True,
    ) -> None:
        if start_method not in START_METHODS:
            raise InvalidArgumentError(
                f"unknown start method {start_method!r} (one of: {', '.join(START_METHODS)})"
            )
        _refuse_bootstrap_run()
        if size is not None and size < 1:
            raise InvalidArgumentError(f"a worker pool needs size >= 1, got {size}")
        self.size = size or os.cpu_count() or 1
        self.start_method = start_method
        self._ctx = mp.get_context(start_method)
        self.directory = tempfile.mkdtemp(
            prefix=f"{RUN_PREFIX}{os.getpid()}.pool.", dir=root or default_root()
        )
        self._idle: list[tuple[Any, Any]] = []
        self._lock = threading.Lock()
        self._closed = False
        #: Workers started over the pool's life (a replaced one counts again).
        self.started = 0
        self._finalizer = weakref.finalize(
            self, WorkerPool._shutdown, self._idle, self.directory, os.getpid()
        )
        if prestart:
            started = [self._acquire() for _ in range(self.size)]
            self._idle.extend(started)

    def __enter__(self) -> WorkerPool:  # noqa: PYI034 - typing.Self needs 3.11
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def closed(self) -> bool:
        return self._closed

    def idle_pids(self) -> list[int]:
        """Process ids of the idle workers."""
        with self._lock:
            return [p.pid for p, _c in self._idle]

    def _acquire(self) -> tuple[Any, Any]:
        """An idle live worker, else a new one."""
        with self._lock:
            if self._closed:
                raise PipelineError("the worker pool is closed")
            while self._idle:
                p, conn = self._idle.pop()
                if p.is_alive():
                    return p, conn
                p.join()  # died while idle: forget it
                conn.close()
            self.started += 1
        parent_conn, child_conn = self._ctx.Pipe(duplex=True)
        p = _start_node_process(
            self._ctx,
            _worker_main,
            ([], child_conn, self.directory),
            "attune-dag:pool-worker",
            parent_conn,
            child_conn,
        )
        return p, parent_conn

    def _give_back(self, p, conn) -> None:
        """A worker whose run ended with it idle: it unmaps what it kept of the run
        (:data:`FORGET`) and waits for the next."""
        with self._lock:
            if not self._closed and p.is_alive() and len(self._idle) < self.size:
                try:
                    conn.send(FORGET)
                except OSError:
                    pass  # died meanwhile: the next _acquire forgets it
                self._idle.append((p, conn))
                return
        self._stop(p, conn)

    @staticmethod
    def _stop(p, conn) -> None:
        try:
            conn.send(None)
        except OSError:
            pass
        p.join()
        conn.close()

    @staticmethod
    def _kill(p, conn) -> None:
        """A worker whose run failed while it ran a node (or one that kept pool memory)."""
        if p.is_alive():
            p.kill()
        p.join()
        conn.close()

    def close(self) -> None:
        """Stops the idle workers and removes the pool's directory (idempotent). Runs still
        using workers of the pool stop them when they end."""
        with self._lock:
            self._closed = True
        self._finalizer()

    @staticmethod
    def _shutdown(idle: list[tuple[Any, Any]], directory: str, owner: int) -> None:
        if os.getpid() != owner:
            return  # a forked child that inherited the pool: not its workers
        while idle:
            WorkerPool._stop(*idle.pop())
        shutil.rmtree(directory, ignore_errors=True)


_shared_pools: dict[tuple[str, str], WorkerPool] = {}
_shared_lock = threading.Lock()


def shared_pool(start_method: str = "fork", root: str | None = None) -> WorkerPool:
    """This process's shared :class:`WorkerPool` for ``start_method`` and ``root``: the workers
    that ``DAG.run()`` uses by default (``processes="shared"``). Made by the first run that
    needs it (that run pays the workers' start, one fork each), kept until
    :func:`close_shared_pools` or the interpreter's exit; a forked child starts with none."""
    if start_method not in START_METHODS:
        raise InvalidArgumentError(
            f"unknown start method {start_method!r} (one of: {', '.join(START_METHODS)})"
        )
    key = (start_method, os.path.realpath(root or default_root()))
    with _shared_lock:
        pool = _shared_pools.get(key)
        if pool is None or pool.closed:
            pool = WorkerPool(start_method=start_method, root=key[1])
            _shared_pools[key] = pool
        return pool


def close_shared_pools() -> None:
    """Stops the workers of every shared pool of this process and removes their directories
    (idempotent); the next default run starts new ones. Also removes this process's recycled
    files (:func:`attune.pipelines.recycle.release`): nothing of earlier runs stays."""
    with _shared_lock:
        pools = list(_shared_pools.values())
        _shared_pools.clear()
    for pool in pools:
        pool.close()
    recycle.release()


def _forget_shared_pools() -> None:
    # A forked child does not own its parent's workers (WorkerPool._shutdown checks the owner).
    global _shared_pools, _shared_lock
    _shared_pools = {}
    _shared_lock = threading.Lock()


os.register_at_fork(after_in_child=_forget_shared_pools)
atexit.register(close_shared_pools)


# --------------------------------------------------------------------------------------------
# The DAG.


def _check_spill_dir(spill_dir: str) -> None:
    """``spill_dir`` is an existing directory this process may write: checked before any node
    runs, since a bad one would otherwise show only at the first eviction."""
    if not os.path.isdir(spill_dir):
        what = "is not a directory" if os.path.exists(spill_dir) else "does not exist"
        raise PipelineError(
            f"spill_dir {spill_dir} {what}: give an existing directory on a disk (limit-drop "
            "eviction pages finished outputs out to files there)"
        )
    if not os.access(spill_dir, os.W_OK | os.X_OK):
        raise PipelineError(f"spill_dir {spill_dir} is not writable by this process")


class DAG:
    """A DAG of nodes; see the module documentation."""

    def __init__(self, name: str = "dag") -> None:
        self.name = name
        self.nodes: list[Node] = []
        self._names: set[str] = set()
        self._cached_loads: list[tuple[Any, str, tuple[str, ...]]] = []

    def node(
        self,
        fn: Callable[..., Any],
        *inputs: Node,
        name: str | None = None,
        memory_limit_bytes: int | None = None,
        ctx: bool = False,
        memory_bytes: int | None = None,
        timeout_s: float | None = None,
    ) -> Node:
        """Adds a node computing ``fn(*input_tables)`` (``fn(*tables, ctx=NodeContext)`` with
        ``ctx=True``). Inputs must be nodes already in this DAG, so the graph is acyclic by
        construction. ``memory_limit_bytes`` caps what the node's process may allocate beyond
        what it started with. ``timeout_s``: a node still running that many seconds after it
        started has its process killed and fails the run (``NodeFailedError``, reason
        ``timeout``); enforced by :meth:`run` in every process model, not by
        :meth:`run_inline` (nothing stops a function in the caller's own thread) nor on Ray."""
        if not callable(fn):
            raise PipelineError(f"a node needs a function, got {type(fn).__name__}")
        if len(self.nodes) >= NODES_MAX:
            raise PipelineError(f"a DAG has at most {NODES_MAX} nodes")
        for i in inputs:
            if not isinstance(i, Node) or all(i is not n for n in self.nodes):
                raise PipelineError(f"input {i!r} is not a node of this DAG")
        if name is not None and name in self._names:
            # Names address outputs, --outputs and stats: a given name must be unique.
            raise PipelineError(f"duplicate node name {name!r}: this DAG already has a node by it")
        name = name or getattr(fn, "__name__", "node")
        if name == "<lambda>":
            name = "node"
        base, k = name, 1
        while name in self._names:
            # A name taken from the function (the same function used twice) gets a suffix.
            k += 1
            name = f"{base}_{k}"
        if "/" in name or name.startswith("."):
            raise PipelineError(f"bad node name {name!r}")
        if memory_limit_bytes is not None and memory_limit_bytes <= 0:
            raise PipelineError("memory_limit_bytes must be positive")
        if memory_bytes is not None and memory_bytes < 0:
            raise PipelineError("memory_bytes must not be negative")
        if timeout_s is not None and (
            isinstance(timeout_s, bool)
            or not isinstance(timeout_s, (int, float))
            or not 0 < timeout_s < float("inf")
        ):
            raise PipelineError(
                f"timeout_s must be a positive number of seconds, got {timeout_s!r}"
            )
        n = Node(name, fn, tuple(inputs), memory_limit_bytes, ctx, memory_bytes, timeout_s)
        self.nodes.append(n)
        self._names.add(name)
        return n

    def load_parquet(
        self,
        path: str | os.PathLike,
        *,
        dictionary_columns: Sequence[str] = (),
        cache: Any = None,
        name: str | None = None,
    ) -> Node:
        """A source node decoding a Parquet file; with ``cache`` (a
        :class:`~attune.pipelines.decache.DeCache`) the decoded table is shared by every DAG
        that loads the same (file, dictionary columns), and the node's output refers to the
        cached files. The run holds a lease on the entry while it runs."""
        path = os.fspath(path)
        cols = tuple(dictionary_columns)
        if cache is None:

            def load() -> pa.Table:
                from attune.pipelines.decache import read_parquet

                return read_parquet(path, cols)
        else:

            def load() -> pa.Table:
                return cache.load(path, cols)

        node = self.node(load, name=name or "load")
        if cache is not None and cache.enabled:
            self._cached_loads.append((cache, path, cols))
        return node

    def sinks(self) -> list[Node]:
        used = {id(i) for n in self.nodes for i in n.inputs}
        return [n for n in self.nodes if id(n) not in used]

    def _outputs(self, outputs: Sequence[Node | str] | None) -> list[Node]:
        if outputs is None:
            return self.sinks()
        by_name = {n.name: n for n in self.nodes}
        out = []
        for o in outputs:
            n = by_name.get(o) if isinstance(o, str) else o
            if n is None or all(n is not m for m in self.nodes):
                raise PipelineError(f"output {o!r} is not a node of this DAG")
            out.append(n)
        return out

    def _restricted(self, outputs: Sequence[Node | str] | None) -> DAG | None:
        """The DAG of only the nodes ``outputs`` need (themselves and their ancestors), as Ray
        and Dask run only what a requested result depends on; None when that is every node
        (or ``outputs`` is None: the sinks need every node)."""
        if outputs is None:
            return None
        need: set[int] = set()
        stack = list(self._outputs(outputs))
        while stack:
            n = stack.pop()
            if id(n) not in need:
                need.add(id(n))
                stack.extend(n.inputs)
        if len(need) == len(self.nodes):
            return None
        sub = DAG(self.name)
        sub.nodes = [n for n in self.nodes if id(n) in need]
        sub._names = {n.name for n in sub.nodes}
        sub._cached_loads = list(self._cached_loads)
        return sub

    def run_inline(self, outputs: Sequence[Node | str] | None = None) -> dict[str, pa.Table]:
        """Runs the nodes in this process, in order (the reference for :meth:`run`): every
        node, or with ``outputs`` only those the outputs need. A node that raises fails the run
        with :class:`NodeFailedError` (its exception as ``__cause__``), as in :meth:`run`."""
        sub = self._restricted(outputs)
        if sub is not None:
            return sub.run_inline(outputs)
        values: dict[int, pa.Table] = {}
        for n in self.nodes:
            args = [values[id(i)] for i in n.inputs]
            try:
                out = _call_in_process(n, args, "attune-dag-inline-")
            except Exception as e:
                detail = "".join(traceback.format_exception(e))
                raise NodeFailedError(
                    f"node {n.name} {_raised(e)}", n.name, "exception", detail
                ) from e
            if isinstance(out, pa.RecordBatch):
                out = pa.Table.from_batches([out])
            if not isinstance(out, pa.Table):
                raise NodeFailedError(
                    f"node {n.name} returned {type(out).__qualname__}, not a pyarrow.Table",
                    n.name,
                    "not-a-table",
                )
            values[id(n)] = out
        return {n.name: values[id(n)] for n in self._outputs(outputs)}

    def run(
        self,
        outputs: Sequence[Node | str] | None = None,
        *,
        start_method: str = "fork",
        transport: str = "sipc",
        parallel: int | None = None,
        root: str | None = None,
        checksums: bool = False,
        keep_directory: bool = False,
        memory_pool: str = "auto",
        on_node_done: Callable[[str, dict[str, Any]], None] | None = None,
        mode: str = "process",
        reuse_processes: bool | None = None,
        measure_memory: bool = False,
        memory_budget_bytes: int | None = None,
        eviction: str = "adaptive",
        spill_dir: str | None = None,
        pool: WorkerPool | None = None,
        processes: str | None = None,
        recycle_bytes_max: int | None = None,
    ) -> RunResult:
        """Runs the DAG, every node in a process other than this one; returns the ``outputs`` (default: the
        sinks) mapped into this process. Raises :class:`NodeFailedError` when a node fails,
        after killing the other nodes and removing every shared file of the run.

        ``memory_pool``: ``shm`` makes every node's pyarrow allocations come from shared files
        (:mod:`attune.pipelines.shmpool`), so pyarrow-made outputs are shared without a copy;
        ``default`` keeps pyarrow's pool (outputs are copied once into the column files);
        ``auto`` (the default) is ``shm`` with the SIPC transport when the pool can be built
        here, else ``default``. ``shm-bump`` is ``shm`` without reuse of freed blocks inside a
        node and no spare segments kept from node to node in a reused process (every allocation
        fresh pages; the ablation of both).

        ``measure_memory`` (default off): every node reads its ``/proc/self/smaps_rollup``
        before and after sharing (the Pss fields and ``memory_peak_bytes``), milliseconds per
        node (``dag-chain-overheads``) that Ray does not pay, and the worker returns the node's
        pool pages before reporting it instead of after; the memory benchmarks switch it on.

        ``memory_budget_bytes`` turns the resource manager on
        (:mod:`attune.pipelines.resources`): a node starts when the run's shared files plus the
        running nodes' needs plus its own need (``DAG.node(memory_bytes=)``, else its inputs'
        size) fit the budget, deepest ready nodes first (a soft cap on admission: a node that
        allocates more than its need is not stopped; ``DAG.node(memory_limit_bytes=)`` caps
        one); when nothing runs and the next node
        does not fit, finished outputs still needed are evicted by ``eviction``: ``adaptive``
        (default), ``rollback`` (run the node again later), ``limit-drop`` (page the output out
        to a disk file under ``spill_dir``) or ``off``. Every decision is in ``result.events``.

        ``processes``: which processes run the nodes. ``run`` (the default): workers forked for
        this run (no pickling: they see the driver's functions and module state as the run
        starts), stopped at its end. ``shared``: the workers of this process's shared
        :class:`WorkerPool` (:func:`shared_pool`), started by the first run that needs them and
        kept for the next runs, as Ray keeps its workers; nodes travel pickled (:func:`_ship`:
        functions of importable modules by reference, so a module reloaded or edited in the
        driver after the workers started runs its old code there), and a DAG with a function
        that cannot be pickled runs in workers of its own run instead (``run``). ``node``: a process per node (fork or spawn). In every
        mode a node with ``memory_limit_bytes`` gets a process of its own. ``reuse_processes``
        is the older spelling: ``True`` is ``run``, ``False`` is ``node``.

        Workers of ``shared`` and ``run``: nodes run in up to ``parallel`` worker processes
        reused from node to node (no process start per node; a worker drops everything of a node before the next,
        see :func:`_worker_main`); a node with ``memory_limit_bytes`` still gets its own process.
        Without a memory budget a worker is sent its next node (a consumer of the one it runs)
        ahead, so it starts without a round trip through the driver; without a budget and
        with ``measure_memory`` off, a worker also keeps an input mapped after its node while
        another node still reads it (a wide phase of consumers of one table maps it once per
        worker instead of once per node; ``held_inputs`` in the node's stats), and unmaps what
        it let go of after reporting the node.

        ``pool``: a :class:`WorkerPool` whose workers run the nodes (they outlive this run: no
        process starts or exits per run); implies ``reuse_processes``, ``parallel`` defaults to
        the pool's size and ``start_method`` is the pool's. Functions travel pickled.

        ``mode``: ``process`` (the above) or ``ray``: the same nodes run as Ray tasks, tables
        passing through Ray's object store (the ``ray`` extra; for a DAG that outgrows one
        machine, and the benchmarks' peer). Results are the same; a failing node raises the same
        :class:`NodeFailedError`. ``transport``, ``start_method``, ``memory_pool``,
        ``checksums`` and ``reuse_processes`` do not apply to Ray (its workers are always
        reused); ``memory_limit_bytes`` becomes the task's Ray ``memory`` request.

        ``recycle_bytes_max`` (with the shared pool): the files of tables the run drops (no
        node reads them any more) are kept, up to this many bytes together (default
        :data:`attune.pipelines.recycle.BYTES_MAX`, 1 GiB), in this process's recycle
        directory under ``root``, and a node's (or a DeCache decode's) new pool segment is one
        of them, its pages still there, once no process maps it (:mod:`~attune.pipelines.recycle`):
        later nodes and the next run's nodes write into warm pages instead of fresh ones. 0
        switches it off (every dropped file is removed). Off with ``memory_budget_bytes``
        (the resource manager counts the run's directory only) and with ``shm-bump``."""
        _refuse_bootstrap_run()
        if mode not in MODES:
            raise InvalidArgumentError(f"unknown mode {mode!r} (one of: {', '.join(MODES)})")
        if not self.nodes:
            raise PipelineError("the DAG has no nodes")
        sub = self._restricted(outputs)
        if sub is not None:
            # Only what the outputs need runs (``result.nodes`` lists it).
            return sub.run(
                outputs,
                start_method=start_method,
                transport=transport,
                parallel=parallel,
                root=root,
                checksums=checksums,
                keep_directory=keep_directory,
                memory_pool=memory_pool,
                on_node_done=on_node_done,
                mode=mode,
                reuse_processes=reuse_processes,
                measure_memory=measure_memory,
                memory_budget_bytes=memory_budget_bytes,
                eviction=eviction,
                spill_dir=spill_dir,
                pool=pool,
                processes=processes,
                recycle_bytes_max=recycle_bytes_max,
            )
        if mode == "ray":
            return self._run_ray(self._outputs(outputs), parallel, on_node_done)
        if start_method not in START_METHODS:
            raise InvalidArgumentError(
                f"unknown start method {start_method!r} (one of: {', '.join(START_METHODS)})"
            )
        if transport not in TRANSPORTS:
            raise InvalidArgumentError(
                f"unknown transport {transport!r} (one of: {', '.join(TRANSPORTS)})"
            )
        if not self.nodes:
            raise PipelineError("the DAG has no nodes")
        if memory_pool not in MEMORY_POOLS:
            raise InvalidArgumentError(
                f"unknown memory pool {memory_pool!r} (one of: {', '.join(MEMORY_POOLS)})"
            )
        if memory_pool != "default" and transport == "sipc":
            from attune.pipelines import shmpool

            ok, why = shmpool.available()
            if not ok and memory_pool != "auto":
                raise PipelineError(f"the shared memory pool is unavailable: {why}")
            memory_pool = ("shm" if memory_pool == "auto" else memory_pool) if ok else "default"
        else:
            memory_pool = "default"
        want = self._outputs(outputs)
        # From here on the run's time: a first run pays the shared pool's start.
        t0 = time.perf_counter()
        if processes is None:
            processes = {True: "run", False: "node", None: "run"}[
                None if reuse_processes is None else bool(reuse_processes)
            ]
        elif processes not in PROCESSES:
            raise InvalidArgumentError(
                f"unknown processes {processes!r} (one of: {', '.join(PROCESSES)})"
            )
        elif reuse_processes is not None and bool(reuse_processes) != (processes != "node"):
            raise InvalidArgumentError(
                f"processes={processes!r} contradicts reuse_processes={reuse_processes!r}"
            )
        shipped: dict[int, bytes] = {}
        if pool is None and processes == "shared":
            # Every node a worker would run must travel pickled; if one cannot, the run's
            # own forked workers take the DAG (they inherit the functions).
            try:
                for n in self.nodes:
                    if n.memory_limit_bytes is None:
                        shipped[id(n)] = _ship(n)
                pool = shared_pool(start_method, root)
            except PipelineError:
                processes = "run"
        if pool is not None:
            if not isinstance(pool, WorkerPool):
                raise InvalidArgumentError(f"pool must be a WorkerPool, got {type(pool).__name__}")
            if pool.closed:
                raise PipelineError("the worker pool is closed")
            processes = "shared" if processes == "shared" else "pool"
            start_method = pool.start_method
        reuse_processes = processes != "node"
        parallel = max(1, parallel or (pool.size if pool is not None else 0) or os.cpu_count() or 1)
        ctx = mp.get_context(start_method)
        if memory_budget_bytes is not None:
            ResourceManager.check(memory_budget_bytes, eviction)
        if spill_dir is not None:
            _check_spill_dir(spill_dir)
        if recycle_bytes_max is None:
            recycle_bytes_max = recycle.BYTES_MAX
        elif (
            isinstance(recycle_bytes_max, bool)
            or not isinstance(recycle_bytes_max, int)
            or recycle_bytes_max < 0
        ):
            raise InvalidArgumentError(
                f"recycle_bytes_max must be a number of bytes >= 0 (0: off), got "
                f"{recycle_bytes_max!r}"
            )
        recycle_dir = None
        if memory_pool == "shm" and memory_budget_bytes is None and recycle_bytes_max > 0:
            recycle_dir = recycle.register(root or default_root(), recycle_bytes_max)
            if recycle.memory_short():
                recycle.release(recycle_dir)
        directory = tempfile.mkdtemp(
            prefix=f"{RUN_PREFIX}{os.getpid()}.{_safe(self.name)}.", dir=root or default_root()
        )
        result = RunResult(
            {},
            transport=transport,
            start_method=start_method,
            memory_pool=memory_pool,
            reuse_processes=reuse_processes,
            processes=processes,
        )
        result.started_at = time.monotonic()
        leases = []
        rm = None
        failed = True
        if memory_budget_bytes is not None:
            rm = ResourceManager(self.nodes, memory_budget_bytes, eviction, spill_dir, directory)
            result.events = rm.events
        try:
            for cache, path, cols in self._cached_loads:
                leases.append(cache.lease(cache.key(path, cols)))
            paths = self._execute(
                ctx,
                directory,
                transport,
                parallel,
                checksums,
                want,
                result,
                on_node_done,
                memory_pool,
                reuse_processes,
                measure_memory,
                rm,
                pool,
                shipped,
                (recycle_dir, recycle_bytes_max),
            )
            for n in want:
                result.tables[n.name] = _read_input(transport, paths[n.name])
            failed = False
        finally:
            for lease in leases:
                lease.release()
            if rm is not None:
                rm.close()
            if recycle_dir is not None and failed:
                recycle.release(recycle_dir)  # a failed run leaves no shared files behind
            elif recycle_dir is not None and not keep_directory:
                # Every file left is dropped now: those of tables the run did not drop (a node
                # run again's first output) and those of the tables it returns, which the
                # caller maps until it lets them go (no pool takes a file while it is mapped).
                with os.scandir(directory) as it:
                    for e in it:
                        recycle.put(e.path, recycle_dir, recycle_bytes_max)
            if not keep_directory:
                shutil.rmtree(directory, ignore_errors=True)
        result.seconds = time.perf_counter() - t0
        return result

    def _execute(
        self,
        ctx,
        directory,
        transport,
        parallel,
        checksums,
        want,
        result,
        on_node_done,
        memory_pool,
        reuse_processes=False,
        measure_memory=True,
        rm: ResourceManager | None = None,
        pool: WorkerPool | None = None,
        shipped: dict[int, bytes] | None = None,
        recycling: tuple[str | None, int] = (None, 0),
    ) -> dict[str, str]:
        recycle_dir = recycling[0]
        consumers: dict[int, int] = {id(n): 0 for n in self.nodes}
        for n in self.nodes:
            for i in n.inputs:
                consumers[id(i)] += 1
        index = {id(n): k for k, n in enumerate(self.nodes)}
        keep = {id(n) for n in want}
        paths: dict[str, str] = {}
        done: set[int] = set()
        waiting = list(self.nodes)
        # waitable (a process sentinel, or a worker's pipe) -> (node, process, conn, pooled)
        running: dict[Any, tuple[Node, Any, Any, bool]] = {}
        idle: list[tuple[Any, Any]] = []  # reused workers waiting for a node: (process, conn)
        workers: list[tuple[Any, Any]] = []
        live_tables: dict[int, str] = {}
        files_of: dict[str, list[str]] = {}  # table path -> its data files (see _drop)

        def start_worker() -> tuple[Any, Any]:
            if pool is not None:
                p, parent_conn = pool._acquire()
                workers.append((p, parent_conn))
                return p, parent_conn
            parent_conn, child_conn = ctx.Pipe(duplex=True)
            p = _start_node_process(
                ctx,
                _worker_main,
                (self.nodes, child_conn),
                "attune-dag:worker",
                parent_conn,
                child_conn,
            )
            workers.append((p, parent_conn))
            return p, parent_conn

        def retire_worker(p, conn, kept_memory: bool = False) -> None:
            workers.remove((p, conn))
            if pool is not None:
                if kept_memory:
                    WorkerPool._stop(p, conn)  # it runs nothing more: the pool starts another
                else:
                    pool._give_back(p, conn)
                return
            WorkerPool._stop(p, conn)

        shipped = {} if shipped is None else shipped
        tainted: set[int] = set()  # id(process) of workers whose node failed

        def ref(n: Node) -> int | bytes:
            """How a job names its node: by index (a worker of this run has the nodes), or
            pickled (a pool worker)."""
            if pool is None:
                return index[id(n)]
            if id(n) not in shipped:
                shipped[id(n)] = _ship(n)
            return shipped[id(n)]

        attempts: dict[int, int] = {}
        needs: dict[int, int] = {}  # id(running node) -> its admitted need
        out_bytes: dict[int, int] = {}  # id(finished node) -> tmpfs bytes of its own files
        spilled: set[int] = set()
        consumers_of: dict[int, list[Node]] = {id(n): [] for n in self.nodes}
        for n in self.nodes:
            for i in n.inputs:
                consumers_of[id(i)].append(n)

        # Reused workers without a budget get their next node before they finish the current
        # one (a consumer whose other inputs are done): it starts the moment the worker is free,
        # without waiting for the driver to hear of its input and answer (each hand-off costs
        # a wake-up, milliseconds on a busy machine). conn -> nodes sent after the running one.
        queued: dict[Any, list[Node]] = {}
        ahead = reuse_processes and rm is None

        def job(n: Node, input_paths: list[str], out_name: str) -> tuple:
            # Without memory measurement or a budget, the worker returns the node's unused
            # pool pages after reporting it (off the critical path).
            defer = not measure_memory and rm is None
            # Inputs a node not yet finished (besides this one) still reads: the worker keeps
            # them mapped for its next node (see _hold), which then does not map them again.
            hold = [defer and consumers[id(i)] > 1 for i in n.inputs]
            return (
                ref(n),
                input_paths,
                memory_pool,
                measure_memory,
                out_name,
                defer,
                directory,
                transport,
                checksums,
                hold,
                recycle_dir,
            )

        def send_ahead(n: Node, conn) -> None:
            """Queues one consumer of ``n`` on the worker running ``n`` (see ``queued``)."""
            if not ahead or queued.get(conn):
                return
            for m in consumers_of[id(n)]:
                if (
                    m.memory_limit_bytes is None
                    and any(m is w for w in waiting)
                    and all(id(i) in done for i in m.inputs if i is not n)
                ):
                    waiting.remove(m)
                    ins = [
                        _output_path(transport, directory, n.name) if i is n else paths[i.name]
                        for i in m.inputs
                    ]
                    conn.send(job(m, ins, m.name))
                    queued.setdefault(conn, []).append(m)
                    return

        began: dict[int, float] = {}  # id(node) -> when it started running (timeout_s)

        def time_left() -> float | None:
            """Seconds until the first running node with a ``timeout_s`` is due, or None."""
            due = [
                began[id(v[0])] + v[0].timeout_s
                for v in running.values()
                if v[0].timeout_s is not None and id(v[0]) in began
            ]
            return max(0.0, min(due) - time.monotonic()) if due else None

        def overdue() -> None:
            """Fails the run for a node past its ``timeout_s`` (the handler below kills it)."""
            now = time.monotonic()
            for n, *_ in running.values():
                if n.timeout_s is not None and now >= began.get(id(n), now) + n.timeout_s:
                    raise NodeFailedError(
                        f"node {n.name} ran longer than its timeout_s ({n.timeout_s:g} s) and "
                        "was stopped",
                        n.name,
                        "timeout",
                    )

        def start(n: Node) -> None:
            input_paths = [paths[i.name] for i in n.inputs]
            k = attempts.get(id(n), 0)
            out_name = n.name if k == 0 else f"{n.name}~{k}"
            if reuse_processes and n.memory_limit_bytes is None:
                # A node with a memory limit gets its own process (an address-space cap cannot
                # be lifted again for the next node).
                msg = job(n, input_paths, out_name)
                while True:
                    p, conn = idle.pop() if idle else start_worker()
                    try:
                        conn.send(msg)
                        break
                    except OSError:
                        # A pool worker that died while idle (its pipe is broken): another.
                        workers.remove((p, conn))
                        WorkerPool._kill(p, conn)
                running[conn] = running[p.sentinel] = (n, p, conn, True)
                began[id(n)] = time.monotonic()
                send_ahead(n, conn)
                return
            parent_conn, child_conn = ctx.Pipe(duplex=False)
            args = (
                n,
                input_paths,
                directory,
                transport,
                checksums,
                child_conn,
                memory_pool,
                measure_memory,
                out_name,
                recycle_dir,
            )
            p = _start_node_process(
                ctx, _child_main, args, f"attune-dag:{n.name}", parent_conn, child_conn
            )
            running[p.sentinel] = (n, p, parent_conn, False)
            began[id(n)] = time.monotonic()

        def pending() -> dict[int, list[Node]]:
            busy = {id(v[0]) for v in running.values()}
            return {
                key: [c for c in consumers_of[key] if id(c) not in done and id(c) not in busy]
                for key in live_tables
            }

        def in_use() -> int:
            return _directory_bytes(directory) + sum(needs.values())

        def evict_for(n: Node, need: int) -> None:
            live_nodes = {id(m): m for m in self.nodes if id(m) in live_tables}
            protect = {id(i) for i in n.inputs} | keep | spilled
            for v in running.values():  # (none while evicting; kept for safety)
                protect.update(id(i) for i in v[0].inputs)
            for x in rm.candidates(live_nodes, pending(), protect):
                if rm.fits(in_use(), need):
                    return
                st = result.nodes[x.name]
                how = choose_eviction(
                    rm.eviction,
                    st.get("read_seconds", 0) + st.get("compute_seconds", 0),
                    out_bytes.get(id(x), 0),
                    rm.spill_bytes_per_sec,
                    all(id(i) in live_tables for i in x.inputs),
                )
                if how == "rollback":
                    for f in self._drop(transport, live_tables, id(x), directory, files_of):
                        rm.forget(f)  # (no recycling with a budget)
                    done.discard(id(x))
                    attempts[id(x)] = attempts.get(id(x), 0) + 1
                    for i in x.inputs:
                        consumers[id(i)] += 1
                    waiting.append(x)
                    freed = out_bytes.get(id(x), 0)
                else:
                    freed = rm.spill(_table_data_files(transport, live_tables[id(x)]))
                    spilled.add(id(x))
                rm.events.append(("evict", x.name, how, freed))

        try:
            while waiting or running:
                ready = [n for n in waiting if all(id(i) in done for i in n.inputs)]
                if rm is not None:
                    ready = rm.sort_ready(ready)
                for n in ready:
                    if len({id(v[1]) for v in running.values()}) >= parallel:
                        break
                    if rm is not None:
                        need = rm.need(n, out_bytes)
                        if not rm.fits(in_use(), need):
                            if running:
                                break  # wait for memory, in priority order
                            if rm.eviction != "off":
                                evict_for(n, need)
                        needs[id(n)] = need
                        rm.events.append(("start", n.name, in_use() - need, need))
                    waiting.remove(n)
                    start(n)
                if not running:
                    raise PipelineError("no node can run (a cycle?)")  # unreachable by design
                ready = wait(list(running), timeout=time_left())
                if not ready:
                    overdue()
                for s in ready:
                    if s not in running:
                        continue  # the other waitable of a reused worker, already handled
                    n, p, conn, pooled = running.pop(s)
                    msg = None
                    if pooled:
                        running.pop(conn, None)
                        running.pop(p.sentinel, None)
                        try:
                            msg = conn.recv()
                        except (EOFError, OSError):
                            msg = None
                        if msg is None:
                            p.join()
                            conn.close()
                            workers.remove((p, conn))
                        elif msg[0] != "ok":
                            tainted.add(id(p))  # not given back to a pool: a fresh one instead
                        self._check(n, p, msg, pooled=True)
                        nxt = queued.get(conn)
                        if msg[2].get("pool_bytes_retained", 0) > 0:
                            # The node's code kept pool memory alive (e.g. in a global): a
                            # fresh worker takes the next node, so nothing of it lingers (the
                            # worker skips what was sent ahead; it goes back to the queue).
                            waiting.extend(queued.pop(conn, []))
                            retire_worker(p, conn, kept_memory=True)
                        elif nxt:
                            m = nxt.pop(0)
                            running[conn] = running[p.sentinel] = (m, p, conn, True)
                            began[id(m)] = time.monotonic()
                        else:
                            idle.append((p, conn))
                    else:
                        try:
                            if conn.poll():
                                msg = conn.recv()
                        except (EOFError, OSError):
                            msg = None
                        p.join()
                        conn.close()
                        self._check(n, p, msg)
                    _, path, stats = msg
                    stats["reported_at"] = time.monotonic()  # when the driver heard of it
                    needs.pop(id(n), None)
                    stats["runs"] = attempts.get(id(n), 0) + 1
                    out_bytes[id(n)] = stats.get("output_file_bytes", 0)
                    if rm is not None:
                        rm.events.append(("done", n.name))
                    paths[n.name] = path
                    done.add(id(n))
                    live_tables[id(n)] = path
                    result.nodes[n.name] = stats
                    if pooled and conn in running:  # the worker went on to a node sent ahead
                        send_ahead(running[conn][0], conn)
                    if on_node_done is not None:
                        on_node_done(n.name, stats)
                    stats["shared_bytes_after"] = _directory_bytes(directory)
                    result.shared_bytes_peak = max(
                        result.shared_bytes_peak, stats["shared_bytes_after"]
                    )
                    for i in n.inputs:
                        consumers[id(i)] -= 1
                        if consumers[id(i)] == 0 and id(i) not in keep:
                            for f in self._drop(
                                transport, live_tables, id(i), directory, files_of, recycling
                            ):
                                if rm is not None:
                                    rm.forget(f)
        except BaseException:
            procs = {id(v[1]): v[1] for v in running.values()}
            for p in procs.values():
                p.kill()
            for p in procs.values():
                p.join()
            for v in running.values():
                v[2].close()
            busy = {id(v[1]) for v in running.values()} | tainted
            busy |= {id(p) for p, conn in workers if queued.get(conn)}
            for p, conn in workers:
                if pool is not None and id(p) not in busy and p.is_alive():
                    pool._give_back(p, conn)  # idle: nothing of this run in it
                    continue
                if p.is_alive():
                    p.kill()
                p.join()
                conn.close()
            workers.clear()
            raise
        while workers:
            retire_worker(*workers[0])
        return paths

    def _run_ray(
        self,
        want: list[Node],
        parallel: int | None,
        on_node_done: Callable[[str, dict[str, Any]], None] | None,
    ) -> RunResult:
        """The same nodes as Ray tasks; edges are Ray object references (its object store).
        The run's time includes starting Ray when this run starts it, as a process run's
        includes starting the shared worker pool."""
        t0 = time.perf_counter()
        ray = _ray_session(parallel)
        task = ray.remote(_ray_node)
        result = RunResult({}, transport="ray", start_method="ray", mode="ray", processes="ray")
        result.started_at = time.monotonic()
        leases = []
        data: dict[int, Any] = {}
        stats: dict[int, Any] = {}
        try:
            for cache, path, cols in self._cached_loads:
                leases.append(cache.lease(cache.key(path, cols)))
            for n in self.nodes:
                opts: dict[str, Any] = {"num_returns": 2, "name": n.name, "max_retries": 0}
                if n.memory_limit_bytes is not None:
                    opts["memory"] = n.memory_limit_bytes
                data[id(n)], stats[id(n)] = task.options(**opts).remote(
                    n, *[data[id(i)] for i in n.inputs]
                )
            # Collected in insertion (topological) order: the first failure found is the
            # failing node's own (its consumers fail only because of it).
            for n in self.nodes:
                try:
                    node_stats = ray.get(stats[id(n)])
                except ray.exceptions.RayTaskError as e:
                    cause = getattr(e, "cause", None)
                    if isinstance(cause, NodeFailedError):
                        raise NodeFailedError(str(cause), cause.node, cause.reason, cause.detail)
                    reason = "out-of-memory" if isinstance(cause, MemoryError) else "exception"
                    what = f"{type(cause).__name__}: {cause}" if cause is not None else str(e)
                    raise NodeFailedError(
                        f"node {n.name} raised {what}", n.name, reason, str(e)
                    ) from None
                except ray.exceptions.OutOfMemoryError as e:
                    raise NodeFailedError(
                        f"node {n.name} ran out of memory (Ray's memory monitor killed it)",
                        n.name,
                        "out-of-memory",
                        str(e),
                    ) from None
                except ray.exceptions.RayError as e:
                    # WorkerCrashedError and friends: the worker process died.
                    raise NodeFailedError(
                        f"node {n.name} was killed: its Ray worker died ({type(e).__name__})",
                        n.name,
                        "killed",
                        str(e),
                    ) from None
                result.nodes[n.name] = node_stats
                if on_node_done is not None:
                    on_node_done(n.name, node_stats)
            for n in want:
                result.tables[n.name] = ray.get(data[id(n)])
        except BaseException:
            for ref in data.values():
                try:
                    ray.cancel(ref, force=True)
                except Exception:  # noqa: BLE001, S110 - best effort: finished tasks refuse
                    pass
            raise
        finally:
            for lease in leases:
                lease.release()
        result.seconds = time.perf_counter() - t0
        return result

    @staticmethod
    def _check(n: Node, p, msg, pooled: bool = False) -> None:
        if msg is not None and msg[0] == "ok" and (pooled or p.exitcode == 0):
            return
        if msg is not None and msg[0] == "error":
            _, reason, text, detail = msg
            if reason == "not-a-table":
                raise NodeFailedError(f"node {n.name} {text}", n.name, reason)
            raise NodeFailedError(f"node {n.name} {text}", n.name, reason, detail)
        code = p.exitcode
        if code == EXIT_UNGUARDED_MAIN:
            raise UnguardedMainError(_unguarded_main_message())
        if code is not None and code < 0:
            sig = signal.Signals(-code).name
            hint = (
                " (the kernel's OOM killer ends processes with SIGKILL when memory runs out)"
                if -code == signal.SIGKILL
                else ""
            )
            raise NodeFailedError(f"node {n.name} was killed by {sig}{hint}", n.name, "killed")
        raise NodeFailedError(
            f"node {n.name} exited with status {code} before sharing its output", n.name, "exit"
        )

    @staticmethod
    def _drop(
        transport: str,
        live_tables: dict[int, str],
        key: int,
        directory: str,
        files_of: dict[str, list[str]] | None = None,
        recycling: tuple[str | None, int] = (None, 0),
    ) -> list[str]:
        """Removes a table no node needs any more, and every data file of the run that no live
        table refers to (files written by running nodes are younger than any table they could
        be referred to by; they are never candidates: only files of dead tables are).
        ``files_of``: the data files of each table already read (path -> files; a table's
        files never change), filled as tables are read. ``recycling``: (recycle directory,
        bytes max); a removed data file goes there when it fits (:func:`recycle.put`)."""
        cache: dict[str, list[str]] = {} if files_of is None else files_of

        def files(p: str) -> list[str]:
            if p not in cache:
                cache[p] = _table_data_files(transport, p)
            return cache[p]

        path = live_tables.pop(key)
        dead_files = set(files(path))
        cache.pop(path, None)
        live_files: set[str] = set()
        for p in live_tables.values():
            live_files.update(files(p))
        removed = []
        for f in [path, *sorted(dead_files - live_files)]:
            if os.path.dirname(f) == directory:
                if recycling[0] is not None and f != path and recycle.put(f, *recycling):
                    removed.append(f)
                    continue
                try:
                    os.unlink(f)
                except FileNotFoundError:
                    pass
                removed.append(f)
        return removed


def _ray_session(parallel: int | None):
    """Ray, started here (local, no dashboard) unless the caller already connected it."""
    try:
        import ray
    except ImportError:
        raise PipelineError(
            "mode='ray' needs Ray (pip install 'attune[ray]'); it is not installed"
        ) from None
    if not ray.is_initialized():
        # On a loaded machine the raylet can take longer than Ray's default wait to come up.
        os.environ.setdefault("RAY_raylet_start_wait_time_s", "120")
        ray.init(
            num_cpus=max(1, parallel or os.cpu_count() or 1),
            include_dashboard=False,
            log_to_driver=False,
            configure_logging=False,
        )
    return ray


def _call_in_process(node: Node, args: list[pa.Table], prefix: str) -> Any:
    """``node``'s function on ``args`` in this process; a ``ctx`` node gets a scratch directory
    (named by ``prefix``) removed after the call (maps of files in it stay valid)."""
    if not node.wants_ctx:
        return node.fn(*args)
    directory = tempfile.mkdtemp(prefix=prefix, dir=default_root())
    try:
        return node.fn(*args, ctx=NodeContext(node.name, directory))
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def _ray_node(node: Node, *inputs: pa.Table) -> tuple[pa.Table, dict[str, Any]]:
    """A node as a Ray task: the same call and checks as in a node process."""
    t0 = time.perf_counter()
    at0 = time.monotonic()
    c0 = time.process_time()
    out = _call_in_process(node, list(inputs), "attune-dag-ray-")
    if isinstance(out, pa.RecordBatch):
        out = pa.Table.from_batches([out])
    if not isinstance(out, pa.Table):
        raise NodeFailedError(
            f"node {node.name} returned {type(out).__module__}.{type(out).__qualname__}, "
            "not a pyarrow.Table",
            node.name,
            "not-a-table",
        )
    stats = {
        "rows": out.num_rows,
        "columns": out.num_columns,
        "output_bytes": out.nbytes,
        "compute_seconds": time.perf_counter() - t0,
        "compute_cpu_seconds": time.process_time() - c0,
        # The run's timeline (see _node_body): the task's call, on time.monotonic().
        "started_at": at0,
        "compute_started_at": at0,
        "compute_ended_at": time.monotonic(),
    }
    return out, stats


def run_directories(root: str | None = None) -> list[dict[str, Any]]:
    """Run directories under ``root``: name, driver pid, whether that driver is alive, bytes. A
    directory whose driver is dead was left by a driver killed mid-run (SIGKILL skips its
    cleanup); :func:`remove_stale_runs` removes those."""
    root = root or default_root()
    out = []
    try:
        names = sorted(os.listdir(root))
    except FileNotFoundError:
        return []
    for name in names:
        path = os.path.join(root, name)
        m = _RUN_NAME.match(name)
        if m is None or not os.path.isdir(path):
            continue
        pid = int(m.group(1))
        alive = pid_alive(pid)
        out.append({"path": path, "pid": pid, "alive": alive, "bytes": _directory_bytes(path)})
    return out


def exit_on_sigterm() -> None:
    """Makes SIGTERM end this process like Ctrl-C does (``SystemExit`` raised in the main
    thread), so a run's ``finally`` removes its directory and stops its workers; with the
    default action the process would vanish and leave them. For command-line entry points
    (``attune dag run``, ``attune bench dag``); a handler someone else installed is kept."""
    if threading.current_thread() is not threading.main_thread():
        return
    if signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
        return

    def stop(signum, frame) -> None:
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, stop)


def remove_stale_runs(root: str | None = None) -> list[str]:
    """Removes the run directories of dead drivers; returns their paths."""
    removed = []
    for r in run_directories(root):
        if not r["alive"]:
            shutil.rmtree(r["path"], ignore_errors=True)
            removed.append(r["path"])
    return removed


def _directory_bytes(directory: str) -> int:
    total = 0
    try:
        with os.scandir(directory) as it:
            for e in it:
                try:
                    total += e.stat(follow_symlinks=False).st_blocks * 512
                except OSError:
                    pass
    except OSError:
        pass
    return total

"""Benchmarks of attune.pipelines (Kelvin): ``attune bench dag resharing|chain|decache|dabstep``.

Every benchmark runs SIPC and its peers in the same process run, on the same data: plain Arrow
IPC files (``ipc-file``: written by copy, read by copy) and Arrow IPC over memory maps
(``ipc-mmap``: written by copy, read through a map — the source's baseline), and Ray's object
store when ``ray`` is installed (the ``ray`` extra). Each row is one run of one transport; one
``kind = "summary"`` row per case carries the ratios (SIPC over each peer), which the figure list
publishes.

What is measured, not inferred:

* ``bytes_copied``: bytes moved by ``read``/``write`` system calls of the nodes
  (``/proc/<pid>/io`` rchar + wchar deltas around reading inputs and writing the output); a
  mapped read moves none.
* ``output_file_bytes``: tmpfs bytes of the files each node created (``st_blocks``).
* ``memory_peak_bytes``: the run at its fullest — the run directory's tmpfs bytes after a node
  finished plus the anonymous memory that node added (``Pss_Anon`` of
  ``/proc/<pid>/smaps_rollup`` after it wrote its output minus at its start), maximum over
  nodes.
* seconds: wall time of the node(s) doing the operation (read + compute + write), or of the run.

Sizes are flags; the defaults finish in minutes on a 2-core machine.
"""

from __future__ import annotations

import argparse
import functools
import json
import multiprocessing as mp
import os
import resource
import shlex
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from attune.pipelines import DAG, DeCache, WorkerPool, close_shared_pools, recycle
from attune.pipelines.dag import TRANSPORTS, RunResult, default_root

__all__ = ["main"]

INT_OPS = ("add_col", "concat", "rm_col", "slice")
STR_OPS = ("filter", "filter_dic", "sort", "sort_dic", "upper")


def _machine() -> dict[str, Any]:
    import platform

    cpu = ""
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next((ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name")), "")
    except OSError:
        pass
    from attune.bench import git_head

    return {
        "nproc": os.cpu_count(),
        "cpu": cpu,
        "kernel": platform.release(),
        "git_commit": git_head() or "unknown",
    }


class _Out:
    def __init__(self, path: str | None, as_json: bool, argv: list[str]) -> None:
        self.f = open(path, "a") if path else None  # noqa: SIM115 - closed in close()
        self.as_json = as_json
        self.command = "attune bench dag " + shlex.join(argv)
        self.machine = _machine()

    def row(self, row: dict[str, Any]) -> None:
        row = {"bench": "dag", **row, "command": self.command, "machine": self.machine}
        line = json.dumps(row)
        if self.f:
            self.f.write(line + "\n")
            self.f.flush()
        if self.as_json or not self.f:
            print(line, flush=True)

    def close(self) -> None:
        if self.f:
            self.f.close()


# --------------------------------------------------------------------------------------------
# Data and node functions (module level: usable under spawn too).


def _ints(columns: int, rows: int) -> pa.Table:
    base = np.arange(rows, dtype=np.int64)
    return pa.table({f"c{i}": pa.array(base * (i + 1)) for i in range(columns)})


def _strings(rows: int, dictionary: bool, repeat: int = 1) -> pa.Table:
    # 100-byte strings; each distinct value `repeat` times (1: no repetition, as in the source).
    ids = (np.arange(rows) // repeat).astype(np.int64)
    rng = np.random.default_rng(1)
    rng.shuffle(ids)
    vals = pa.array([f"{i:012d}" + "abcdefgh" * 11 for i in ids.tolist()])
    cols: dict[str, Any] = {"k": pa.array(ids)}
    for j in range(2):
        col = pc.binary_join_element_wise(vals, pa.scalar(""), pa.scalar(str(j)))
        col = pc.utf8_slice_codeunits(col, 0, 100)
        cols[f"s{j}"] = col.dictionary_encode() if dictionary else col
    return pa.table(cols)


def _op(name: str) -> Callable[[pa.Table], pa.Table]:
    if name == "add_col":
        return lambda t: t.append_column("new", pc.add(t["c0"], t["c1"]))
    if name == "concat":
        return lambda t: pa.concat_tables([t, t.slice(0, t.num_rows // 10)])
    if name == "rm_col":
        return lambda t: t.drop_columns([t.column_names[-1]])
    if name == "slice":
        return lambda t: t.slice(t.num_rows // 4, t.num_rows // 2)
    if name.startswith("filter"):
        return lambda t: t.filter(pc.equal(pc.bit_wise_and(t["k"], 1), 0))
    if name.startswith("sort"):
        return lambda t: t.sort_by("k")
    if name == "upper":
        return lambda t: t.set_column(1, "s0", pc.utf8_upper(t["s0"]))
    raise ValueError(name)


# --------------------------------------------------------------------------------------------
# resharing: two-node DAGs (load -> operation).


def _resharing(args: argparse.Namespace, out: _Out) -> None:
    from attune.pipelines import shmpool

    rows = args.column_mib * (1 << 20) // 8
    ray_peer = _ray_or_none(args, out)
    for op in args.ops:
        if op in INT_OPS:
            cols = args.columns
            load = functools.partial(_ints, cols, rows)
        else:
            dic = op.endswith("_dic")
            n = args.string_rows
            load = functools.partial(_strings, n, dic)
        # Warm up in this process (forked nodes inherit it): pyarrow initialises a compute
        # function on its first call, which would otherwise be timed in every node.
        small = _ints(args.columns, 1000) if op in INT_OPS else _strings(1000, op.endswith("_dic"))
        _op(op)(small)
        per: dict[str, list[dict[str, Any]]] = {}
        for rep in range(args.repeat):
            for label, transport, _producer, pool, reuse in _variants(args, arena=False):
                dag = DAG(f"reshare-{op}")
                src = dag.node(load, name="load")
                dag.node(_op(op), src, name=op)
                own = shmpool.OWN_SEGMENT_BYTES_MIN
                if label == "sipc:shared-seg":
                    shmpool.OWN_SEGMENT_BYTES_MIN = 0  # the run's forked workers inherit it
                try:
                    res = dag.run(
                        transport=transport,
                        root=args.root,
                        memory_pool=pool,
                        measure_memory=False,
                        **_run_kwargs(reuse, None),
                    )
                finally:
                    shmpool.OWN_SEGMENT_BYTES_MIN = own
                node = res.nodes[op]
                row = {
                    "kind": "resharing",
                    "op": op,
                    "engine": label,
                    "repeat": rep,
                    "node_seconds": node["read_seconds"]
                    + node["compute_seconds"]
                    + node["write_seconds"],
                    "read_seconds": node["read_seconds"],
                    "compute_seconds": node["compute_seconds"],
                    "compute_cpu_seconds": node["compute_cpu_seconds"],
                    "write_seconds": node["write_seconds"],
                    "bytes_copied": node["read_bytes_copied"] + node["write_bytes_copied"],
                    "output_file_bytes": node["output_file_bytes"],
                    "input_bytes": res.nodes["load"]["output_bytes"],
                    "output_bytes": node["output_bytes"],
                    "seconds": res.seconds,
                }
                row["node_runs_per_sec"] = 1.0 / max(row["node_seconds"], 1e-9)
                per.setdefault(label, []).append(row)
                out.row(row)
            if ray_peer is not None:
                node_s, run_s, compute_s, compute_cpu_s = ray_peer.run_two(load, _op(op))
                row = {
                    "kind": "resharing",
                    "op": op,
                    "engine": "ray",
                    "repeat": rep,
                    "node_seconds": node_s,
                    "compute_seconds": compute_s,
                    "compute_cpu_seconds": compute_cpu_s,
                    # Scheduling, the input's hand-off and the put of the output into the
                    # store: what Ray's node time holds besides the call.
                    "handoff_seconds": node_s - compute_s,
                    "seconds": run_s,
                    "node_runs_per_sec": 1.0 / max(node_s, 1e-9),
                }
                per.setdefault("ray", []).append(row)
                out.row(row)
        _summary(out, {"kind": "summary", "case": "resharing", "op": op}, per, "node_seconds")
        _page_cost(out, op, load(), args)


def _page_cost(out: _Out, op: str, table: pa.Table, args: argparse.Namespace) -> None:
    """Where an op's compute time goes besides the op: the same call in this process with
    pyarrow's own pool, warm (its pages reused from the call before, as in a worker that
    outlives runs: Ray's case), with a fresh shared memory pool (every output page a new tmpfs
    page, faulted in, allocated and zeroed: a SIPC node's case), and with that pool again on a
    second call (the first call's output freed: its blocks, pages and all, reused — what warm
    shared pages would give a SIPC node). CPU milliseconds of this thread and its page faults,
    medians of ``args.repeat`` (at least 3) rounds, the three calls alternating."""
    from attune.pipelines import shmpool

    if not shmpool.available()[0]:
        return
    fn = _op(op)
    fn(table)  # warm pyarrow's pool and the kernel

    def call() -> tuple[float, int]:
        f0 = resource.getrusage(resource.RUSAGE_THREAD).ru_minflt
        c0 = time.thread_time()
        result = fn(table)
        c1 = time.thread_time()
        f1 = resource.getrusage(resource.RUSAGE_THREAD).ru_minflt
        del result
        return (c1 - c0) * 1e3, f1 - f0

    calls: dict[str, list[tuple[float, int]]] = {"warm": [], "fresh_shm": [], "warm_shm": []}
    default = pa.default_memory_pool()
    directory = tempfile.mkdtemp(prefix="attune-bench-pages.", dir=args.root or default_root())
    try:
        for i in range(max(3, args.repeat)):
            calls["warm"].append(call())
            pool = shmpool.DetachedPool(directory, f"p{i}")
            pa.set_memory_pool(pool.pool)
            try:
                calls["fresh_shm"].append(call())
                calls["warm_shm"].append(call())
            finally:
                pa.set_memory_pool(default)
                pool.close()
                for f in os.listdir(directory):
                    os.unlink(os.path.join(directory, f))
    finally:
        import shutil

        shutil.rmtree(directory, ignore_errors=True)
    row: dict[str, Any] = {"kind": "page-cost", "op": op}
    for name, xs in calls.items():
        row[f"{name}_cpu_ms"] = statistics.median(c for c, _ in xs)
        row[f"{name}_page_faults"] = statistics.median(f for _, f in xs)
    row["fresh_over_warm"] = row["fresh_shm_cpu_ms"] / max(row["warm_cpu_ms"], 1e-6)
    row["warm_shm_over_warm"] = row["warm_shm_cpu_ms"] / max(row["warm_cpu_ms"], 1e-6)
    out.row(row)


def _tree_cpu_seconds() -> float:
    """CPU seconds (user + system) used so far by this process, its waited-for descendants and
    its live ones (Ray's daemons and workers are children of the process that started Ray):
    the cost of a run on a machine whose other work takes a varying share of the cores, which
    wall time does not isolate."""
    tick = os.sysconf("SC_CLK_TCK")
    procs: dict[int, tuple[int, float]] = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat") as f:
                text = f.read()
        except OSError:
            continue
        fields = text[text.rindex(")") + 2 :].split()
        procs[int(d)] = (int(fields[1]), (int(fields[11]) + int(fields[12])) / tick)
    kids: dict[int, list[int]] = {}
    for pid, (ppid, _) in procs.items():
        kids.setdefault(ppid, []).append(pid)
    total = 0.0
    todo = [p for p in kids.get(os.getpid(), [])]
    while todo:
        pid = todo.pop()
        total += procs[pid][1]
        todo.extend(kids.get(pid, []))
    me = resource.getrusage(resource.RUSAGE_SELF)
    waited = resource.getrusage(resource.RUSAGE_CHILDREN)
    return total + me.ru_utime + me.ru_stime + waited.ru_utime + waited.ru_stime


def _summary(
    out: _Out,
    head: dict[str, Any],
    per: dict[str, list[dict[str, Any]]],
    time_key: str,
    base: str = "sipc",
) -> None:
    """One row of ratios: ``base`` (median_low over repeats) against every other engine."""
    if base not in per:
        return

    def med(t: str, k: str) -> float:
        return statistics.median_low([r[k] for r in per[t]])

    row = dict(head)
    if base != "sipc":
        row["base"] = base
    row["sipc_seconds"] = med(base, time_key)
    row["sipc_bytes_copied"] = med(base, "bytes_copied")
    for peer in per:
        if peer == base:
            continue
        tag = peer.replace("-", "_").replace(":", "_")
        row[f"speedup_vs_{tag}"] = med(peer, time_key) / max(med(base, time_key), 1e-9)
        if "cpu_seconds" in per[peer][0] and "cpu_seconds" in per[base][0]:
            row[f"cpu_ratio_vs_{tag}"] = med(peer, "cpu_seconds") / max(
                med(base, "cpu_seconds"), 1e-9
            )
        if "compute_cpu_seconds" in per[peer][0] and "compute_cpu_seconds" in per[base][0]:
            row[f"compute_cpu_ratio_vs_{tag}"] = med(peer, "compute_cpu_seconds") / max(
                med(base, "compute_cpu_seconds"), 1e-9
            )
        if "bytes_copied" not in per[peer][0]:
            continue
        pc_ = med(peer, "bytes_copied")
        row[f"copied_fraction_vs_{tag}"] = med(base, "bytes_copied") / pc_ if pc_ else None
        ob = med(peer, "output_file_bytes")
        row[f"output_fraction_vs_{tag}"] = med(base, "output_file_bytes") / ob if ob else None
    out.row(row)


# --------------------------------------------------------------------------------------------
# Ray's object store as a peer (the `ray` extra). Each node is a Ray task; tables travel as
# object references (Ray puts a task's returned table in its shared-memory object store and
# readers map it).


class _Ray:
    def __init__(self, plasma_directory: str | None = None) -> None:
        import ray

        self.ray = ray
        if not ray.is_initialized():
            # With --root, Ray's object store lives on the same file system as SIPC's files
            # (its default is /dev/shm), so a huge-page tmpfs serves both alike.
            extra = {"_plasma_directory": plasma_directory} if plasma_directory else {}
            ray.init(
                num_cpus=os.cpu_count() or 1,
                include_dashboard=False,
                log_to_driver=False,
                configure_logging=False,
                **extra,
            )

        @ray.remote
        def node(fn, *tables):
            return fn(*tables)

        @ray.remote(num_returns=2)
        def timed(fn, *tables):
            # The op's call inside its Ray worker, clocked as a SIPC node's compute phase
            # (wall and CPU seconds of the process); the table goes to the store as above.
            t0, c0 = time.perf_counter(), time.process_time()
            out = fn(*tables)
            return out, (time.perf_counter() - t0, time.process_time() - c0)

        self.node = node
        self.timed = timed

    def run_two(self, load, op) -> tuple[float, float, float, float]:
        """(seconds of the op node, seconds of the run, wall and CPU seconds of the op's call
        inside its task)."""
        t0 = time.perf_counter()
        src = self.node.remote(load)
        self.ray.wait([src], fetch_local=False)
        t1 = time.perf_counter()
        ref, timing = self.timed.remote(op, src)
        self.ray.wait([ref], fetch_local=False)
        t2 = time.perf_counter()
        self.ray.get(ref)
        compute_s, compute_cpu_s = self.ray.get(timing)
        return t2 - t1, time.perf_counter() - t0, compute_s, compute_cpu_s


def _ray_or_none(args: argparse.Namespace, out: _Out) -> _Ray | None:
    if "ray" not in args.peers:
        return None
    try:
        return _Ray(args.root)
    except ImportError:
        print(
            "attune bench dag: ray is not installed (pip install 'attune[ray]'); "
            "skipping the Ray peer",
            file=sys.stderr,
        )
        out.row({"kind": "skipped", "engine": "ray", "reason": "ray is not installed"})
        return None


# --------------------------------------------------------------------------------------------
# chain: load -> N-1 column-adding nodes.


def _chain_step(seed: int, producer: str) -> Callable[..., pa.Table]:
    def step(t: pa.Table, ctx=None) -> pa.Table:
        rng = np.random.default_rng(seed)
        a, b = rng.choice(t.num_columns, 2, replace=False)
        x = t.column(int(a)).to_numpy()
        y = t.column(int(b)).to_numpy()
        if producer == "arena":
            z = ctx.arena.empty(len(x), np.int64)
            np.add(x, y, out=z)
            new = pa.array(z)
        else:
            new = pc.add(t.column(int(a)), t.column(int(b)))
        return t.append_column(f"n{seed}", new)

    return step


def _variants(args: argparse.Namespace, arena: bool) -> list[tuple[str, str, str, str, bool]]:
    """(label, transport, producer, memory pool, processes) of every contender. The IPC peers
    and ``sipc`` run as ``DAG.run()`` does by default (``"shared"`` here means: no
    ``processes`` argument; the default is workers forked for the run); SIPC also runs as
    ``sipc:fork`` (a fork per node),
    ``sipc:copy`` (pyarrow's own pool: the output is copied once into the column files; the
    pool switched off) and, in the chain, ``sipc:arena`` (numpy computing into the node's
    arena) and ``sipc:reuse`` (the pool, workers started for each run), ``sipc:reuse:bump``
    (the same without the pool's reuse of freed blocks and spare segments: the ablation) and
    ``sipc:persist`` (the pool, nodes in the workers of a :class:`WorkerPool` that outlive
    runs: no process starts or exits per run) and, in the resharing benchmark,
    ``sipc:shared-seg`` (``sipc`` with large blocks in the shared bump segment, as before they
    got segments of their own: ``shmpool.OWN_SEGMENT_BYTES_MIN`` 0; the ablation) and
    ``sipc:no-recycle`` (``sipc`` with ``recycle_bytes_max=0``: every dropped table's files
    removed, every new segment fresh; the ablation of recycling, which starts with the
    recycled files of earlier runs removed)."""
    out = []
    for t in args.transports:
        if t != "sipc":
            out.append((t, t, "pyarrow", "default", "shared"))
            continue
        for v in args.sipc_variants:
            if v == "pool":
                out.append(("sipc", t, "pyarrow", "shm", "shared"))
            elif v == "fork":
                out.append(("sipc:fork", t, "pyarrow", "shm", False))
            elif v == "copy":
                out.append(("sipc:copy", t, "pyarrow", "default", "shared"))
            elif v == "arena" and arena:
                out.append(("sipc:arena", t, "arena", "default", "shared"))
            elif v == "reuse" and arena:
                out.append(("sipc:reuse", t, "pyarrow", "shm", True))
            elif v == "bump" and arena:
                out.append(("sipc:reuse:bump", t, "pyarrow", "shm-bump", True))
            elif v == "persist" and arena:
                out.append(("sipc:persist", t, "pyarrow", "shm", "persist"))
            elif v == "shared-seg" and not arena:
                out.append(("sipc:shared-seg", t, "pyarrow", "shm", "shared"))
            elif v == "no-recycle":
                out.append(("sipc:no-recycle", t, "pyarrow", "shm", "no-recycle"))
    return out


def _worker_pool(variants: list, args: argparse.Namespace) -> WorkerPool | None:
    """The :class:`WorkerPool` of the ``sipc:persist`` contender (workers that outlive runs),
    made once for the whole benchmark like Ray's session; None when it does not run."""
    if not any(v[4] == "persist" for v in variants):
        return None
    return WorkerPool(root=args.root)


def _run_kwargs(reuse: bool | str, wpool: WorkerPool | None) -> dict[str, Any]:
    if reuse == "persist":
        return {"pool": wpool}
    if reuse == "no-recycle":
        return {"recycle_bytes_max": 0}
    if reuse == "shared":
        return {}  # what DAG.run() does by default (workers forked for the run)
    return {"processes": "run" if reuse else "node"}


def _fresh_start() -> None:
    """Every engine's first timed run pays its start, as a user's first run in a fresh process
    does: the shared worker pools are closed (the next default run forks them again) and Ray
    is shut down (the next Ray run starts its daemons, object store and workers)."""
    close_shared_pools()
    ray = sys.modules.get("ray")
    if ray is not None and ray.is_initialized():
        ray.shutdown()


def _run_contender(
    dag: DAG,
    transport: str,
    pool: str,
    reuse: bool | str,
    wpool: WorkerPool | None,
    root: str | None,
) -> RunResult:
    """One timed run of ``dag`` by a contender: Ray's object store (``transport == "ray"``),
    else a transport with its memory pool and workers (see :func:`_variants`). Timed runs do
    not read ``smaps_rollup`` in every node (milliseconds each, which Ray does not pay);
    memory is measured in separate runs."""
    if transport == "ray":
        return dag.run(mode="ray")
    return dag.run(
        transport=transport,
        root=root,
        memory_pool=pool,
        measure_memory=False,
        **_run_kwargs(reuse, wpool),
    )


def _chain_dag(rows: int, length: int, producer: str) -> DAG:
    dag = DAG("chain")
    prev = dag.node(functools.partial(_ints, 2, rows), name="load")
    for i in range(1, length):
        prev = dag.node(_chain_step(i, producer), prev, name=f"add{i}", ctx=producer == "arena")
    return dag


def _overheads(rows: int, length: int) -> dict[str, float]:
    """What a node costs besides its work, measured here (medians of 10): a fork of this
    process and its exit (a node process), a read of ``/proc/self/smaps_rollup`` in a process
    that maps the chain's last table (memory measurement), and a message round trip to a
    reused worker."""
    ctx = mp.get_context("fork")

    def med(f) -> float:
        xs = []
        for _ in range(10):
            t0 = time.perf_counter()
            f()
            xs.append(time.perf_counter() - t0)
        return statistics.median(xs)

    def fork_exit() -> None:
        p = ctx.Process(target=int)
        p.start()
        p.join()

    from attune.pipelines.dag import smaps_rollup

    res = _chain_dag(rows, length, "pyarrow").run(measure_memory=False)
    last = res.tables[f"add{length - 1}"]
    sum(c.nbytes for c in last.columns)  # keep it mapped
    rollup = med(smaps_rollup)
    del res, last
    a, b = ctx.Pipe()

    def echo(conn) -> None:
        while (m := conn.recv()) is not None:
            conn.send(m)

    p = ctx.Process(target=echo, args=(b,), daemon=True)
    p.start()

    def rt() -> None:
        a.send((1, ["x"], "shm", False))
        a.recv()

    roundtrip = med(rt)
    a.send(None)
    p.join()
    return {
        "fork_exit_ms": med(fork_exit) * 1e3,
        "smaps_rollup_ms": rollup * 1e3,
        "worker_roundtrip_us": roundtrip * 1e6,
    }


def _chain(args: argparse.Namespace, out: _Out) -> None:
    rows = args.column_mib * (1 << 20) // 8
    ray_on = _ray_or_none(args, out) is not None
    _chain_step(1, "pyarrow")(_ints(2, 1000))  # warm up (see _resharing)
    distinct = (2 + args.length - 1) * rows * 8
    per: dict[str, list[dict[str, Any]]] = {}
    variants = _variants(args, arena=True)
    if ray_on:
        variants.append(("ray", "ray", "pyarrow", "default", False))
    # No untimed first run for anyone: the first repeat pays each engine's start (see
    # _fresh_start), the medians are over every repeat and `chain-first` compares first runs.
    _fresh_start()
    wpool = _worker_pool(variants, args)
    try:
        _chain_timed(args, out, rows, distinct, variants, per, wpool)
    finally:
        if wpool is not None:
            wpool.close()


def _chain_timed(args, out, rows, distinct, variants, per, wpool) -> None:
    for rep in range(args.repeat):
        for label, transport, producer, pool, reuse in variants:
            dag = _chain_dag(rows, args.length, producer)
            cpu0 = _tree_cpu_seconds()
            res = _run_contender(dag, transport, pool, reuse, wpool, args.root)
            tot = res.totals()
            row = {
                "kind": "chain",
                "engine": label,
                "length": args.length,
                "repeat": rep,
                "seconds": res.seconds,
                "runs_per_sec": 1.0 / res.seconds,
                "cpu_seconds": _tree_cpu_seconds() - cpu0,
            }
            if transport != "ray":
                row.update(
                    {
                        "bytes_copied": tot["read_bytes_copied"] + tot["write_bytes_copied"],
                        "bytes_copied_after_load": sum(
                            n["read_bytes_copied"] + n["write_bytes_copied"]
                            for k, n in res.nodes.items()
                            if k != "load"
                        ),
                        "output_file_bytes": tot["output_file_bytes"],
                        "shared_bytes_peak": tot["shared_bytes_peak"],
                        "distinct_bytes": distinct,
                        "output_over_distinct": tot["output_file_bytes"] / distinct,
                    }
                )
            per.setdefault(label, []).append(row)
            out.row(row)
    head = {"kind": "summary", "case": "chain", "length": args.length}
    _summary(out, head, per, "seconds")
    first = {k: v[:1] for k, v in per.items()}
    _summary(
        out, {"kind": "summary", "case": "chain-first", "length": args.length}, first, "seconds"
    )
    fork_head = {"kind": "summary", "case": "chain-fork", "length": args.length}
    _summary(out, fork_head, per, "seconds", base="sipc:fork")
    reuse_head = {"kind": "summary", "case": "chain-reuse", "length": args.length}
    _summary(out, reuse_head, per, "seconds", base="sipc:reuse")
    persist_head = {"kind": "summary", "case": "chain-persist", "length": args.length}
    _summary(out, persist_head, per, "seconds", base="sipc:persist")
    for label, transport, producer, pool, reuse in variants:
        if transport == "ray":
            continue
        res = _chain_dag(rows, args.length, producer).run(
            transport=transport,
            root=args.root,
            memory_pool=pool,
            measure_memory=True,
            **_run_kwargs(reuse, wpool),
        )
        tot = res.totals()
        out.row(
            {
                "kind": "summary",
                "case": "chain-memory",
                "engine": label,
                "memory_peak_bytes": tot["memory_peak_bytes"],
                "distinct_bytes": distinct,
                "memory_over_distinct": tot["memory_peak_bytes"] / distinct,
                "output_over_distinct": tot["output_file_bytes"] / distinct,
            }
        )
    out.row({"kind": "overheads", "case": "chain-overheads", **_overheads(rows, args.length)})


# --------------------------------------------------------------------------------------------
# decache: N parallel DAGs loading the same Parquet file.


def _decache_dag(path: str, cache: DeCache) -> DAG:
    dag = DAG("decache")
    src = dag.load_parquet(path, dictionary_columns=["s0", "s1"], cache=cache)
    f = dag.node(lambda t: t.filter(pc.less(t["k"], 1000)), src, name="filter")
    dag.node(lambda t: t.group_by("s0").aggregate([("k", "sum")]), f, name="agg")
    return dag


def _run_one(path: str, root: str, enabled: bool, reuse: bool, conn, direct: bool = True) -> None:
    cache = DeCache(os.path.join(root, "attune-decache-bench"), enabled=enabled, direct=direct)
    res = _decache_dag(path, cache).run(root=root, reuse_processes=reuse, measure_memory=False)
    conn.send((res.seconds, res.nodes["load"].get("pss_bytes", 0)))
    conn.close()


def _run_on_threads(
    path: str, root: str, enabled: bool, direct: bool, n: int, wpool: WorkerPool
) -> None:
    """N DAGs at once from this process, one thread each, their nodes in ``wpool``'s workers
    (a service running many pipelines: no process starts per DAG)."""
    import threading

    cache = DeCache(os.path.join(root, "attune-decache-bench"), enabled=enabled, direct=direct)
    errors: list[BaseException] = []

    def one() -> None:
        try:
            _decache_dag(path, cache).run(root=root, pool=wpool, parallel=1, measure_memory=False)
        except BaseException as e:  # noqa: BLE001 - re-raised below
            errors.append(e)

    threads = [threading.Thread(target=one) for _ in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]


def _decache(args: argparse.Namespace, out: _Out) -> None:
    work = tempfile.mkdtemp(prefix="attune-dag-bench-")
    path = os.path.join(work, "in.parquet")
    pq.write_table(_strings(args.string_rows, False, repeat=10), path, compression="zstd")
    ctx = mp.get_context("fork")
    root = args.root or default_root()
    cache_root = os.path.join(root, "attune-decache-bench")
    wpool = None
    if args.drivers == "pool":
        # Workers for the largest N, started and warmed (untimed) before any timed run.
        wpool = WorkerPool(max(args.dags), root=args.root)
        _run_on_threads(path, root, True, True, max(args.dags), wpool)
    try:
        for n in args.dags:
            per: dict[str, list[dict[str, Any]]] = {}
            for rep in range(args.repeat):
                # decache:copy: a miss decodes into ordinary memory and copies the table into
                # the entry (the decode-then-copy way); decache decodes into the entry's files.
                for label, enabled, direct in (
                    ("no-cache", False, True),
                    ("decache:copy", True, False),
                    ("decache", True, True),
                ):
                    DeCache(cache_root).clear()
                    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
                    cpu0 = _tree_cpu_seconds()
                    t0 = time.perf_counter()
                    procs = []
                    if wpool is not None:
                        _run_on_threads(path, root, enabled, direct, n, wpool)
                    for _ in range(n if wpool is None else 0):
                        a, b = ctx.Pipe(duplex=False)
                        p = ctx.Process(
                            target=_run_one,
                            args=(path, root, enabled, not args.fork_per_node, b, direct),
                        )
                        p.start()
                        b.close()
                        procs.append((p, a))
                    for p, a in procs:
                        a.recv()
                        p.join()
                    seconds = time.perf_counter() - t0
                    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
                    row = {
                        "kind": "decache",
                        "engine": label,
                        "dags": n,
                        "drivers": args.drivers,
                        "repeat": rep,
                        "reuse_processes": not args.fork_per_node,
                        "seconds": seconds,
                        # CPU of every process of the N DAGs (drivers and their node
                        # processes, all waited for; with a worker pool this process and
                        # its live workers): unlike wall time, not shifted by other work on
                        # the machine taking a share of the cores.
                        "cpu_seconds": (
                            _tree_cpu_seconds() - cpu0
                            if wpool is not None
                            else (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)
                        ),
                    }
                    per.setdefault(label, []).append(row)
                    out.row(row)
            on = statistics.median_low([r["seconds"] for r in per["decache"]])
            copy = statistics.median_low([r["seconds"] for r in per["decache:copy"]])
            off = statistics.median_low([r["seconds"] for r in per["no-cache"]])

            def cpu(label: str, per: dict[str, list[dict[str, Any]]] = per) -> float:
                return statistics.median_low([r["cpu_seconds"] for r in per[label]])

            out.row(
                {
                    "kind": "summary",
                    "case": "decache",
                    "dags": n,
                    "drivers": args.drivers,
                    "speedup_vs_no_cache": off / on,
                    "copy_speedup_vs_no_cache": off / copy,
                    "speedup_vs_decache_copy": copy / on,
                    "cpu_ratio_vs_no_cache": cpu("no-cache") / cpu("decache"),
                    "cpu_ratio_vs_decache_copy": cpu("decache:copy") / cpu("decache"),
                }
            )
    finally:
        if wpool is not None:
            wpool.close()
        DeCache(cache_root).clear()
        import shutil

        shutil.rmtree(work, ignore_errors=True)


# --------------------------------------------------------------------------------------------
# ecosystem: chains whose nodes compute with numpy, scikit-learn, pyarrow and DuckDB.

#: The libraries of the ecosystem chain, in the order its nodes cycle through them.
ECOSYSTEM_KINDS = ("numpy", "pyarrow", "duckdb", "sklearn")


def _eco_step(kind: str, k: int) -> Callable[[pa.Table], pa.Table]:
    """A node computing one new column from the table's first two with ``kind``'s library and
    appending it (every input column passes through). numpy, scikit-learn and DuckDB allocate
    outside pyarrow's pool (their column takes SIPC's copy path); pyarrow's kernels allocate
    from the shared pool."""

    def step(t: pa.Table) -> pa.Table:
        if kind == "numpy":
            x = t.column(0).to_numpy()
            new = pa.array(np.sqrt(np.abs(x)) * (k + 1))
        elif kind == "pyarrow":
            new = pc.add(pc.multiply(t.column(0), k + 1), t.column(1))
        elif kind == "duckdb":
            import duckdb

            src = t.select([0, 1]).rename_columns(["a", "b"])  # noqa: F841 - read by the SQL
            con = duckdb.connect()
            try:
                res = con.sql(f"SELECT a * {k + 1} + b AS x FROM src").arrow()
                if isinstance(res, pa.RecordBatchReader):
                    res = res.read_all()
            finally:
                con.close()
            new = res.column("x").combine_chunks()
        else:
            from sklearn.preprocessing import StandardScaler

            x = t.column(0).to_numpy().astype(np.float64).reshape(-1, 1)
            new = pa.array(StandardScaler().fit_transform(x).ravel())
        return t.append_column(f"{kind}{k}", new)

    return step


def _eco_kinds(args: argparse.Namespace) -> list[str]:
    kinds = list(args.kinds)
    if "sklearn" in kinds:
        try:
            import sklearn  # noqa: F401
        except ImportError:
            kinds.remove("sklearn")
    return kinds


def _eco_dag(rows: int, length: int, kinds: list[str]) -> DAG:
    dag = DAG("ecosystem")
    prev = dag.node(functools.partial(_ints, 2, rows), name="load")
    for i in range(1, length):
        kind = kinds[(i - 1) % len(kinds)]
        prev = dag.node(_eco_step(kind, i), prev, name=f"{kind}{i}")
    return dag


def _ecosystem(args: argparse.Namespace, out: _Out) -> None:
    rows = args.column_mib * (1 << 20) // 8
    kinds = _eco_kinds(args)
    if len(kinds) < len(args.kinds):
        out.row({"kind": "skipped", "engine": "sklearn", "reason": "scikit-learn not installed"})
    ray_on = _ray_or_none(args, out) is not None
    _eco_dag(1000, 1 + len(kinds), kinds).run_inline()  # warm every library (see _resharing)
    variants = [v for v in _variants(args, arena=True) if v[0] not in ("sipc:arena",)]
    if ray_on:
        variants.append(("ray", "ray", "pyarrow", "default", False))
    _fresh_start()  # as in the chain: the first timed runs pay every engine's start
    wpool = _worker_pool(variants, args)
    try:
        for length in args.lengths:
            distinct = (2 + length - 1) * rows * 8
            per: dict[str, list[dict[str, Any]]] = {}
            for rep in range(args.repeat):
                for label, transport, _producer, pool, reuse in variants:
                    dag = _eco_dag(rows, length, kinds)
                    cpu0 = _tree_cpu_seconds()
                    res = _run_contender(dag, transport, pool, reuse, wpool, args.root)
                    row: dict[str, Any] = {
                        "kind": "ecosystem",
                        "engine": label,
                        "length": length,
                        "repeat": rep,
                        "seconds": res.seconds,
                        "cpu_seconds": _tree_cpu_seconds() - cpu0,
                    }
                    if transport != "ray":
                        tot = res.totals()
                        row.update(
                            {
                                "bytes_copied": tot["read_bytes_copied"]
                                + tot["write_bytes_copied"],
                                "bytes_copied_after_load": sum(
                                    n["read_bytes_copied"] + n["write_bytes_copied"]
                                    for k, n in res.nodes.items()
                                    if k != "load"
                                ),
                                "output_file_bytes": tot["output_file_bytes"],
                                "distinct_bytes": distinct,
                                "output_over_distinct": tot["output_file_bytes"] / distinct,
                            }
                        )
                    per.setdefault(label, []).append(row)
                    out.row(row)
                    del res
            head = {"kind": "summary", "case": "ecosystem", "length": length}
            _summary(out, head, per, "seconds")
            fork_head = {"kind": "summary", "case": "ecosystem-fork", "length": length}
            _summary(out, fork_head, per, "seconds", base="sipc:fork")
            # Memory: one run per engine reading every node's smaps (PSS), as in the chain.
            for label, transport, _producer, pool, reuse in variants:
                if transport == "ray":
                    continue
                res = _eco_dag(rows, length, kinds).run(
                    transport=transport,
                    root=args.root,
                    memory_pool=pool,
                    measure_memory=True,
                    **_run_kwargs(reuse, wpool),
                )
                tot = res.totals()
                out.row(
                    {
                        "kind": "summary",
                        "case": "ecosystem-memory",
                        "engine": label,
                        "length": length,
                        "memory_peak_bytes": tot["memory_peak_bytes"],
                        "distinct_bytes": distinct,
                        "memory_over_distinct": tot["memory_peak_bytes"] / distinct,
                        "output_over_distinct": tot["output_file_bytes"] / distinct,
                        "bytes_copied_after_load": sum(
                            n["read_bytes_copied"] + n["write_bytes_copied"]
                            for k, n in res.nodes.items()
                            if k != "load"
                        ),
                    }
                )
                del res
    finally:
        if wpool is not None:
            wpool.close()


# --------------------------------------------------------------------------------------------
# eviction: cumulative branching DAGs under a memory budget.


def _grow(work: int) -> Callable[[pa.Table], pa.Table]:
    """A cumulative node: appends one column computed from the last one with ``work`` passes of
    an addition over the whole column (the source's unit of computation)."""

    def run(t: pa.Table) -> pa.Table:
        col = t.column(t.num_columns - 1)
        for k in range(work):
            col = pc.add(col, k + 1)
        return t.append_column(f"c{t.num_columns}", col)

    return run


def _summary_of(t: pa.Table) -> pa.Table:
    return pa.table({"rows": [t.num_rows], "sum": [pc.sum(t.column(t.num_columns - 1)).as_py()]})


def _eviction_dag(trees: int, depth: int, rows: int, work: int) -> DAG:
    """``trees`` cumulative binary trees in one DAG: a load of two int64 columns, then every
    node has two successors that each append a column to its output (so intermediate data grows
    with depth and an output stays needed until its second successor ran), ``depth`` levels;
    the leaves reduce to one row (nothing large is kept)."""
    dag = DAG("eviction")
    for t in range(trees):
        level = [dag.node(functools.partial(_ints, 2, rows), name=f"t{t}.load")]
        for d in range(1, depth):
            nxt = []
            for i, parent in enumerate(level):
                for j in range(2):
                    nxt.append(dag.node(_grow(work), parent, name=f"t{t}.n{d}.{2 * i + j}"))
            level = nxt
        for i, leaf in enumerate(level):
            dag.node(_summary_of, leaf, name=f"t{t}.sum{i}")
    return dag


def _eviction(args: argparse.Namespace, out: _Out) -> None:
    import shutil

    rows = args.column_mib * (1 << 20) // 8
    col = rows * 8
    # Distinct data of one tree: the load's two columns and one column per inner node.
    inner = 2 ** (args.depth) - 2
    distinct = args.trees * (2 + inner) * col
    budget = int(distinct * args.budget_fraction)
    from attune.pipelines.resources import default_spill_root

    spill = tempfile.mkdtemp(prefix="attune-dag-spill-", dir=args.spill_dir or default_spill_root())
    _grow(1)(_ints(2, 1000))  # warm up pyarrow's kernels in the forked parent
    try:
        for work in args.work:
            per: dict[str, list[dict[str, Any]]] = {}
            for rep in range(args.repeat):
                for policy in args.policies:
                    dag = _eviction_dag(args.trees, args.depth, rows, work)
                    res = dag.run(
                        root=args.root,
                        memory_pool="shm",
                        reuse_processes=True,
                        measure_memory=False,
                        parallel=2,
                        memory_budget_bytes=budget,
                        eviction=policy,
                        spill_dir=spill,
                    )
                    evictions = [e for e in res.events if e[0] == "evict"]
                    reruns = sum(st.get("runs", 1) - 1 for st in res.nodes.values())
                    row = {
                        "kind": "eviction",
                        "engine": policy,
                        "work": work,
                        "repeat": rep,
                        "seconds": res.seconds,
                        "trees": args.trees,
                        "depth": args.depth,
                        "budget_bytes": budget,
                        "distinct_bytes": distinct,
                        "shared_bytes_peak": res.shared_bytes_peak,
                        "peak_over_budget": res.shared_bytes_peak / budget,
                        "rollbacks": sum(1 for e in evictions if e[2] == "rollback"),
                        "limit_drops": sum(1 for e in evictions if e[2] != "rollback"),
                        "evicted_bytes": sum(e[3] for e in evictions),
                        "node_reruns": reruns,
                    }
                    per.setdefault(policy, []).append(row)
                    out.row(row)
                    del res
            med = {k: statistics.median_low([r["seconds"] for r in v]) for k, v in per.items()}
            summary: dict[str, Any] = {"kind": "summary", "case": "eviction", "work": work}
            for k, v in med.items():
                summary[f"{k.replace('-', '_')}_seconds"] = v
            if "rollback" in med and "limit-drop" in med:
                summary["rollback_over_limit_drop"] = med["limit-drop"] / med["rollback"]
            if "adaptive" in med:
                best = min(med.get("rollback", np.inf), med.get("limit-drop", np.inf))
                summary["adaptive_over_best"] = best / med["adaptive"]
            out.row(summary)
    finally:
        shutil.rmtree(spill, ignore_errors=True)


# --------------------------------------------------------------------------------------------
# dabstep: the five DABstep-shaped DAGs (attune.bench.dabstep), one at a time and all together.


def _dabstep(args: argparse.Namespace, out: _Out) -> None:
    import shutil

    from attune.bench import dabstep

    work = tempfile.mkdtemp(prefix="attune-dag-bench-")
    root = args.root or default_root()
    cache_root = os.path.join(root, "attune-decache-dabstep")
    wpool = None
    try:
        paths = dabstep.write_tables(work, args.payments_rows)
        engines: list[tuple[str, str, str, bool]] = []  # label, transport, pool, reuse
        for label, transport, _producer, pool, reuse in _variants(args, arena=True):
            if label in ("sipc:arena", "sipc:copy"):
                continue  # no arena in these nodes; the pool's ablation is the chain's
            engines.append((label, transport, pool, reuse))
        if _ray_or_none(args, out) is not None:
            engines.append(("ray", "ray", "default", False))
            dabstep.build(5, paths).run(mode="ray")  # start Ray's workers (untimed)
        wpool = _worker_pool([(*e[:3], "", e[3]) for e in engines], args)
        if wpool is not None:  # start its workers (untimed), as Ray's
            dabstep.build(5, paths).run(pool=wpool, measure_memory=False)
        _dabstep_timed(args, out, paths, engines, cache_root, wpool)
    finally:
        if wpool is not None:
            wpool.close()
        DeCache(cache_root).clear()
        shutil.rmtree(work, ignore_errors=True)


def _dabstep_timed(args, out, paths, engines, cache_root, wpool) -> None:
    from attune.bench import dabstep

    for workload in args.workloads:
        per: dict[str, list[dict[str, Any]]] = {}
        for rep in range(args.repeat):
            # Each repeat starts with another engine: whatever a run leaves behind (Ray's
            # store and workers, memory to compact for huge pages) falls on every engine in
            # turn, not always on the first.
            k = rep % len(engines)
            for label, transport, pool, reuse in engines[k:] + engines[:k]:
                # DeCache is Kelvin's: the SIPC engines load through it (emptied before
                # every run, so each run decodes each table once); the peers decode in
                # every load node.
                cache = DeCache(cache_root) if transport == "sipc" else None
                if cache is not None:
                    cache.clear()  # its files are recycled (see recycle_bytes_max)
                if reuse == "no-recycle":
                    recycle.release()  # nor does it take what the other contenders dropped
                if workload == "all":
                    dag = dabstep.build_all(paths, cache)
                else:
                    dag = dabstep.build(int(workload), paths, cache)
                cpu0 = _tree_cpu_seconds()
                res = _run_contender(dag, transport, pool, reuse, wpool, args.root)
                row: dict[str, Any] = {
                    "kind": "dabstep",
                    "workload": workload,
                    "engine": label,
                    "nodes": len(dag.nodes),
                    "repeat": rep,
                    "seconds": res.seconds,
                    "cpu_seconds": _tree_cpu_seconds() - cpu0,
                }
                if transport != "ray":
                    tot = res.totals()
                    row["bytes_copied"] = tot["read_bytes_copied"] + tot["write_bytes_copied"]
                    row["output_file_bytes"] = tot["output_file_bytes"]
                    row["shared_bytes_peak"] = tot["shared_bytes_peak"]
                row.update(_dabstep_phases(res))
                per.setdefault(label, []).append(row)
                out.row(row)
                del res
        head = {"kind": "summary", "case": "dabstep", "workload": workload}
        _summary(out, head, per, "seconds")
        if "sipc:reuse" in per:
            head = {"kind": "summary", "case": "dabstep-reuse", "workload": workload}
            _summary(out, head, per, "seconds", base="sipc:reuse")
        if "sipc:persist" in per:
            head = {"kind": "summary", "case": "dabstep-persist", "workload": workload}
            _summary(out, head, per, "seconds", base="sipc:persist")
        phases: dict[str, Any] = {"kind": "summary", "case": "dabstep-phases", "workload": workload}
        for label, rows in per.items():
            tag = label.replace("-", "_").replace(":", "_")
            for k in PHASE_FIELDS:
                vals = [r[k] for r in rows if r.get(k) is not None]
                if vals:
                    phases[f"{tag}_{k}"] = statistics.median_low(vals)
        out.row(phases)


#: Per-run fields of :func:`_dabstep_phases` (medians per engine in the `dabstep-phases` row).
PHASE_FIELDS = (
    "first_start_seconds",
    "payments_done_seconds",
    "preprocess_done_seconds",
    "wide_phase_seconds",
    "payments_cpu_seconds",
    "preprocess_cpu_seconds",
    "compute_cpu_seconds",
)


def _dabstep_phases(res: RunResult) -> dict[str, Any]:
    """Where a run's wall time went, from its nodes' timeline (``started_at``...; one clock for
    every process): when the first node started (worker start and dispatch), when the payments
    load (the decode, or a DeCache fill) and the last preprocessing node ended (the sequential
    part every DAG starts with), and how long the wide phase of compute nodes took after that;
    with the CPU seconds of the node calls per phase. A node ends when its output is shared
    (SIPC) or when its function returned (Ray: its put into the object store is not in it)."""
    from attune.bench.dabstep import phase_of

    t0 = res.started_at
    if not res.nodes or not t0:
        return {}
    ends: dict[str, float] = {}
    cpu: dict[str, float] = {}
    first = min(st.get("started_at", t0) for st in res.nodes.values()) - t0
    payments = 0.0
    for name, st in res.nodes.items():
        ph = phase_of(name)
        end = st.get("ended_at", st.get("compute_ended_at", t0)) - t0
        ends[ph] = max(ends.get(ph, 0.0), end)
        cpu[ph] = cpu.get(ph, 0.0) + st.get("compute_cpu_seconds", 0.0)
        if ph == "load" and name.rsplit(".", 1)[-1] == "payments":
            payments = max(payments, end)
            cpu["payments"] = cpu.get("payments", 0.0) + st.get("compute_cpu_seconds", 0.0)
    pre_done = ends.get("preprocess", ends.get("load", 0.0))
    return {
        "first_start_seconds": first,
        "payments_done_seconds": payments,
        "preprocess_done_seconds": pre_done,
        "wide_phase_seconds": max(0.0, res.seconds - pre_done),
        "payments_cpu_seconds": cpu.get("payments", 0.0),
        "preprocess_cpu_seconds": cpu.get("preprocess", 0.0),
        "compute_cpu_seconds": cpu.get("compute", 0.0),
    }


# --------------------------------------------------------------------------------------------


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="attune bench dag", description=__doc__.split("\n")[0])
    p.add_argument(
        "case", choices=("resharing", "chain", "decache", "dabstep", "eviction", "ecosystem")
    )
    p.add_argument(
        "--ops", default=",".join(INT_OPS + STR_OPS), help="resharing: operations (default: all)"
    )
    p.add_argument(
        "--column-mib",
        type=int,
        default=32,
        help="MiB per integer column (resharing, chain; default 32)",
    )
    p.add_argument("--columns", type=int, default=4, help="integer columns (default 4)")
    p.add_argument(
        "--string-rows",
        type=int,
        default=200_000,
        help="rows of the 100-byte string tables (default 200000)",
    )
    p.add_argument("--length", type=int, default=10, help="chain: nodes incl. load (default 10)")
    p.add_argument(
        "--sipc-variants",
        default="pool,fork,copy,arena,reuse,bump,shared-seg",
        help="SIPC contenders: pool (pyarrow allocates from shared files; nodes in workers "
        "forked for the run, as DAG.run() by default), fork (the same, a fork per node), copy "
        "(pyarrow's own pool), arena (numpy into the node's arena; chain only), reuse (the pool in reused "
        "worker processes; chain, dabstep), bump (reuse without the pool's reuse of freed "
        "memory), persist (the pool in a WorkerPool's workers, which outlive runs; chain, "
        "dabstep), shared-seg (the pool with large blocks in the shared bump segment: the "
        "ablation of their own segments; resharing), no-recycle (the pool without recycling "
        "dropped tables' files: the ablation; dabstep); default "
        "pool,fork,copy,arena,reuse,bump,shared-seg",
    )
    p.add_argument("--dags", default="1,5,10,20", help="decache: parallel DAG counts")
    p.add_argument(
        "--lengths", default="2,4,6,10", help="ecosystem: chain lengths incl. load (2-10)"
    )
    p.add_argument(
        "--kinds",
        default=",".join(ECOSYSTEM_KINDS),
        help="ecosystem: libraries the nodes cycle through (numpy, pyarrow, duckdb, sklearn; "
        "sklearn is left out when scikit-learn is not installed)",
    )
    p.add_argument(
        "--payments-rows",
        type=int,
        default=2_000_000,
        help="dabstep: rows of the synthetic payments table (default 2000000)",
    )
    p.add_argument(
        "--workloads",
        default="1,2,3,4,5,all",
        help="dabstep: DAGs 1-5 one at a time, and `all` (the five as one workload)",
    )
    p.add_argument(
        "--fork-per-node",
        action="store_true",
        help="decache: a process per node in every DAG (default: each DAG's nodes share one "
        "reused worker, with the cache on and off alike)",
    )
    p.add_argument(
        "--drivers",
        choices=("processes", "pool"),
        default="processes",
        help="decache: `processes` (every DAG its own driver process and worker, started per "
        "run) or `pool` (the N DAGs on N threads of this process, nodes in a WorkerPool's "
        "workers, which outlive runs); default processes",
    )
    p.add_argument("--trees", type=int, default=4, help="eviction: DAGs (trees) in the workload")
    p.add_argument("--depth", type=int, default=4, help="eviction: levels per tree (default 4)")
    p.add_argument(
        "--work",
        default="1,8,32",
        help="eviction: additions over a whole column per node (default 1,8,32)",
    )
    p.add_argument(
        "--budget-fraction",
        type=float,
        default=0.5,
        help="eviction: memory budget over the workload's distinct data (default 0.5)",
    )
    p.add_argument(
        "--policies",
        default="off,rollback,limit-drop,adaptive",
        help="eviction: policies (default off,rollback,limit-drop,adaptive)",
    )
    p.add_argument(
        "--spill-dir",
        default=None,
        help="eviction: disk directory for limit-drop (default /var/tmp)",
    )
    p.add_argument(
        "--transports", default=",".join(TRANSPORTS), help=f"peers (default {','.join(TRANSPORTS)})"
    )
    p.add_argument("--peers", default="", help="extra peers: ray (needs the `ray` extra)")
    p.add_argument("--repeat", type=int, default=1)
    p.add_argument("--root", default=None, help="tmpfs directory for the runs (default /dev/shm)")
    p.add_argument("--out", default=None, help="append JSON rows to this file")
    p.add_argument("--json", action="store_true", help="print the rows on stdout")
    p.add_argument("--no-progress", action="store_true", help="accepted for symmetry")
    args = p.parse_args(argv)
    args.ops = [o for o in args.ops.split(",") if o]
    bad = [o for o in args.ops if o not in INT_OPS + STR_OPS]
    if bad:
        p.error(f"unknown operation {bad[0]!r} (one of: {', '.join(INT_OPS + STR_OPS)})")
    args.transports = [t for t in args.transports.split(",") if t]
    bad = [t for t in args.transports if t not in TRANSPORTS]
    if bad:
        p.error(f"unknown transport {bad[0]!r} (one of: {', '.join(TRANSPORTS)})")
    args.sipc_variants = [x for x in args.sipc_variants.split(",") if x]
    variants = ("pool", "fork", "copy", "arena", "reuse", "bump", "persist", "shared-seg")
    variants += ("no-recycle",)
    if [x for x in args.sipc_variants if x not in variants]:
        p.error(f"--sipc-variants takes {', '.join(variants)}")
    args.peers = [x for x in args.peers.split(",") if x]
    if [x for x in args.peers if x != "ray"]:
        p.error("--peers takes: ray")
    args.dags = [int(x) for x in args.dags.split(",") if x]
    args.lengths = [int(x) for x in args.lengths.split(",") if x]
    if [x for x in args.lengths if not 2 <= x <= 100]:
        p.error("--lengths takes chain lengths from 2 to 100")
    args.kinds = [x for x in args.kinds.split(",") if x]
    if not args.kinds or [x for x in args.kinds if x not in ECOSYSTEM_KINDS]:
        p.error(f"--kinds takes {', '.join(ECOSYSTEM_KINDS)}")
    args.work = [int(x) for x in args.work.split(",") if x]
    args.policies = [x for x in args.policies.split(",") if x]
    if [x for x in args.policies if x not in ("off", "rollback", "limit-drop", "adaptive")]:
        p.error("--policies takes off, rollback, limit-drop, adaptive")
    if args.trees < 1 or args.depth < 2 or not 0 < args.budget_fraction:
        p.error("--trees must be at least 1, --depth at least 2, --budget-fraction positive")
    args.workloads = [x for x in args.workloads.split(",") if x]
    if [x for x in args.workloads if x not in ("1", "2", "3", "4", "5", "all")]:
        p.error("--workloads takes 1, 2, 3, 4, 5 and all")
    if args.length < 2 or args.repeat < 1 or args.column_mib < 1:
        p.error("--length must be at least 2, --repeat and --column-mib at least 1")
    from attune.pipelines.dag import exit_on_sigterm

    exit_on_sigterm()  # a terminated benchmark still removes its runs' shared files
    o = _Out(args.out, args.json, argv)
    try:
        cases = {"resharing": _resharing, "chain": _chain, "decache": _decache}
        cases["dabstep"] = _dabstep
        cases["eviction"] = _eviction
        cases["ecosystem"] = _ecosystem
        cases[args.case](args, o)
    finally:
        o.close()
        recycle.release()  # the recycled files of the benchmark's runs
    return 0

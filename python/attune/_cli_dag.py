"""CLI verb `attune dag`: run a DAG module, inspect and clean shared pipeline state.

* ``attune dag run FILE.py`` runs the DAG a Python file defines (a module-level ``dag``, or a
  ``build()`` function returning one), nodes in worker processes forked for the run (other
  process models with ``--processes``), and prints per node the
  seconds, bytes copied and reshared; ``--json`` prints the run's measurements as one object.
* ``attune dag stats`` lists DeCache entries (source, bytes, live references) and run
  directories (with whether their driver is alive).
* ``attune dag clean`` removes run directories left by dead drivers and, with ``--evict``,
  unreferenced DeCache entries.
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys

from attune.cli import add_output_flags, progress


def register(sub) -> None:
    p = sub.add_parser(
        "dag",
        help="zero-copy Arrow pipelines: run a DAG module, show or clean shared state",
        description="Run DAGs of Python functions Table -> Table in worker processes, tables "
        "passed by reference (SIPC); inspect the shared loader cache (DeCache).",
    )
    verbs = p.add_subparsers(dest="dag_verb", metavar="COMMAND", required=True)

    r = verbs.add_parser("run", help="run the DAG a Python file defines (`dag` or `build()`)")
    r.add_argument("module", metavar="FILE.py", help="Python file defining `dag` or `build()`")
    r.add_argument(
        "--outputs",
        default=None,
        help="comma-separated node names (default: sinks); only the nodes they need run",
    )
    r.add_argument(
        "--start-method",
        choices=("fork", "spawn"),
        default="fork",
        help="how node processes start (default fork; spawn needs module-level functions)",
    )
    r.add_argument(
        "--transport",
        choices=("sipc", "ipc-file", "ipc-mmap"),
        default="sipc",
        help="how tables pass between nodes (default sipc; the others are the baselines)",
    )
    r.add_argument("--parallel", type=int, default=None, help="nodes at once (default: CPUs)")
    r.add_argument("--root", default=None, help="directory for shared files (default /dev/shm)")
    r.add_argument("--checksums", action="store_true", help="CRC-32 every shared buffer")
    r.add_argument("--inline", action="store_true", help="run every node in this process")
    r.add_argument(
        "--processes",
        choices=("shared", "run", "node"),
        default=None,
        help="which processes run the nodes: run (default: workers started for the run), "
        "shared (this command's worker pool) or node (a process per node)",
    )
    r.add_argument(
        "--measure-memory",
        action="store_true",
        help="every node reads its smaps (PSS fields, memory peak): milliseconds per node",
    )
    r.add_argument(
        "--reuse-processes",
        action="store_true",
        help="the same as --processes run",
    )
    r.add_argument(
        "--mode",
        choices=("process", "ray"),
        default="process",
        help="process (default) or ray: the same nodes as Ray tasks (needs the ray extra)",
    )
    add_output_flags(r, json_help="print the run's measurements as one JSON object")
    r.set_defaults(func=_run)

    s = verbs.add_parser("stats", help="DeCache entries and run directories")
    s.add_argument("--root", default=None, help="directory of run files (default /dev/shm)")
    s.add_argument(
        "--cache-root", default=None, help="DeCache directory (default ROOT/attune-decache)"
    )
    add_output_flags(s, json_help="print one JSON object")
    s.set_defaults(func=_stats)

    c = verbs.add_parser("clean", help="remove run directories of dead drivers")
    c.add_argument("--root", default=None, help="directory of run files (default /dev/shm)")
    c.add_argument(
        "--cache-root", default=None, help="DeCache directory (default ROOT/attune-decache)"
    )
    c.add_argument("--evict", action="store_true", help="also evict unreferenced DeCache entries")
    add_output_flags(c, json_help="print one JSON object")
    c.set_defaults(func=_clean)


def _load_dag(path: str):
    from attune.pipelines import DAG, PipelineError

    if not os.path.isfile(path):
        raise PipelineError(f"no such DAG module: {path}")
    name = os.path.splitext(os.path.basename(path))[0]
    if not name.isidentifier():
        raise PipelineError(f"{path}: the file name must be a Python module name")
    # Importable by name from its directory, so that spawned nodes (which import the functions
    # they run by module and name; multiprocessing hands them our sys.path) find it too.
    folder = os.path.dirname(os.path.abspath(path))
    if folder not in sys.path:
        sys.path.insert(0, folder)
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise PipelineError(f"cannot import {path}")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    dag = getattr(mod, "dag", None)
    if dag is None and callable(getattr(mod, "build", None)):
        dag = mod.build()
    if not isinstance(dag, DAG):
        raise PipelineError(f"{path} defines neither `dag` (a DAG) nor `build()` returning one")
    return dag


def _run(args) -> int:
    from attune.pipelines.dag import exit_on_sigterm

    exit_on_sigterm()  # a terminated run still removes its shared files
    dag = _load_dag(args.module)
    outputs = [o for o in args.outputs.split(",") if o] if args.outputs else None
    if args.inline:
        tables = dag.run_inline(outputs)
        if args.json:
            print(
                json.dumps(
                    {
                        "outputs": {
                            k: {"rows": t.num_rows, "columns": t.num_columns}
                            for k, t in tables.items()
                        }
                    }
                )
            )
        else:
            for k, t in tables.items():
                print(f"{k}: {t.num_rows} rows, {t.num_columns} columns")
        return 0
    bar = progress(args, total=len(dag.nodes), desc="nodes", unit="node")
    try:
        res = dag.run(
            outputs,
            start_method=args.start_method,
            transport=args.transport,
            parallel=args.parallel,
            root=args.root,
            checksums=args.checksums,
            on_node_done=lambda name, stats: bar.update(1),
            mode=args.mode,
            processes=args.processes or ("run" if args.reuse_processes else None),
            measure_memory=args.measure_memory,
        )
    finally:
        bar.close()
    if args.json:
        print(json.dumps(res.to_json()))
        return 0
    print(f"{'node':<20} {'seconds':>8} {'copied MiB':>11} {'reshared MiB':>13} {'rows':>10}")
    for name, n in res.nodes.items():
        secs = n.get("read_seconds", 0) + n["compute_seconds"] + n.get("write_seconds", 0)
        print(
            f"{name:<20} {secs:>8.3f} {n.get('bytes_copied', 0) / 2**20:>11.1f} "
            f"{n.get('bytes_reshared', 0) / 2**20:>13.1f} {n['rows']:>10}"
        )
    tot = res.totals()
    print(
        f"run: {res.seconds:.3f} s, {tot['bytes_copied'] / 2**20:.1f} MiB copied, "
        f"{tot['bytes_reshared'] / 2**20:.1f} MiB reshared, shared files at most "
        f"{tot['shared_bytes_peak'] / 2**20:.1f} MiB"
    )
    for k, t in res.tables.items():
        print(f"output {k}: {t.num_rows} rows, {t.num_columns} columns")
    return 0


def _cache(args):
    from attune.pipelines import DeCache
    from attune.pipelines.dag import default_root

    root = args.cache_root or os.path.join(args.root or default_root(), "attune-decache")
    return DeCache(root)


def _stats(args) -> int:
    from attune.pipelines.dag import root_pages, run_directories

    entries = _cache(args).entries()
    runs = run_directories(args.root)
    pages = root_pages(args.root)
    if args.json:
        print(json.dumps({"decache": entries, "runs": runs, "root": pages}))
        return 0
    print(
        f"root: {pages['path']} ({pages['fstype']} at {pages['mount']}, huge pages: {pages['huge']})"
    )
    if pages["huge"] == "never":
        print(
            "  tmpfs here gives 4 KiB pages only: decodes and node outputs fault page by page. "
            f"As root, `mount -o remount,huge=within_size {pages['mount']}` (or a tmpfs of your "
            "own with huge=within_size as ATTUNE_PIPE_ROOT) lets them use 2 MiB pages."
        )
    print(f"DeCache: {len(entries)} entries, {sum(e['bytes'] for e in entries) / 2**20:.1f} MiB")
    for e in entries:
        print(f"  {e['key'][:12]} {e['bytes'] / 2**20:8.1f} MiB  refs {e['refs']}  {e['source']}")
    print(f"run directories: {len(runs)}")
    for r in runs:
        state = "running" if r["alive"] else "stale (driver gone)"
        print(f"  {r['path']} {r['bytes'] / 2**20:.1f} MiB  {state}")
    return 0


def _clean(args) -> int:
    from attune.pipelines.dag import remove_stale_runs

    removed = remove_stale_runs(args.root)
    freed = _cache(args).evict() if args.evict else 0
    if args.json:
        print(json.dumps({"removed_runs": removed, "decache_bytes_freed": freed}))
    else:
        print(f"removed {len(removed)} stale run directories; DeCache freed {freed} bytes")
    return 0

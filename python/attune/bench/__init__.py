"""Benchmarks of Attune and its peers: run the ``attune-bench`` harness and report its results.

The harness itself is the Rust binary ``attune-bench`` (crate ``crates/attune-bench``); this package
finds it, runs it with a tqdm progress bar (:func:`run`), and turns its JSON-lines results into a
markdown report with plots (:mod:`attune.bench.report`).

Thread-safety: functions here hold no shared state; :func:`run` may be called from one thread at a
time per process (it owns the terminal's progress bars while it runs).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
from pathlib import Path

from attune import Error

__all__ = ["BenchError", "find_binary", "run"]

#: Environment variable naming the harness binary explicitly.
BIN_ENV = "ATTUNE_BENCH_BIN"
BIN_NAME = "attune-bench"


class BenchError(Error):
    """A benchmark could not be run or its results could not be read."""


def find_binary() -> Path:
    """Locates ``attune-bench``: $ATTUNE_BENCH_BIN, next to the Python executable (the venv's
    bin/, where ``make build`` copies it), the repository's target/release/, then $PATH."""
    env = os.environ.get(BIN_ENV)
    if env:
        p = Path(env)
        if p.is_file() and os.access(p, os.X_OK):
            return p
        raise BenchError(f"{BIN_ENV}={env} is not an executable file")
    candidates = [Path(sys.executable).parent / BIN_NAME]
    repo = Path(__file__).resolve().parents[3]
    candidates.append(repo / "target" / "release" / BIN_NAME)
    for c in candidates:
        if c.is_file() and os.access(c, os.X_OK):
            return c
    found = shutil.which(BIN_NAME)
    if found:
        return Path(found)
    raise BenchError(
        f"{BIN_NAME} not found (looked in {', '.join(str(c) for c in candidates)} and $PATH); "
        f"run `make build` or set {BIN_ENV}"
    )


def _progress_bars(stream, show: bool) -> None:
    """Turns the harness's ``PROGRESS {json}`` stderr lines into tqdm bars; other lines pass on."""
    from tqdm import tqdm

    bar = None
    key = None
    for raw in stream:
        line = raw.rstrip("\n")
        if line.startswith("PROGRESS "):
            try:
                p = json.loads(line[len("PROGRESS ") :])
            except json.JSONDecodeError:
                continue
            if not show:
                continue
            k = (p.get("engine"), p.get("workload"))
            if k != key:
                if bar is not None:
                    bar.close()
                key = k
                bar = tqdm(
                    total=p.get("total") or None,
                    desc=f"{k[0]} {k[1]}",
                    unit="op",
                    unit_scale=True,
                    leave=False,
                    file=sys.stderr,
                )
            if bar is not None:
                bar.n = int(p.get("done", 0))
                bar.refresh()
        else:
            if bar is not None:
                bar.clear()
            print(line, file=sys.stderr)
    if bar is not None:
        bar.close()


def run(args: list[str], progress: bool = True) -> int:
    """Runs ``attune-bench ARGS`` and returns its exit code; its row summaries go to stdout and a
    tqdm bar (when ``progress``) to stderr. Raises :class:`BenchError` if it cannot start."""
    binary = find_binary()
    argv = [str(binary), *args]
    runs_work = bool(args) and args[0] in ("micro", "ycsb") and "--help" not in args
    if runs_work and not any(a == "--progress" or a.startswith("--progress=") for a in args):
        argv += ["--progress", "lines"]
    try:
        proc = subprocess.Popen(
            argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, bufsize=1
        )
    except OSError as exc:
        raise BenchError(f"cannot run {binary}: {exc}") from exc
    t = threading.Thread(target=_progress_bars, args=(proc.stderr, progress), daemon=True)
    t.start()
    assert proc.stdout is not None
    for line in proc.stdout:
        sys.stdout.write(line)
        sys.stdout.flush()
    code = proc.wait()
    t.join()
    return code

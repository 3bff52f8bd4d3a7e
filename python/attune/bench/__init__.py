"""Benchmarks of Attune and its peers: run the ``attune-bench`` harness and report its results.

The harness itself is the Rust binary ``attune-bench`` (crate ``crates/attune-bench``; one binary,
one subcommand per component: ``kv micro|ycsb|engines``, ``hash``, ``cache-sim``, ``cache-kv``,
``learn``, ``workload``, ``lookup-steps``, ``machine``); this package finds it, runs it with a tqdm
progress bar (:func:`run`), describes the machine the way every results row does
(:func:`machine`), and turns JSON-lines results into a markdown report with plots
(:mod:`attune.bench.report`). SplitDF, a Python component, is measured by the scripts under
``benches/splitdf/`` (``attune bench splitdf``), whose rows carry the same :func:`machine`.

Thread-safety: functions here hold no shared state; :func:`run` may be called from one thread at a
time per process (it owns the terminal's progress bars while it runs).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
from pathlib import Path

from attune import Error

__all__ = ["BenchError", "find_binary", "git_head", "machine", "run"]

#: Environment variable naming the harness binary explicitly.
BIN_ENV = "ATTUNE_BENCH_BIN"
BIN_NAME = "attune-bench"


class BenchError(Error):
    """A benchmark could not be run or its results could not be read. ``exit_code`` is the
    status the CLI exits with (the harness's own when it failed, else 1)."""

    def __init__(self, message: str, exit_code: int = 1) -> None:
        super().__init__(message)
        self.exit_code = exit_code


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


def _progress_bars(stream, show: bool, kept: list[str] | None = None) -> None:
    """Turns the harness's ``PROGRESS {json}`` stderr lines into tqdm bars (when ``show``, and only
    on a terminal); other lines pass on to stderr, or into ``kept`` when it is given."""
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
                    disable=None,  # a terminal only: no bars in a redirected stderr
                )
            if bar is not None:
                bar.n = int(p.get("done", 0))
                bar.refresh()
        elif kept is not None:
            kept.append(line)
        else:
            if bar is not None:
                bar.clear()
            print(line, file=sys.stderr)
    if bar is not None:
        bar.close()


#: Which tracked paths make a checkout dirty (as ``attune-bench``'s ``machine::git_head``): all
#: but results rows and generated or prose pages.
DIRTY_PATHSPECS = (":(top)", ":(top,exclude)benches/results", ":(top,exclude)docs")


def git_head(path: Path | None = None) -> str | None:
    """``HEAD`` of the git checkout holding ``path`` (default: this package's sources), with
    ``-dirty`` appended when tracked files outside ``benches/results/`` and ``docs/`` differ from
    it; None outside a checkout or without git."""
    where = str(path if path is not None else Path(__file__).resolve().parent)

    def git(*args: str) -> str | None:
        try:
            out = subprocess.run(
                ["git", "-C", where, *args], capture_output=True, text=True, check=False
            )
        except OSError:
            return None
        return out.stdout.strip() if out.returncode == 0 else None

    head = git("rev-parse", "--verify", "HEAD")
    if not head:
        return None
    changed = git("status", "--porcelain", "--untracked-files=no", "--", *DIRTY_PATHSPECS)
    return f"{head}-dirty" if changed else head


def machine() -> dict:
    """The machine and build as every results row records them (``attune-bench machine --json``):
    CPU model, logical CPUs, memory, kernel, git commit, rustc, build features, load average.
    ``git_commit`` is the commit of this package's checkout now (:func:`git_head`; the Python code
    and native module that produce Python-driven rows live there), else the harness's own."""
    binary = find_binary()
    try:
        out = subprocess.run(
            [str(binary), "machine", "--json"], capture_output=True, text=True, check=True
        )
        mach = json.loads(out.stdout)
    except (OSError, subprocess.CalledProcessError, json.JSONDecodeError) as exc:
        raise BenchError(f"`{binary} machine --json` failed: {exc}") from exc
    head = git_head()
    if head:
        mach["git_commit"] = head
    return mach


def write_rows(rows: list[dict], command: str, mach: dict, out: str | None) -> list[str]:
    """Stamps each results row with the command and machine that produced it, appends the rows as
    JSON lines to ``out`` (when given; the harness's files only grow) and returns the lines."""
    for row in rows:
        row["command"] = command
        row["machine"] = mach
    lines = [json.dumps(row) for row in rows]
    if out:
        path = Path(out)
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("a") as f:
            f.write("\n".join(lines) + "\n")
    return lines


@contextlib.contextmanager
def _term_as_interrupt():
    """SIGTERM raises KeyboardInterrupt meanwhile (on the main thread), so that :func:`run` passes
    it on to the harness instead of dying and leaving the harness running."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum, frame):
        raise KeyboardInterrupt

    old = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, old)


#: Subcommands (after ``kv`` for the engine's) that do work and take the output flags.
_WORK = ("micro", "ycsb", "hash", "cache-sim", "cache-kv", "learn", "workload", "lookup-steps")


def run(args: list[str], progress: bool = True, json_errors: bool = False) -> int:
    """Runs ``attune-bench ARGS`` and returns its exit code; its row summaries go to stdout and a
    tqdm bar (when ``progress``, and only on a terminal) to stderr. Raises :class:`BenchError` if
    it cannot start, and, with ``json_errors``, if it fails: then its stderr becomes the error's
    message (the CLI prints it as the JSON error object) and its status the error's exit code."""
    binary = find_binary()
    argv = [str(binary), *args]
    verb = args[1] if len(args) > 1 and args[0] == "kv" else (args[0] if args else "")
    quiet = {"--help", "-h", "--json", "--no-progress"}
    runs_work = verb in _WORK and not quiet.intersection(args)
    if runs_work and not any(a == "--progress" or a.startswith("--progress=") for a in args):
        argv += ["--progress", "lines"]
    try:
        proc = subprocess.Popen(
            argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, bufsize=1
        )
    except OSError as exc:
        raise BenchError(f"cannot run {binary}: {exc}") from exc
    kept: list[str] | None = [] if json_errors else None
    t = threading.Thread(target=_progress_bars, args=(proc.stderr, progress, kept), daemon=True)
    t.start()
    assert proc.stdout is not None
    try:
        with _term_as_interrupt():
            for line in proc.stdout:
                sys.stdout.write(line)
                sys.stdout.flush()
            code = proc.wait()
    except KeyboardInterrupt:
        # Ctrl-C or SIGTERM: the harness kills its children and removes its temporary directory
        # on SIGTERM; wait for that before the CLI reports the interrupt.
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
        raise
    t.join()
    if kept is not None:
        if code != 0:
            message = "\n".join(kept).strip()
            if code < 0:
                message = f"{message}\n{BIN_NAME} killed by signal {-code}".strip()
            raise BenchError(
                message or f"{BIN_NAME} exited with {code}",
                exit_code=128 - code if code < 0 else code,
            )
        for line in kept:
            print(line, file=sys.stderr)
    return code

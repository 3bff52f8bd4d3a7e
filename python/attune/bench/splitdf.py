"""``attune bench splitdf``: the one entry point of the SplitDF benchmark scripts.

SplitDF is a Python component, so its benchmark is Python too: the scripts under
``benches/splitdf/`` of a source checkout (they generate data sets and need the repository). This
module dispatches ``attune bench splitdf VERB ARGS`` to ``benches/splitdf/<verb>.py ARGS`` with this
interpreter; the default verb is ``run`` (the full benchmark). The scripts take the rows' machine
description from ``attune-bench machine --json`` (:func:`attune.bench.machine`), so SplitDF rows
carry the same fields as every other results row.

Thread-safety: :func:`run` blocks until the script exits; call it from one thread.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from attune.bench import BenchError

#: Verbs and their scripts (``benches/splitdf/<script>.py``).
SCRIPTS = {
    "run": "run",
    "column-sizes": "column_sizes",
    "explain": "explain",
    "fact-layout": "fact_layout",
    "key-order": "key_order",
    "memory-probe": "memory_probe",
    "join-elimination": "join_elimination",
    "real-tables": "real_tables",
    "report": "report",
}

USAGE = (
    "usage: attune bench splitdf [VERB] [ARGS...]\n"
    "verbs: " + ", ".join(SCRIPTS) + " (default run; `VERB --help` shows a script's options)"
)


def scripts_dir() -> Path:
    """``benches/splitdf`` of the source checkout this package was installed from."""
    here = Path(__file__).resolve()
    for root in here.parents:
        d = root / "benches" / "splitdf"
        if (d / "run.py").is_file():
            return d
    raise BenchError(
        "attune bench splitdf needs a source checkout (benches/splitdf/ not found above "
        f"{here.parent})"
    )


def run(argv: list[str]) -> int:
    """Runs one SplitDF script and returns its exit status."""
    if argv and argv[0] in ("-h", "--help"):
        print(USAGE)
        return 0
    verb = "run"
    if argv and not argv[0].startswith("-"):
        verb, argv = argv[0], argv[1:]
    if verb not in SCRIPTS:
        print(f"attune bench splitdf: unknown verb {verb!r}\n{USAGE}", file=sys.stderr)
        return 2
    script = scripts_dir() / f"{SCRIPTS[verb]}.py"
    try:
        return subprocess.run([sys.executable, str(script), *argv], check=False).returncode
    except OSError as exc:
        raise BenchError(f"cannot run {script}: {exc}") from exc

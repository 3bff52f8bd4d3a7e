"""Optional dependencies of CLI verbs, checked before a verb starts its work.

Plots need matplotlib, ``attune split`` needs DuckDB, pyarrow and sqlglot; none of them is a
dependency of the ``attune`` package itself. A verb calls :func:`require` first, so a missing
package is a clear :class:`MissingDependencyError` (an :class:`attune.Error`: the CLI prints it
without a traceback, or as JSON under ``--json``) naming what to install, and never a
ModuleNotFoundError after minutes of work.

Thread-safety: import-time state only (the import system's own lock).
"""

from __future__ import annotations

import importlib

from attune import Error

#: The pip extra of pyproject.toml that installs every optional dependency.
EXTRA = "dev"

#: Import name -> pip package name, where they differ or for the message.
PIP_NAMES = {
    "matplotlib": "matplotlib",
    "duckdb": "duckdb",
    "pyarrow": "pyarrow",
    "sqlglot": "sqlglot",
    "ibis": "ibis-framework",
}


class MissingDependencyError(Error):
    """An optional package a verb needs is not installed."""


def require(what: str, *modules: str) -> None:
    """Imports ``modules`` or raises :class:`MissingDependencyError` saying that ``what`` (e.g.
    "attune cache mrc --plot") needs them and how to install them."""
    missing = []
    for name in modules:
        try:
            importlib.import_module(name)
        except ImportError:
            missing.append(name)
    if missing:
        pkgs = " ".join(PIP_NAMES.get(m, m) for m in missing)
        raise MissingDependencyError(
            f"{what} needs {', '.join(missing)}, which is not installed: "
            f"pip install {pkgs} (every optional package is in the `{EXTRA}` extra: "
            f"pip install '.[{EXTRA}]' in the repository, as `make build` does)"
        )

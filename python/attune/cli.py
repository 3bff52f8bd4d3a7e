"""The `attune` command line: one verb per capability, each with --help and --json.

Each verb lives in its own module that exposes ``register(subparsers)``; the module list below is the
only place that names them, so that adding a capability is adding one line here.
"""

from __future__ import annotations

import argparse
import importlib
import sys

# (module, doc) pairs; each module defines register(subparsers) which adds its verb(s) and sets
# `func` on the parser via set_defaults(func=...). func(args) returns the process exit code.
VERB_MODULES: tuple[str, ...] = (
    "attune._cli_kv",
    "attune._cli_workload",
    "attune._cli_bench",
    "attune._cli_split",
    "attune._cli_cache",
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="attune",
        description="Attune: a storage stack that learns its data, its workload and its devices.",
    )
    parser.add_argument("--version", action="store_true", help="print the version and exit")
    sub = parser.add_subparsers(dest="verb", metavar="VERB")
    for name in VERB_MODULES:
        importlib.import_module(name).register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.version:
        from attune import __version__

        print(__version__)
        return 0
    func = getattr(args, "func", None)
    if func is None:
        parser.print_help()
        return 2
    from attune import Error

    try:
        return int(func(args) or 0)
    except Error as exc:  # every engine error is an attune.Error: print it, no traceback
        print(f"attune: error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("attune: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())

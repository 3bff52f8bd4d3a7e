"""The `attune` command line: one verb per capability, each with --help and --json.

Every verb takes the same output flags, added by :func:`add_output_flags`: ``--json`` (a flag:
machine-readable output on stdout and nothing else there), ``--no-progress``, and ``--out PATH``
where the verb writes a file. Progress bars come from :func:`progress`: on stderr, shown when
stderr is a terminal, off with ``--no-progress`` or ``--json``, the same in every verb.

Each verb lives in its own module that exposes ``register(subparsers)``; the module list below is
the only place that names them, so that adding a capability is adding one line here.

Failures are handled here, once for every verb:

* an :class:`attune.Error`, a file that cannot be opened or written (:class:`OSError`) or a bad
  argument prints ``attune: error: ...`` on stderr, no traceback, and exits 1 (2 for arguments);
* with ``--json`` the same failure prints one JSON object on **stdout** instead,
  ``{"error": "<exception class>", "message": "..."}`` (a verb may add fields by setting
  ``json_extra`` on the exception), so a consumer of ``--json`` always reads JSON, and the exit
  status says it failed;
* a closed output pipe (``attune kv scan DB | head``) ends the verb quietly with status 141
  (128 + SIGPIPE, what a shell reports for tools killed by the signal);
* Ctrl-C exits 130.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import sys

# (module, doc) pairs; each module defines register(subparsers) which adds its verb(s) and sets
# `func` on the parser via set_defaults(func=...). func(args) returns the process exit code.
VERB_MODULES: tuple[str, ...] = (
    "attune._cli_kv",
    "attune._cli_workload",
    "attune._cli_bench",
    "attune._cli_split",
    "attune._cli_cache",
    "attune._cli_pipes",
    "attune._cli_hash_db",
    "attune._cli_place",
    "attune._cli_embed",
    "attune._cli_io",
    "attune._cli_dag",
    "attune._cli_device",
)

#: Exit status after the reader of stdout went away (128 + SIGPIPE).
EXIT_BROKEN_PIPE = 141


def add_output_flags(
    parser: argparse.ArgumentParser,
    *,
    out: str | None = None,
    out_metavar: str = "PATH",
    out_required: bool = False,
    json_help: str = "machine-readable output: JSON on stdout, nothing else there",
) -> None:
    """Adds the output flags every verb shares to ``parser``: ``--json`` (a flag, ``args.json``),
    ``--no-progress`` (``args.no_progress``) and, when ``out`` (its help text) is given,
    ``--out PATH`` (``args.out``, None when not given unless ``out_required``)."""
    parser.add_argument("--json", action="store_true", help=json_help)
    parser.add_argument(
        "--no-progress",
        action="store_true",
        help="no progress bars (they are on stderr, shown only on a terminal, off under --json)",
    )
    if out is not None:
        parser.add_argument("--out", metavar=out_metavar, required=out_required, help=out)


def progress_enabled(args: argparse.Namespace) -> bool | None:
    """False under ``--json`` or ``--no-progress``; else None, which tqdm reads as "only on a
    terminal". Namespaces without the flags count as having them unset."""
    if getattr(args, "json", False) is True or getattr(args, "no_progress", False):
        return False
    return None


def progress(args: argparse.Namespace, *, enabled: bool = True, **tqdm_kwargs):
    """A tqdm bar on stderr for long work, switched by :func:`progress_enabled`; ``enabled=False``
    turns it off for a verb-specific reason (e.g. items going to the terminal). Takes tqdm's
    keyword arguments (``total``, ``desc``, ``unit``, ``leave``, ...)."""
    from tqdm import tqdm

    on = progress_enabled(args) if enabled else False
    return tqdm(disable=None if on is None else True, file=sys.stderr, **tqdm_kwargs)


#: Largest unsigned 64-bit integer: the bound of counts and seeds the Rust side takes as u64.
U64_MAX = 2**64 - 1
#: Largest unsigned 32-bit integer (YCSB field counts and lengths are u32).
U32_MAX = 2**32 - 1


def int_range(lo: int, hi: int | None = None):
    """An argparse ``type`` for an integer in ``lo..hi`` (``hi`` None: no upper bound); a value
    outside is rejected while parsing, so the message names the option and the allowed range."""

    def parse(text: str) -> int:
        try:
            n = int(text, 0) if text.strip().lower().startswith(("0x", "0o", "0b")) else int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
        if n < lo or (hi is not None and n > hi):
            allowed = f">= {lo}" if hi is None else f"{lo}..{hi}"
            raise argparse.ArgumentTypeError(f"{n} is out of range (allowed: {allowed})")
        return n

    parse.__name__ = "integer"
    return parse


#: Units of :func:`size_bytes` (DuckDB's spellings: powers of 1000 and of 1024).
_SIZE_UNITS = {
    "": 1,
    "b": 1,
    "kb": 10**3,
    "mb": 10**6,
    "gb": 10**9,
    "tb": 10**12,
    "kib": 2**10,
    "mib": 2**20,
    "gib": 2**30,
    "tib": 2**40,
}


def size_bytes(text: str) -> int:
    """An argparse ``type`` for a size: a positive integer with an optional unit (B, KB, MB, GB,
    TB, KiB, MiB, GiB, TiB; case-insensitive), returned in bytes."""
    import re

    m = re.fullmatch(r"\s*(\d+)\s*([A-Za-z]*)\s*", text)
    unit = m.group(2).lower() if m else None
    if m is None or unit not in _SIZE_UNITS:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a size (a number with an optional unit: B, KB, MB, GB, TB, "
            "KiB, MiB, GiB, TiB)"
        )
    n = int(m.group(1)) * _SIZE_UNITS[unit]
    if n <= 0:
        raise argparse.ArgumentTypeError(f"{text!r}: a size must be > 0")
    return n


size_bytes.__name__ = "size"


class UsageError(Exception):
    """A command line that argparse rejected (unknown option, missing or malformed argument)."""

    def __init__(self, parser: argparse.ArgumentParser, message: str) -> None:
        super().__init__(message)
        self.parser = parser


class _Parser(argparse.ArgumentParser):
    """argparse that raises :class:`UsageError` instead of exiting, so that :func:`main` can report
    it as JSON under ``--json``; sub-parsers are of the same class."""

    def error(self, message: str):  # type: ignore[override]
        raise UsageError(self, message)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="attune",
        description="Attune: a storage stack that learns its data, its workload and its devices.",
        epilog='With --json, a failure prints {"error": CLASS, "message": TEXT} on stdout and '
        "exits non-zero.",
    )
    parser.add_argument("--version", action="store_true", help="print the version and exit")
    sub = parser.add_subparsers(dest="verb", metavar="VERB")
    for name in VERB_MODULES:
        importlib.import_module(name).register(sub)
    return parser


def _silence_stdout() -> None:
    """Points stdout at /dev/null so that the interpreter's final flush of what is still buffered
    does not raise a second BrokenPipeError (the recipe of the Python signal documentation)."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass  # stdout without a descriptor (e.g. captured in-process): nothing is left to flush


def _report(exc: BaseException, as_json: bool) -> None:
    """One failure: a JSON object on stdout (``--json``) or ``attune: error: ...`` on stderr."""
    message = str(exc)
    if isinstance(exc, OSError) and exc.strerror:
        message = exc.strerror + (f": {exc.filename}" if exc.filename is not None else "")
    if as_json:
        obj = {"error": type(exc).__name__, "message": message}
        extra = getattr(exc, "json_extra", None)
        if isinstance(extra, dict):
            obj.update({k: v for k, v in extra.items() if k not in obj})
        print(json.dumps(obj), flush=True)
    else:
        detail = getattr(exc, "cli_detail", None)
        if isinstance(detail, str) and detail:
            print(detail.rstrip("\n"), file=sys.stderr)  # e.g. a failed node's traceback
        print(f"attune: error: {message}", file=sys.stderr)


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    try:
        return _run(parser, argv)
    except BrokenPipeError:
        _silence_stdout()
        return EXIT_BROKEN_PIPE


def _run(parser: argparse.ArgumentParser, argv: list[str]) -> int:
    try:
        args = parser.parse_args(argv)
    except UsageError as exc:
        if "--json" in argv:
            _report(exc, as_json=True)
        else:
            exc.parser.print_usage(sys.stderr)
            print(f"{exc.parser.prog}: error: {exc}", file=sys.stderr)
        return 2
    if args.version:
        from attune import __version__

        print(__version__)
        return 0
    func = getattr(args, "func", None)
    if func is None:
        parser.print_help()
        return 2
    from attune import Error

    def as_json() -> bool:
        # `--json` of every verb (store_true); read after the verb ran, since the harness verbs
        # of `attune bench` set it from the arguments they pass on.
        return getattr(args, "json", False) is True

    try:
        code = int(func(args) or 0)
        sys.stdout.flush()  # a closed pipe shows here, inside the handlers below
        return code
    except BrokenPipeError:
        raise
    except Error as exc:  # every engine error is an attune.Error: print it, no traceback
        _report(exc, as_json())
        code = getattr(exc, "exit_code", 1)  # a harness's own status (attune.bench.BenchError)
        return code if isinstance(code, int) and code > 0 else 1
    except OSError as exc:  # a file named on the command line is missing or unwritable
        _report(exc, as_json())
        return 1
    except KeyboardInterrupt:
        if as_json():  # a verb asked for JSON stays JSON when it stops
            print(json.dumps({"error": "KeyboardInterrupt", "message": "interrupted"}), flush=True)
        print("attune: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())

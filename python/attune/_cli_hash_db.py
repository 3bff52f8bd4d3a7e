"""CLI verbs of the Plush hash table: ``attune hash-db {open,put,get,delete,scan,stats,verify}``.

Keys and values are 8-byte words, given as integers (decimal or ``0x`` hex) in [0, 2**64), or
with ``--text`` UTF-8 strings, or with ``--hex`` hex digits of any bytes (as ``attune kv
--hex``), of any length (up to 4 KiB keys and 1 MiB values).
``open`` creates a database (``-o key=value`` sets creation options such as
``dram_entries_log2=12``, or ``partitioning=range`` for a database that ``scan`` walks in key
order); the other verbs refuse a directory that holds none. Every verb takes
``--json``.
"""

from __future__ import annotations

import json
import sys
import time

import attune
from attune._cli_kv import _HEX_HELP, _arg_bytes
from attune.cli import add_output_flags


def _word(text: str) -> int:
    try:
        v = int(text, 0)
    except ValueError:
        raise attune.InvalidArgumentError(
            f"{text!r} is not an integer (decimal or 0x hex)"
        ) from None
    if not 0 <= v < 2**64:
        raise attune.InvalidArgumentError(f"{text} is not in [0, 2**64)")
    return v


_FLAGS = (
    "create_if_missing",
    "sync",
    "payload_gc",
    "group_commit_window",
    "log_direct_io",
    "log_group_gather",
    "log_pack_groups",
    "elide_tmpfs_syncs",
    "read_only",
    "recovery_log",
)
# Byte counts, which also take a size string ("1MiB") as in Python.
_SIZES = ("log_chunk_bytes", "payload_segment_bytes")
_FLAG_WORDS = {
    "1": True,
    "true": True,
    "yes": True,
    "on": True,
    "0": False,
    "false": False,
    "no": False,
    "off": False,
}


def _options(pairs: list[str] | None) -> dict[str, object]:
    out: dict[str, object] = {}
    for p in pairs or []:
        if "=" not in p:
            raise attune.InvalidArgumentError(f"option {p!r} must look like key=value")
        k, v = (x.strip() for x in p.split("=", 1))
        if k not in attune.HASH_DB_OPTION_NAMES:
            known = ", ".join(attune.HASH_DB_OPTION_NAMES)
            raise attune.InvalidArgumentError(f"unknown option {k!r}; known: {known}")
        if k in _FLAGS:
            if v.lower() not in _FLAG_WORDS:
                raise attune.InvalidArgumentError(
                    f"option {k}={v!r} is a boolean: give 1/0, true/false, yes/no or on/off"
                )
            out[k] = _FLAG_WORDS[v.lower()]
        elif k in ("backend", "migration", "partitioning"):
            out[k] = v
        elif k in _SIZES and not v.lstrip("+-").isdigit():
            out[k] = v  # a size string like "1MiB", parsed (and refused) as Python's is
        else:
            # Any integer: the options' own check names each one's range, as in Python.
            try:
                out[k] = int(v, 0)
            except ValueError:
                raise attune.InvalidArgumentError(
                    f"option {k}={v!r} is not an integer (decimal or 0x hex)"
                ) from None
    return out


def _open(args, create: bool = False, read: bool = False) -> attune.HashDB:
    """Opens the database; `read` verbs open it read-only (a shared lock beside other readers,
    nothing written) unless ``-o read_only=0`` says otherwise."""
    opts = _options(getattr(args, "option", None))
    opts["create_if_missing"] = create
    if read:
        opts.setdefault("read_only", True)
    return attune.HashDB(args.path, **opts)


def _emit(args, row: dict, text: str) -> int:
    if args.json:
        print(json.dumps(row))
    else:
        print(text)
    return 0


def _cmd_open(args) -> int:
    with _open(args, create=True) as db:
        s = db.stats()
    return _emit(
        args,
        {"path": args.path, **s},
        f"{args.path}: {s['levels']} persistent levels, {s['recovered_records']} records "
        f"recovered from the log"
        + (
            ""
            if s["recovery_log"]
            else " (recovery log off: a crash loses every record not yet migrated)"
        ),
    )


def _arg(args, text: str, name: str) -> int | bytes:
    if args.hex:
        return _arg_bytes(args, text, name)
    if not args.text:
        return _word(text)
    try:
        return text.encode()
    except UnicodeEncodeError:
        # Bytes that are not UTF-8 reach argv as lone surrogates (PEP 383).
        raise attune.InvalidArgumentError(
            f"--text argument {text.encode(errors='surrogateescape')!r} is not valid UTF-8"
        ) from None


def _shown(args, x: int | bytes) -> int | str:
    if isinstance(x, int):
        return x
    return x.hex() if args.hex else x.decode()


def _cmd_put(args) -> int:
    key, value = _arg(args, args.key, "KEY"), _arg(args, args.value, "VALUE")
    with _open(args) as db:
        db.put(key, value)
    return _emit(args, {"key": _shown(args, key), "value": _shown(args, value)}, "ok")


def _cmd_get(args) -> int:
    key = _arg(args, args.key, "KEY")
    with _open(args, read=True) as db:
        if args.hex:
            raw = db.get(key)
            v = None if raw is None else raw.hex()
        elif args.text:
            raw = db.get(key)
            v = None if raw is None else raw.decode(errors="replace")
        else:
            v = db.get_int(key)
    if args.json:
        print(json.dumps({"key": _shown(args, key), "found": v is not None, "value": v}))
    elif v is None:
        print("(not found)", file=sys.stderr)
    else:
        print(v)
    return 0 if v is not None else 1


def _cmd_delete(args) -> int:
    key = _arg(args, args.key, "KEY")
    with _open(args) as db:
        existed = db.get(key) is not None
        db.delete(key)
    # The engine's delete is blind (it writes a tombstone either way); the CLI looks first so
    # that it can say whether there was anything to delete.
    return _emit(
        args,
        {"key": _shown(args, key), "existed": existed},
        "deleted" if existed else "not found (nothing to delete)",
    )


def _cmd_scan(args) -> int:
    start = _word(args.start)
    if args.limit < 0:
        raise attune.InvalidArgumentError(f"--limit {args.limit} must not be negative")
    with _open(args, read=True) as db:
        rows = db.scan(start=start, limit=args.limit)

    def shown(v: bytes) -> int | str:
        if args.hex:
            return v.hex()
        if args.text:
            return v.decode(errors="replace")
        return int.from_bytes(v, "little") if len(v) == 8 else v.hex()

    if args.json:
        for k, v in rows:
            print(json.dumps({"key": k, "value": shown(v)}))
    else:
        for k, v in rows:
            print(f"{k}\t{shown(v)}")
    return 0


def _cmd_stats(args) -> int:
    with _open(args, read=True) as db:
        s = db.stats()
    lines = "\n".join(f"{k}: {v}" for k, v in s.items())
    return _emit(args, s, lines)


def _cmd_verify(args) -> int:
    t0 = time.perf_counter()
    try:
        with _open(args, read=True) as db:
            r = db.verify()
    except attune.CorruptionError as e:
        if args.json:
            print(json.dumps({"ok": False, "error": type(e).__name__, "message": str(e)}))
        else:
            print(f"CORRUPTION: {e}", file=sys.stderr)
        return 1
    r.update({"ok": True, "seconds": time.perf_counter() - t0})
    return _emit(
        args,
        r,
        f"ok: {r['levels']} levels, {r['records']} records in {r['entries_checked']} entries, "
        f"{r['dram_records']} records not yet migrated, "
        f"{r['log_entries']} log entries in {r['log_chunks_in_use']} chunks"
        + (
            f"\nnote: {r['records_not_checksummed']} level records (8-byte key and value) in "
            "level files written before level checksums carry no checksum: verify checks their "
            "structure only, and damage to one can read back as a wrong value"
            if r["records_not_checksummed"]
            else ""
        ),
    )


def register(subparsers) -> None:
    """Adds ``hash-db`` and its sub-verbs."""
    p = subparsers.add_parser(
        "hash-db",
        help="the Plush hash table (byte keys and values): open, put, get, delete, scan, stats, "
        "verify",
        description="Plush, a crash-consistent log-structured hash table for point workloads.",
    )
    sub = p.add_subparsers(dest="hash_db_verb", required=True)

    def verb(name: str, func, help_: str, *args: tuple[str, str]):
        q = sub.add_parser(name, help=help_, description=help_)
        q.add_argument("path", help="database directory")
        for a, h in args:
            q.add_argument(a, help=h)
        if args:
            form = q.add_mutually_exclusive_group()
            form.add_argument(
                "--text",
                action="store_true",
                help="keys and values are UTF-8 text of any length (default: integers)",
            )
            form.add_argument("--hex", action="store_true", help=_HEX_HELP)
        q.add_argument(
            "-o",
            "--option",
            action="append",
            metavar="KEY=VALUE",
            help="HashDB option (creation options apply to `open`); repeatable",
        )
        add_output_flags(q)
        q.set_defaults(func=func)
        return q

    verb("open", _cmd_open, "create (or open) a hash database and print its statistics")
    verb(
        "put",
        _cmd_put,
        "store VALUE under KEY",
        ("key", "integer key (text with --text, hex digits with --hex)"),
        ("value", "integer value (text with --text, hex digits with --hex)"),
    )
    verb("get", _cmd_get, "print the value of KEY (exit status 1 when absent)", ("key", "key"))
    verb(
        "delete",
        _cmd_delete,
        "delete KEY (writes a tombstone; prints whether KEY existed)",
        ("key", "key"),
    )
    q = verb(
        "scan",
        _cmd_scan,
        "print up to --limit records with keys at or above --start, in key order (a "
        "database created with -o partitioning=range only); --json prints one JSON object "
        "per line",
    )
    q.add_argument("--start", default="0", help="first key (integer; default 0)")
    q.add_argument("--limit", type=int, default=100, help="records at most (default 100)")
    form = q.add_mutually_exclusive_group()
    form.add_argument("--text", action="store_true", help="print values as UTF-8 text")
    form.add_argument(
        "--hex", action="store_true", help="print values as hex digits (default: integers)"
    )
    verb("stats", _cmd_stats, "print the counters (levels, migrations, flushes, DRAM bytes)")
    verb("verify", _cmd_verify, "check every level entry and log chunk")

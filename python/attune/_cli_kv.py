"""CLI verbs of the key-value engine: `attune demo` and `attune kv {verify,stats,get,put,merge,scan,
compact,checkpoint,ingest,backup,repair,gc,learn}`.

Keys and values are bytes. ``kv get`` and ``kv scan`` print them escaped (:func:`escape_bytes`) so
that binary data cannot corrupt a terminal, or as stored with ``--raw``; under ``--json`` a field is
the text when the bytes are valid UTF-8, else the escaped text plus ``<field>_hex`` with the exact
bytes (:func:`json_bytes`).
"""

from __future__ import annotations

import json
import os
import random
import shutil
import sys
import tempfile
import time

import attune
from attune import workload
from attune.cli import U64_MAX, add_output_flags, int_range, progress

#: Largest ``attune demo --value-size``: the demo cuts values from a payload it builds in Python,
#: and a value above 1 MiB would make the demo measure that loop, not the engine.
DEMO_VALUE_BYTES_MAX = 1 << 20


def _parse_options(pairs: list[str] | None) -> dict[str, str]:
    """`-o key=value` pairs into DB keyword options."""
    out: dict[str, str] = {}
    for p in pairs or []:
        if "=" not in p:
            raise attune.InvalidArgumentError(f"option {p!r} must look like key=value")
        k, v = p.split("=", 1)
        out[k.strip()] = v.strip()
    return out


def _dir_bytes(path: str) -> int:
    total = 0
    for root, _dirs, files in os.walk(path):
        for f in files:
            try:
                total += os.path.getsize(os.path.join(root, f))
            except OSError:
                pass
    return total


def escape_bytes(b: bytes) -> str:
    """``b`` as terminal-safe text: printable characters of valid UTF-8 as they are; backslash,
    tab, newline and carriage return as ``\\ \\t \\n \\r``; every other byte (invalid UTF-8,
    control and format characters such as ESC) as ``\\xNN``. Reversible, and one line per
    key/value pair stays one line."""
    out: list[str] = []
    for ch in b.decode("utf-8", "surrogateescape"):
        o = ord(ch)
        if 0xDC80 <= o <= 0xDCFF:  # a byte that is not valid UTF-8
            out.append(f"\\x{o - 0xDC00:02x}")
        elif ch in _ESCAPES:
            out.append(_ESCAPES[ch])
        elif ch.isprintable():
            out.append(ch)
        else:
            out.extend(f"\\x{x:02x}" for x in ch.encode("utf-8"))
    return "".join(out)


_ESCAPES = {"\\": "\\\\", "\t": "\\t", "\n": "\\n", "\r": "\\r"}


def json_bytes(name: str, b: bytes) -> dict[str, str]:
    """``{name: text}`` for valid UTF-8; otherwise ``{name: escape_bytes(b), name_hex: b.hex()}``
    (the hex field's presence says the text is an escaped rendering, not the stored bytes)."""
    try:
        return {name: b.decode("utf-8")}
    except UnicodeDecodeError:
        return {name: escape_bytes(b), f"{name}_hex": b.hex()}


def _write_line(data: bytes) -> None:
    sys.stdout.buffer.write(data + b"\n")


def _percentile(sorted_ns: list[int], q: float) -> float:
    if not sorted_ns:
        return 0.0
    i = min(len(sorted_ns) - 1, int(q * len(sorted_ns)))
    return sorted_ns[i] / 1000.0


def _print_table(rows: list[tuple[str, str]], title: str) -> None:
    width = max(len(k) for k, _ in rows)
    print(f"\n{title}")
    print("-" * (width + 24))
    for k, v in rows:
        print(f"{k:<{width}}  {v:>20}")


def _per_sec(count: int, elapsed_ns: int) -> float | None:
    """Throughput from a nanosecond clock; None (JSON null) when nothing was timed, so a run too
    short for the clock never reports a made-up number."""
    if count == 0:
        return 0.0
    return count / (elapsed_ns / 1e9) if elapsed_ns > 0 else None


def _rate_text(rate: float | None) -> str:
    return "too fast to time" if rate is None else f"{rate:,.0f} ops/s"


def _demo(args) -> int:
    records, operations = args.records, args.operations
    if records <= 0 or operations < 0:
        raise attune.InvalidArgumentError("--records must be > 0 and --operations >= 0")
    own_dir = args.path is None
    path = args.path or tempfile.mkdtemp(prefix="attune-demo-")
    rng = random.Random(args.seed)
    value_size = args.value_size
    options = _parse_options(args.option)
    options.setdefault("memory_budget", "64MiB")
    result: dict = {
        "path": path,
        "records": records,
        "operations": operations,
        "workload": "YCSB A (50% read, 50% update, zipfian 0.99)",
    }
    # Values: db_bench-like, compressible to about half.
    payload_len = 4096 if value_size < 4096 else value_size + 4096  # room to slide a value
    payload = bytes(rng.getrandbits(8) % 32 + 65 for _ in range(payload_len))
    try:
        with attune.DB(path, **options) as db:
            # Load: YCSB's load phase (hashed insert order) from the workload library.
            t0 = time.perf_counter_ns()
            batch = attune.WriteBatch()
            logical = 0
            load = workload.ycsb(
                "a", records, 0, args.seed, phase="load", field_count=1, field_length=value_size
            )
            with progress(args, total=records, desc="load", unit="rec") as bar:
                for i, (_op, key, _n) in enumerate(load):
                    off = key % (len(payload) - value_size)
                    k = b"user%d" % key
                    logical += len(k) + value_size
                    batch.put(k, payload[off : off + value_size])
                    if len(batch) == 1000:
                        db.write(batch)
                        batch.clear()
                        bar.update(1000)
                if len(batch):
                    db.write(batch)
                    bar.update(len(batch))
                    batch.clear()
            load_ns = time.perf_counter_ns() - t0
            # Run: YCSB A's operation stream.
            lat_read: list[int] = []
            lat_write: list[int] = []
            clock = time.perf_counter_ns
            run = workload.ycsb(
                "a",
                records,
                operations,
                args.seed + 1,
                phase="run",
                field_count=1,
                field_length=value_size,
            )
            t0 = time.perf_counter_ns()
            with progress(args, total=operations, desc="read/write mix", unit="op") as bar:
                for i, (op, key, _n) in enumerate(run):
                    k = b"user%d" % key
                    if op == "read":
                        s = clock()
                        db.get(k)
                        lat_read.append(clock() - s)
                    else:
                        off = (i * 13) % (len(payload) - value_size)
                        s = clock()
                        db.put(k, payload[off : off + value_size])
                        lat_write.append(clock() - s)
                    if i % 1000 == 999:
                        bar.update(1000)
                bar.update(operations % 1000)
            mix_ns = time.perf_counter_ns() - t0
            stats = db.stats()
        lat_read.sort()
        lat_write.sort()
        space = _dir_bytes(path)
        result.update(
            {
                "load_ops_per_sec": _per_sec(records, load_ns),
                "mix_ops_per_sec": _per_sec(operations, mix_ns),
                "read_latency_us": {
                    "p50": _percentile(lat_read, 0.50),
                    "p99": _percentile(lat_read, 0.99),
                },
                "write_latency_us": {
                    "p50": _percentile(lat_write, 0.50),
                    "p99": _percentile(lat_write, 0.99),
                },
                "write_amp": stats["write_amp"],
                "space_bytes": space,
                "space_amp": space / logical,
                "block_cache_hit_rate": stats["block_cache"]["hit_rate"],
                "level_files": stats["level_files"],
                "options": options,
            }
        )
    finally:
        if own_dir and not args.keep:
            shutil.rmtree(path, ignore_errors=True)
    if args.json:
        print(json.dumps(result))
        return 0
    rows = [
        ("records loaded", f"{records:,}"),
        ("load throughput", _rate_text(result["load_ops_per_sec"])),
        ("YCSB A throughput", _rate_text(result["mix_ops_per_sec"])),
        ("read p50 / p99", "{p50:.1f} / {p99:.1f} us".format(**result["read_latency_us"])),
        ("write p50 / p99", "{p50:.1f} / {p99:.1f} us".format(**result["write_latency_us"])),
        ("write amplification", f"{result['write_amp']:.2f}"),
        ("space on disk", f"{space / 2**20:,.1f} MiB"),
        ("space amplification", f"{result['space_amp']:.2f}"),
        ("block cache hit rate", f"{result['block_cache_hit_rate']:.1%}"),
        ("files per level", " ".join(str(n) for n in result["level_files"])),
    ]
    _print_table(
        rows, f"Attune demo ({'kept at ' + path if not own_dir or args.keep else 'temp dir'})"
    )
    print(
        "\nLatencies are per call from Python (including the binding). "
        "Side-by-side numbers against RocksDB: docs/BENCHMARKS.md"
    )
    return 0


def _open(args, **extra):
    opts = _parse_options(getattr(args, "option", None))
    opts.setdefault("create_if_missing", "false")
    opts.update(extra)
    if opts.get("read_only") == "true" or opts.get("secondary") == "true":
        return attune.DB(args.path, **opts)
    try:
        return attune.DB(args.path, **opts)
    except attune.Error as e:
        raise _cli_advice(e) from None


# The engine's advice names attune.DB's keywords; a command-line user needs the verbs instead.
_PYTHON_ADVICE = {
    "to read beside a writer, open with secondary=True": (
        "this verb needs the writable handle, so stop the process that holds it first; "
        "`attune kv get`, `scan`, `stats` and `verify` read beside a writer on their own"
    ),
    "open with read_only=True to read it": (
        "`attune kv get`, `scan`, `stats` and `verify` open it read-only on their own"
    ),
}


def _cli_advice(e: attune.Error) -> attune.Error:
    """`e` with the engine's Python advice replaced by the command line's (same class, path and
    offset); `e` itself when it gives none."""
    message = str(e)
    for python, cli in _PYTHON_ADVICE.items():
        message = message.replace(python, cli)
    if message == str(e):
        return e
    return type(e)(message, e.path, e.offset)


def _open_reader(args):
    """Opens for reading: read-only (a shared lock, beside other readers), or, when a process
    holds the database open for writing, as a secondary instance (no lock; it reads the state
    the writer had when it opened). Returns the handle and how it was opened: "read_only" or
    "secondary"."""
    try:
        return _open(args, read_only="true"), "read_only"
    except attune.LockedError:
        db = _open(args, secondary="true")
        if not getattr(args, "json", False):
            print(
                f"note: {args.path} is open for writing in another process; reading it as a "
                "secondary instance (the writer's state as of now)",
                file=sys.stderr,
            )
        return db, "secondary"


def _verify(args) -> int:
    t0 = time.perf_counter()
    mode = "read_only"
    try:
        db, mode = _open_reader(args)
        with db:
            r = db.verify()
    except attune.CorruptionError as e:
        if args.json:
            print(
                json.dumps(
                    {"ok": False, "error": type(e).__name__, "message": str(e), "open_mode": mode}
                )
            )
        else:
            print(f"CORRUPTION: {e}", file=sys.stderr)
            print(
                "The damaged file and offset are named above; restore it from a backup.",
                file=sys.stderr,
            )
        return 1
    r.update({"ok": True, "seconds": time.perf_counter() - t0, "open_mode": mode})
    if args.json:
        print(json.dumps(r))
    else:
        print(
            f"OK: {_verified_files(r)}, {r['entries']:,} entries, every checksum verified "
            f"(WAL and manifest checked while opening) in {r['seconds']:.2f}s"
        )
    return 0


def _verified_files(r: dict) -> str:
    """What verify() checked: tables and value-log segments apart when the binding reports them
    apart; otherwise (older bindings, whose `files` counts both) the total as files."""
    tables = r.get("tables", r["files"])
    blob_segments = r.get("blob_segments", 0)
    if "tables" not in r and "blob_segments" not in r:
        return f"{tables} files (tables and value-log segments)"
    return f"{_count(tables, 'table')}, {_count(blob_segments, 'value-log segment')}"


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def _stats(args) -> int:
    db, mode = _open_reader(args)
    with db:
        s = db.stats()
    if args.json:
        print(json.dumps({**s, "open_mode": mode}))
    else:
        rows = _stat_rows(s)
        width = max((len(k) for k, _ in rows), default=0)
        for k, v in rows:
            print(f"{k:<{width}}  {v}")
    return 0


def _stat_rows(stats: dict, prefix: str = "") -> list[tuple[str, str]]:
    """``kv stats`` as (name, value) text rows: nested objects flattened to ``outer.inner``,
    lists as space-separated values (``level_files  0 2 5``), a list of objects (one per level)
    as one such row per field."""
    rows: list[tuple[str, str]] = []
    for k, v in stats.items():
        name = f"{prefix}{k}"
        if isinstance(v, dict):
            rows.extend(_stat_rows(v, name + "."))
        elif isinstance(v, (list, tuple)) and v and all(isinstance(x, dict) for x in v):
            # One object per level: one row per field, one column per level.
            for field in v[0]:
                rows.append((f"{name}.{field}", " ".join(_stat_text(x.get(field)) for x in v)))
        elif isinstance(v, (list, tuple)):
            rows.append((name, " ".join(_stat_text(x) for x in v) or "-"))
        else:
            rows.append((name, _stat_text(v)))
    return rows


def _stat_text(v) -> str:
    if isinstance(v, float):
        return f"{v:.6g}"
    if isinstance(v, (list, tuple)):
        return ",".join(_stat_text(x) for x in v)  # an inner list: one column, comma-joined
    if isinstance(v, dict):
        return json.dumps(v)
    return "-" if v is None else str(v)


def _decode(s: str) -> bytes:
    return s.encode("utf-8", "surrogateescape")


def _arg_bytes(args, s: str, name: str) -> bytes:
    """A key or value from the command line: hex digits under ``--hex`` (like RocksDB's
    ``ldb --hex``; an optional ``0x`` prefix), else the argument's bytes."""
    if not getattr(args, "hex", False):
        return _decode(s)
    digits = s[2:] if s[:2] in ("0x", "0X") else s
    try:
        return bytes.fromhex(digits)
    except ValueError:
        raise attune.InvalidArgumentError(
            f"{name} {s!r} is not hex (--hex: an even number of hex digits)"
        ) from None


def _check_raw(args) -> None:
    if getattr(args, "raw", False) and args.json:
        raise attune.InvalidArgumentError("--raw and --json exclude each other")
    if getattr(args, "raw", False) and getattr(args, "hex", False):
        raise attune.InvalidArgumentError("--raw and --hex exclude each other")


def _json_field(args, name: str, b: bytes) -> dict[str, str]:
    """A key or value in a JSON object: hex text under ``--hex``, else :func:`json_bytes`."""
    return {name: b.hex()} if args.hex else json_bytes(name, b)


def _text(args, b: bytes) -> str:
    """A key or value on a text line: hex under ``--hex``, else :func:`escape_bytes`."""
    return b.hex() if args.hex else escape_bytes(b)


def _get(args) -> int:
    _check_raw(args)
    key = _arg_bytes(args, args.key, "KEY")
    db, mode = _open_reader(args)
    with db:
        v = db.get(key)
    if v is None:
        if args.json:
            # "value": null, as `attune hash-db get --json` prints for a missing key.
            print(json.dumps({"key": args.key, "found": False, "value": None, "open_mode": mode}))
        else:
            print(f"(not found: {args.key!r})", file=sys.stderr)
        return 1
    if args.json:
        print(
            json.dumps(
                {
                    "key": args.key,
                    "found": True,
                    **_json_field(args, "value", v),
                    "open_mode": mode,
                }
            )
        )
    elif args.raw:
        sys.stdout.buffer.write(v)  # exactly the stored bytes, no newline added
    else:
        _write_line(_text(args, v).encode("utf-8"))
    return 0


def _put(args) -> int:
    key = _arg_bytes(args, args.key, "KEY")
    value = _arg_bytes(args, args.value, "VALUE")
    with _open(args, create_if_missing="true") as db:
        db.put(key, value, sync=True, ttl=args.ttl)
    if args.json:
        print(json.dumps({"key": args.key, "ok": True}))
    return 0


def _merge(args) -> int:
    key = _arg_bytes(args, args.key, "KEY")
    if args.int and args.hex:
        raise attune.InvalidArgumentError("--int and --hex exclude each other")
    operand: bytes | int
    if args.int:
        try:
            operand = int(args.operand, 0)
        except ValueError:
            raise attune.InvalidArgumentError(
                f"OPERAND {args.operand!r} is not an integer (--int takes decimal or 0x hex)"
            ) from None
    else:
        operand = _arg_bytes(args, args.operand, "OPERAND")
    with _open(args, create_if_missing="true") as db:
        db.merge(key, operand, sync=True)
        v = db.get(key)
    counter = int.from_bytes(v, "little") if args.int and v is not None and len(v) == 8 else None
    if args.json:
        out: dict[str, object] = {
            "key": args.key,
            "ok": True,
            **_json_field(args, "value", v or b""),
        }
        if args.int:
            out["int"] = counter
        print(json.dumps(out))
    elif counter is not None:
        print(counter)
    elif v is not None:
        _write_line(_text(args, v).encode("utf-8"))
    return 0


def _delete(args) -> int:
    key = _arg_bytes(args, args.key, "KEY")
    with _open(args) as db:
        db.delete(key, sync=True)
    if args.json:
        print(json.dumps({"key": args.key, "ok": True}))
    return 0


def _delete_range(args) -> int:
    begin = _arg_bytes(args, args.begin, "BEGIN")
    end = _arg_bytes(args, args.end, "END")
    with _open(args) as db:
        db.delete_range(begin, end, sync=True)
    if args.json:
        print(json.dumps({"begin": args.begin, "end": args.end, "ok": True}))
    return 0


def _scan(args) -> int:
    _check_raw(args)
    start = _arg_bytes(args, args.start, "--start") if args.start else None
    end = _arg_bytes(args, args.end, "--end") if args.end else None
    if args.limit < 0:
        raise attune.InvalidArgumentError("--limit must be >= 0 (0: no limit)")
    n = 0
    db, mode = _open_reader(args)
    if mode == "secondary" and args.json:
        # The lines are the items: say how it was opened beside them, on stderr.
        print(json.dumps({"open_mode": mode}), file=sys.stderr)
    with db:
        for k, v in db.items(start=start, end=end, reverse=args.reverse):
            if args.json:
                print(json.dumps({**_json_field(args, "key", k), **_json_field(args, "value", v)}))
            elif args.raw:
                _write_line(k + b"\t" + v)
            else:
                _write_line(f"{_text(args, k)}\t{_text(args, v)}".encode())
            n += 1
            if args.limit and n >= args.limit:
                break
    return 0


def _compact(args) -> int:
    t0 = time.perf_counter()
    with _open(args) as db:
        db.compact()
        s = db.stats()
    out = {"seconds": time.perf_counter() - t0, "level_files": s["level_files"]}
    print(
        json.dumps(out)
        if args.json
        else f"compacted in {out['seconds']:.2f}s; "
        f"files per level: {' '.join(map(str, out['level_files']))}"
    )
    return 0


def _backup(args) -> int:
    from attune.backup import BackupEngine

    verb = args.backup_verb
    with BackupEngine(args.backups) as engine:
        if verb == "create":
            with _open(args) as db, progress(args, unit="B", unit_scale=True, desc="backup") as bar:
                info = engine.create(db, progress=bar.update)
            out = info.to_dict()
            del out["files"]
            text = (
                f"backup {info.id} of {args.path} at sequence {info.sequence}: "
                f"{len(info.files)} files, {info.size:,} bytes, {info.bytes_new:,} of them new"
            )
        elif verb == "list":
            backups = engine.list()
            damaged = engine.damaged()
            for _, why in damaged:
                print(f"warning: {why}", file=sys.stderr)
            out = {
                "backups": [
                    {k: v for k, v in b.to_dict().items() if k != "files"} for b in backups
                ],
                "damaged": [path for path, _ in damaged],
            }
            text = (
                "\n".join(
                    f"{b.id}\t{time.strftime('%Y-%m-%d %H:%M:%S', time.localtime(b.created))}\t"
                    f"sequence {b.sequence}\t{len(b.files)} files\t{b.size:,} bytes"
                    for b in backups
                )
                or f"no backup in {args.backups}"
            )
        elif verb == "verify":
            with progress(args, unit="B", unit_scale=True, desc="verify") as bar:
                info = engine.verify(args.id, progress=bar.update)
            out = {"id": info.id, "ok": True, "files": len(info.files), "size": info.size}
            text = f"backup {info.id}: {len(info.files)} files, {info.size:,} bytes, all checksums match"
        elif verb == "restore":
            with progress(args, unit="B", unit_scale=True, desc="restore") as bar:
                info = engine.restore(args.dest, args.id, progress=bar.update)
            out = {"id": info.id, "dest": args.dest, "sequence": info.sequence, "size": info.size}
            text = (
                f"restored backup {info.id} (sequence {info.sequence}) into {args.dest}; open it "
                f"with attune.DB({args.dest!r})"
            )
        else:  # purge
            freed = engine.purge(args.keep)
            out = {"bytes_freed": freed, "backups": [b.id for b in engine.list()]}
            text = f"freed {freed:,} bytes; backups kept: {out['backups']}"
    print(json.dumps(out) if args.json else text)
    return 0


def _ingest(args) -> int:
    t0 = time.perf_counter()
    with _open(args) as db:
        r = db.ingest(args.files, move=args.move)
    r["seconds"] = time.perf_counter() - t0
    if args.json:
        for f in r["files"]:
            for field in ("smallest_key", "largest_key"):
                f.update(json_bytes(field, f.pop(field)))
        print(json.dumps(r))
    else:
        levels = ", ".join(f"{f['source']} -> L{f['level']}" for f in r["files"])
        moved = "; sources removed" if r["sources_removed"] else ""
        print(
            f"ingested {len(r['files'])} files ({r['entries']:,} entries, {r['bytes']:,} bytes) "
            f"at sequence {r['sequence']} in {r['seconds']:.2f}s: {levels}{moved}"
        )
    return 0


def _checkpoint(args) -> int:
    t0 = time.perf_counter()
    with _open(args) as db:
        r = db.checkpoint(args.dest)
    r["seconds"] = time.perf_counter() - t0
    r["dest"] = args.dest
    if args.json:
        print(json.dumps(r))
    else:
        print(
            f"checkpoint of {args.path} at sequence {r['sequence']} in {args.dest}: "
            f"{r['files_linked']} files linked, {r['files_copied']} copied "
            f"({r['bytes_copied']:,} bytes) in {r['seconds']:.2f}s; open it with "
            f"attune.DB({args.dest!r})"
        )
    return 0


def _repair(args) -> int:
    t0 = time.perf_counter()
    r = attune.repair(args.path, **_parse_options(getattr(args, "option", None)))
    r["seconds"] = time.perf_counter() - t0
    if args.json:
        print(json.dumps(r))
        return 0
    for f in r["files"]:
        if f["kind"] in ("manifest", "current"):
            continue
        state = "damaged, copy in lost/" if f["moved_to_lost"] else "ok"
        line = f"{f['name']:<16} {f['kind']:<6} {f['records_kept']:>10,} kept"
        if f["records_lost"] or f["bytes_lost"]:
            line += f", {f['records_lost']:,} records / {f['bytes_lost']:,} bytes lost"
        print(f"{line}  {state}")
        if f["error"]:
            print(f"    {f['error']}")
    verdict = "nothing lost" if r["clean"] else "records were lost (see above)"
    print(
        f"repaired {args.path}: {r['keys']:,} live keys ({r['keys_deleted']:,} deleted) in "
        f"{r['tables_written']} tables, "
        f"{r['segments_kept']} value-log segments kept, {r['values_inlined']:,} values "
        f"inlined, {r['values_lost']:,} values lost; {verdict}; "
        f"{r['files_moved_to_lost']} files copied to {os.path.join(args.path, 'lost')} "
        f"in {r['seconds']:.2f}s"
    )
    return 0


def _gc(args) -> int:
    t0 = time.perf_counter()
    with _open(args) as db:
        before = db.stats()
        r = db.gc(ratio=args.ratio)
        after = db.stats()
    # The background collector may finish segments while this call runs; the database's
    # cumulative counter tells them apart from this call's.
    total = after["gc_segments_collected"] - before["gc_segments_collected"]
    r.update(
        {
            "seconds": time.perf_counter() - t0,
            "background_segments_collected": max(0, total - r["segments_collected"]),
            "blob_bytes_before": before["blob_bytes"],
            "blob_bytes_after": after["blob_bytes"],
            "max_pause_micros": after["gc_max_pause_micros"],
        }
    )
    if args.json:
        print(json.dumps(r))
        return 0
    out, err = gc_summary(r, args.ratio)
    for line in out:
        print(line)
    for line in err:
        print(line, file=sys.stderr)
    return 0


def gc_summary(r: dict, ratio: float | None) -> tuple[list[str], list[str]]:
    """The lines `kv gc` prints (stdout, stderr) for the report ``r``: which collector freed
    what, so that a value log that shrank is never next to "nothing was collected"."""
    mine, background = r["segments_collected"], r["background_segments_collected"]
    before, after = r["blob_bytes_before"], r["blob_bytes_after"]
    at = f"ratio {ratio}" if ratio is not None else "the configured ratio"
    size = (
        f"value log {before:,} B, unchanged"
        if before == after
        else f"value log {before:,} -> {after:,} B"
    )
    out: list[str] = []
    err: list[str] = []
    if mine:
        out.append(
            f"collected {mine} value-log segments in {r['seconds']:.2f}s: moved "
            f"{r['records_rewritten']:,} live values ({r['bytes_rewritten']:,} B); {size} "
            f"(longest writer pause {r['max_pause_micros']} us)"
        )
        if background:
            out.append(f"the background collector collected {background} more meanwhile")
    elif background:
        out.append(
            f"the background collector collected {background} value-log segments while this "
            f"ran, leaving none at {at} for this call; {size}"
        )
    else:
        out.append(
            f"no value-log segment had enough garbage at {at}; {size}"
            + ("" if before == after else " (space freed by earlier collections)")
        )
        err.append("lower --ratio to move segments with less garbage")
    return out, err


def _learn(args) -> int:
    t0 = time.perf_counter()
    with _open(args, learned_index=args.mode, learned_level=args.levels) as db:
        tables = sum(db.stats()["level_files"])
        with_models = db.learn_all()
        s = db.stats()
    r = {
        "seconds": time.perf_counter() - t0,
        "tables": tables,
        "tables_with_models": with_models,
        "model_bytes": s["model_bytes"],
        "model_segments": s["learned"]["model_segments"],
        "unlearnable": s["learned"]["files_unlearnable"],
        "level_models": s["level_models"],
        "level_model_bytes": s["level_model_bytes"],
        "live_sst_bytes": s["live_sst_bytes"],
    }
    if args.json:
        print(json.dumps(r))
    else:
        share = r["model_bytes"] / max(1, r["live_sst_bytes"])
        print(
            f"{with_models} of {tables} tables have a learned model "
            f"({r['model_segments']:,} segments, {r['model_bytes']:,} B = {share:.3%} of the "
            f"table bytes) after {r['seconds']:.2f}s; models are kept beside the tables "
            "(NNNNNN.atlm) and loaded at open"
        )
        if args.levels:
            print(
                f"{r['level_models']} sorted levels have a level model "
                f"({r['level_model_bytes']:,} B, LEVEL-N.atlm); open with learned_level=true to "
                "use them (they are dropped when a flush or compaction changes the level)"
            )
        if r["unlearnable"]:
            print(
                f"{r['unlearnable']} tables keep the index-block path: their keys collapse "
                "under the key mapping (see docs/learned-index.md)",
                file=sys.stderr,
            )
    return 0


_HEX_HELP = (
    "keys and values are hex digits, given and printed (like RocksDB's ldb --hex; for binary keys)"
)


def register(sub) -> None:
    p = sub.add_parser(
        "demo",
        help="load a data set into an Attune database and run a read/write mix",
        description="Loads records into an embedded Attune database (YCSB load phase), runs YCSB "
        "workload A (50/50 read/update, zipfian 0.99) and prints throughput, latency, write and "
        "space amplification and cache hit rate.",
    )
    p.add_argument("--path", help="database directory (default: a temporary one, removed after)")
    p.add_argument(
        "--records", type=int_range(1, U64_MAX), default=500_000, help="records to load (500000)"
    )
    p.add_argument(
        "--operations",
        type=int_range(0, U64_MAX),
        default=300_000,
        help="mix operations (300000)",
    )
    p.add_argument(
        "--value-size",
        type=int_range(1, DEMO_VALUE_BYTES_MAX),
        default=100,
        help=f"value bytes, 1..{DEMO_VALUE_BYTES_MAX} (100)",
    )
    p.add_argument("--seed", type=int_range(0, U64_MAX), default=1, help="random seed (1)")
    p.add_argument("--keep", action="store_true", help="keep the temporary database")
    p.add_argument(
        "-o",
        "--option",
        action="append",
        metavar="KEY=VALUE",
        help="DB option, e.g. -o compression=zstd -o memory_budget=128MiB",
    )
    add_output_flags(p, json_help="print one JSON object instead of a table")
    p.set_defaults(func=_demo)

    kv = sub.add_parser("kv", help="inspect and operate an Attune key-value database")
    kvs = kv.add_subparsers(dest="kv_verb", metavar="COMMAND", required=True)

    def common(q, with_path=True):
        if with_path:
            q.add_argument("path", help="database directory")
        q.add_argument("-o", "--option", action="append", metavar="KEY=VALUE", help="DB option")
        add_output_flags(q)
        return q

    q = common(
        kvs.add_parser(
            "verify",
            help="check every checksum of every file",
            description="Checks every checksum of every table and value-log segment and prints "
            "how many of each it read.",
        )
    )
    q.set_defaults(func=_verify)
    q = common(kvs.add_parser("stats", help="print engine statistics"))
    q.set_defaults(func=_stats)
    q = common(
        kvs.add_parser(
            "get",
            help="print the value of KEY",
            description="Prints the value of KEY, escaped (printable UTF-8 as is, other bytes "
            "as \\xNN; backslash, tab, newline as \\\\ \\t \\n) unless --raw. Under --json, "
            "`value` is the text if the bytes are valid UTF-8, else the escaped text plus "
            "`value_hex` with the exact bytes.",
        )
    )
    q.add_argument("key")
    q.add_argument(
        "--raw", action="store_true", help="write exactly the value's stored bytes (no newline)"
    )
    q.add_argument("--hex", action="store_true", help=_HEX_HELP)
    q.set_defaults(func=_get)
    q = common(kvs.add_parser("put", help="store VALUE under KEY (synced)"))
    q.add_argument("key")
    q.add_argument("value")
    q.add_argument("--hex", action="store_true", help=_HEX_HELP)
    q.add_argument(
        "--ttl",
        type=float,
        metavar="SECONDS",
        help="time to live: from then on the key reads as absent, and compaction drops it",
    )
    q.set_defaults(func=_put)
    q = common(
        kvs.add_parser(
            "merge",
            help="add OPERAND to KEY with the database's merge operator (synced)",
            description="Writes OPERAND as a merge operand of KEY with one synced write and "
            "prints the value KEY then reads as. The operator is the one the database recorded "
            "when it was first opened with one; give it for a new database with "
            "-o merge_operator=add (or append, append:<delimiter>, max). With --int, OPERAND "
            "is an integer stored as 8 little-endian bytes (what `add` takes; a negative one "
            "subtracts) and the value is printed as an integer.",
        )
    )
    q.add_argument("key")
    q.add_argument("operand")
    q.add_argument("--hex", action="store_true", help=_HEX_HELP)
    q.add_argument(
        "--int",
        action="store_true",
        help="OPERAND is an integer (8 little-endian bytes); print the value as one",
    )
    q.set_defaults(func=_merge)
    q = common(
        kvs.add_parser(
            "delete",
            help="delete KEY (synced)",
            description="Deletes KEY with one synced write. A key that is not there is not an "
            "error (a delete is a blind write, as in RocksDB): the exit status is 0 either way.",
        )
    )
    q.add_argument("key")
    q.add_argument("--hex", action="store_true", help=_HEX_HELP)
    q.set_defaults(func=_delete)
    q = common(
        kvs.add_parser(
            "delete-range",
            help="delete every key from BEGIN up to, not including, END (synced)",
            description="Deletes every key k with BEGIN <= k < END with one write (a range "
            "tombstone): reads stop seeing the keys at once, compaction reclaims their space. "
            "BEGIN after END is an error; BEGIN equal to END deletes nothing.",
        )
    )
    q.add_argument("begin")
    q.add_argument("end")
    q.add_argument("--hex", action="store_true", help=_HEX_HELP)
    q.set_defaults(func=_delete_range)
    q = common(
        kvs.add_parser(
            "scan",
            help="print key<TAB>value lines in key order",
            description="Prints one key<TAB>value line per entry, escaped so that binary data "
            "cannot corrupt a terminal: printable UTF-8 as is, every other byte as \\xNN, "
            "backslash, tab, newline, carriage return as \\\\ \\t \\n \\r. --raw writes the "
            "bytes as stored. --json prints one object per entry: `key` and `value` are the "
            "text when the bytes are valid UTF-8, else the escaped text plus `key_hex` / "
            "`value_hex` with the exact bytes.",
        )
    )
    q.add_argument("--start", help="lowest key to print (inclusive)")
    q.add_argument("--end", help="key to stop before (exclusive upper bound)")
    q.add_argument("--reverse", action="store_true", help="descending key order")
    q.add_argument("--limit", type=int, default=0, help="stop after N entries (0: all)")
    q.add_argument("--raw", action="store_true", help="write keys and values as stored")
    q.add_argument("--hex", action="store_true", help=_HEX_HELP + "; --start/--end too")
    q.set_defaults(func=_scan)
    q = common(kvs.add_parser("compact", help="compact the whole key range"))
    q.set_defaults(func=_compact)
    q = common(
        kvs.add_parser(
            "checkpoint",
            help="write a consistent copy of the database into DEST",
            description="Flushes, then writes a consistent copy of the database into DEST (a "
            "new or empty directory) that opens as a database of its own. Tables and sealed "
            "value-log segments are hard-linked when DEST is on the same file system (no "
            "extra space until either side rewrites them) and copied otherwise, which makes "
            "a checkpoint on another disk a backup. A checkpoint cut short has no CURRENT "
            "file and does not open.",
        )
    )
    q.add_argument("dest", help="directory to create (or an empty one)")
    q.set_defaults(func=_checkpoint)
    q = common(
        kvs.add_parser(
            "ingest",
            help="add sorted table files (attune.TableWriter) to the database atomically",
            description="Verifies every FILE (checksums, sorted keys, written by "
            "attune.TableWriter) and that their key ranges do not overlap, then adds them in "
            "one atomic step: after a crash all of them are in the database or none. Their "
            "entries shadow every earlier write. Files are rewritten into the database with a "
            "new sequence number, or linked (--move) or copied unchanged when their keys "
            "exist nowhere in it; --move removes the sources afterwards. Needs the database "
            "not to be "
            "open elsewhere; from a running program use DB.ingest.",
        )
    )
    q.add_argument("files", nargs="+", metavar="FILE", help="table file to ingest")
    q.add_argument("--move", action="store_true", help="remove the source files once ingested")
    q.set_defaults(func=_ingest)
    b = kvs.add_parser(
        "backup",
        help="incremental backups: create, list, verify, restore, purge",
        description="Incremental backups in a backup directory (RocksDB's BackupEngine): each "
        "backup is a consistent copy of the database, files that earlier backups already hold "
        "are not copied again, every file carries a CRC-32 checked on verify and restore, and "
        "a backup cut short does not exist. See docs/kv.md.",
    )
    bs = b.add_subparsers(dest="backup_verb", metavar="COMMAND", required=True)
    q = common(bs.add_parser("create", help="back up the database at PATH into BACKUPS"))
    q.add_argument("backups", help="backup directory (created if missing)")
    q.set_defaults(func=_backup)
    q = common(bs.add_parser("list", help="list the backups in BACKUPS"), with_path=False)
    q.add_argument("backups", help="backup directory")
    q.set_defaults(func=_backup)
    q = common(
        bs.add_parser("verify", help="check every file of a backup against its CRC-32"),
        with_path=False,
    )
    q.add_argument("backups", help="backup directory")
    q.add_argument("--id", type=int_range(1), help="backup to check (default: the newest)")
    q.set_defaults(func=_backup)
    q = common(
        bs.add_parser("restore", help="copy a backup into DEST, a new database directory"),
        with_path=False,
    )
    q.add_argument("backups", help="backup directory")
    q.add_argument("dest", help="directory to create (or an empty one)")
    q.add_argument("--id", type=int_range(1), help="backup to restore (default: the newest)")
    q.set_defaults(func=_backup)
    q = common(
        bs.add_parser("purge", help="delete old backups and the files only they used"),
        with_path=False,
    )
    q.add_argument("backups", help="backup directory")
    q.add_argument(
        "--keep", type=int_range(0), default=None, help="newest backups to keep (default: all)"
    )
    q.set_defaults(func=_backup)
    q = common(
        kvs.add_parser(
            "repair",
            help="salvage every readable record of a damaged database",
            description="Reads every file in PATH on its own (the manifest and CURRENT are not "
            "trusted): tables block by block, write-ahead logs up to their first damaged "
            "record, value-log segments record by record. Writes the newest version of every "
            "key into new tables and a new manifest, and keeps every file that lost records "
            "(and the old manifest and CURRENT) in PATH/lost/. Prints per file what was kept "
            "and lost. The database must not be open in any process.",
        )
    )
    q.set_defaults(func=_repair)
    q = common(
        kvs.add_parser(
            "gc",
            help="garbage-collect the value log",
            description="Rewrites the live values of every sealed value-log segment whose dead "
            "share is at least RATIO and deletes the segment (once no snapshot needs it). "
            "Reports what this call collected apart from what the background collector "
            "collected meanwhile.",
        )
    )
    q.add_argument(
        "--ratio",
        type=float,
        default=None,
        help="dead share a segment needs, 0..1 (default: the blob_gc_garbage_ratio option, 0.25)",
    )
    q.set_defaults(func=_gc)
    q = common(
        kvs.add_parser(
            "learn",
            help="learn an index model for every table now",
            description="Trains a learned index (Greedy-PLR, Bourbon) for every live table that "
            "has none and stores it beside the table, so lookups skip the index-block search. "
            "A database opened with learned_index=analyzer (the default) does this in the "
            "background for the tables worth it; this verb does it for all of them at once.",
        )
    )
    q.add_argument(
        "--mode",
        choices=["analyzer", "always", "offline"],
        default="analyzer",
        help="learned_index mode to open with (each learns every table here)",
    )
    q.add_argument(
        "--levels",
        action="store_true",
        help="also learn one model per sorted level of several tables (level learning, for "
        "read-mostly data; replaces finding the table in the level)",
    )
    q.set_defaults(func=_learn)

"""`attune bench device-sqlite`: the SQLite study of the SSD-profiling chapter on the simulated
SSD (:mod:`attune.device.sqlite_study`, docs/ssd-profile.md "The SQLite study").

A planted device (64 KiB chunk, 16 KiB flash page, 4 chips per stripe; the chapter's SSD-S has a
64 KiB chunk and a 32 KiB hot offset) is profiled first; the learned stripe, flash page and hot
offset drive the layout changes. SQLite (page size 64 KiB, synchronous=FULL, a page cache of a
tenth of the loaded database) loads ``--rows`` pairs, then runs ``--iterations`` of ``--ops``
inserts (``--per-txn`` per transaction) and ``--ops`` point selects, under strace, twice:

* rollback journal: replayed as traced (``original``) and with the B-tree file at the learned hot
  offset and writeback cut at stripe boundaries (``hot``). Rows ``hot-locations/*``: selects and
  inserts per simulated device second; the ``hot`` row carries the gains. ``hot-locations-gc/*``:
  the same trace on the device with its garbage-collection periods on.
* WAL mode (autocheckpoint off, a checkpoint after each iteration): replayed as traced and with
  frames rewritten to whole, page-aligned pages (``aligned``). Rows ``wal-aligned/*``: flash pages
  the WAL programs per iteration and per commit, and the pages saved.

Rows ``check/<journal mode>``: rules 1–5 over the original trace with the learned parameters.
Rows (JSON lines, ``--out`` appends; every row has ``command`` and ``machine``).
"""

from __future__ import annotations

import argparse
import shlex
import sys
from typing import Any

#: The planted device the study profiles (the write-fragment model on, so that Experiment 1 sees
#: the stripe).
PROFILED = {
    "chunk_bytes": 65536,
    "page_bytes": 16384,
    "mapping_bytes": 4096,
    "stripe_chips": 4,
    "map_fetch_us": 10.0,
}
#: The device the traces are replayed on: the same, with the write-fragment model off (SQLite
#: rewrites 64 KiB pages in place, so every stripe it touches reaches the model's cap of 512
#: fragments and every read would pay 5 ms of mapping fetches, whatever the layout) and its
#: garbage-collection periods off (zero length), as the chapter's experiment isolates the
#: layout. ``hot-locations-gc`` rows replay the same trace with the periods on (the model's
#: default: 100 ms on half the chips every 16 MiB flushed, reads there 10-60x slower).
DEVICE = {**PROFILED, "map_fetch_us": 0.0, "gc_duration_us": 0.0}
DEVICE_GC = {**DEVICE, "gc_duration_us": 100_000.0}


def add_parser(verbs) -> None:
    from attune.cli import add_output_flags

    p = verbs.add_parser(
        "device-sqlite",
        help="SQLite's I/O on the simulated SSD: hot locations and stripe-aligned WAL frames",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--rows", type=int, default=50_000, help="pairs loaded first (50000)")
    p.add_argument("--iterations", type=int, default=3, help="insert+select iterations (3)")
    p.add_argument("--ops", type=int, default=2_000, help="inserts and selects per phase (2000)")
    p.add_argument("--per-txn", type=int, default=1, help="inserts per transaction (1)")
    p.add_argument("--page-bytes", type=int, default=65536, help="SQLite page size (65536)")
    p.add_argument("--seed", type=int, default=1, help="workload and device seed (1)")
    p.add_argument("--keep-traces", metavar="PREFIX", help="also keep the strace logs")
    add_output_flags(p, out="append the JSON rows to PATH")
    p.set_defaults(func=run)


def _ops_per_sec(ops: int, ns: int) -> float | None:
    return round(ops / (ns / 1e9), 1) if ns > 0 else None


def _gain(new: float | None, old: float | None) -> float | None:
    if new is None or not old:
        return None
    return round(new / old - 1.0, 4)


def _num(v: Any, width: int = 0) -> str:
    """A measured value for people: `–` where there is none (a phase without device time)."""
    return f"{'–' if v is None else v:>{width}}"


def _pct(v: float | None) -> str:
    return "–" if v is None else f"{v * 100:+.1f} %"


def _human(r: dict[str, Any]) -> str:
    """One result row as a line: gains against the baseline in per cent; the baseline rows say
    they are the baseline instead of printing an empty gain."""
    if r["kind"] == "check":
        wa = r.get("write_amplification")
        return (
            f"{r['case']:<26} ios {r['ios']:>7}  violations per rule {r.get('counts')}  "
            f"extra flash pages {_num(r.get('extra_pages'))}  "
            f"WA {'–' if wa is None else f'{wa:.3f}'}"
        )
    if r["kind"].startswith("hot-locations"):
        gains = (
            f"select {_pct(r['select_gain'])}, insert {_pct(r['insert_gain'])}"
            if "select_gain" in r
            else "baseline"
        )
        return (
            f"{r['case']:<26} select {_num(r['select_ops_per_sec'], 10)} /s  insert "
            f"{_num(r['insert_ops_per_sec'], 10)} /s  {gains}"
        )
    saved = r.get("wal_pages_saved_per_iteration")
    return (
        f"{r['case']:<26} WAL pages/iter {_num(r['wal_flash_pages_per_iteration'], 9)}  "
        f"per commit {_num(r['wal_flash_pages_per_commit'], 6)}  "
        + ("baseline" if saved is None else f"saved {saved}")
        + f"  insert {_num(r['insert_ops_per_sec'])} /s"
    )


def run(args) -> int:
    from attune import device
    from attune.bench import machine, write_rows
    from attune.cli import progress
    from attune.device import sqlite_study as st

    command = (
        "attune bench device-sqlite " + shlex.join(sys.argv[3:])
        if len(sys.argv) > 3
        else "attune bench device-sqlite"
    )
    mach = machine()
    rows: list[dict[str, Any]] = []
    prof = device.profile_simulated(PROFILED, seed=7)
    learned = device.learned_params(prof["learned"])
    stripe, hot = learned["stripe"], learned["hot_offset"]
    if stripe is None or hot is None or learned["page"] is None:
        from attune.errors import InvalidArgumentError

        raise InvalidArgumentError(
            f"the profile did not find stripe, page and hot offset: {learned}"
        )
    base = {
        "bench": "device-sqlite",
        "rows": args.rows,
        "iterations": args.iterations,
        "ops": args.ops,
        "per_txn": args.per_txn,
        "sqlite_page_bytes": args.page_bytes,
        "device": "c64k-p16k-s4",
        "stripe_bytes": stripe,
        "flash_page_bytes": learned["page"],
        "hot_offset_bytes": hot,
    }
    with progress(args, total=2, desc="sqlite runs", unit="run") as bar:
        for mode in ("delete", "wal"):
            keep = f"{args.keep_traces}-{mode}.strace" if args.keep_traces else None
            calls = st.trace_sqlite(
                mode=mode,
                page_bytes=args.page_bytes,
                rows=args.rows,
                iterations=args.iterations,
                ops=args.ops,
                per_txn=args.per_txn,
                seed=args.seed,
                keep_trace=keep,
            )
            chk = device.check(calls.io(), learned)
            d = chk.to_dict(limit=5)
            rows.append(
                {
                    **base,
                    "kind": "check",
                    "case": f"check/{mode}",
                    "journal_mode": mode,
                    "calls": st.count_kinds(calls),
                    "ios": len(calls.io()),
                    **{k: v for k, v in d.items() if k != "violations"},
                    "examples": d.get("violations", []),
                }
            )
            if mode == "delete":
                variants = {
                    (kind, name): st.replay(
                        calls,
                        dev,
                        stripe=stripe,
                        db_shift=hot if name == "hot" else 0,
                        split=name == "hot",
                        seed=args.seed,
                    )
                    for kind, dev in (("hot-locations", DEVICE), ("hot-locations-gc", DEVICE_GC))
                    for name in ("original", "hot")
                }
                prev: dict[str, Any] = {}
                for (kind, name), r in variants.items():
                    sel = st.phase_totals(r["phases"], "select-")
                    ins = st.phase_totals(r["phases"], "insert-")
                    n = args.ops * args.iterations
                    row = {
                        **base,
                        "kind": kind,
                        "case": f"{kind}/{name}",
                        "device_gc": kind.endswith("-gc"),
                        "journal_mode": mode,
                        "variant": name,
                        "select_ops_per_sec": _ops_per_sec(n, sel.get("device_ns", 0)),
                        "insert_ops_per_sec": _ops_per_sec(n, ins.get("device_ns", 0)),
                        "select_device_reads": sel.get("reads", 0),
                        "insert_device_writes": ins.get("writes", 0),
                        "flash_pages": sum(v[0] for v in r["pages_by_role"].values()),
                        "pages_by_role": r["pages_by_role"],
                    }
                    if name == "hot":
                        row["select_gain"] = _gain(
                            row["select_ops_per_sec"], prev["select_ops_per_sec"]
                        )
                        row["insert_gain"] = _gain(
                            row["insert_ops_per_sec"], prev["insert_ops_per_sec"]
                        )
                    else:
                        prev = row
                    rows.append(row)
            else:
                variants = {
                    "original": st.replay(calls, DEVICE, stripe=stripe, seed=args.seed),
                    "aligned": st.replay(
                        st.rewrite_wal_aligned(calls, args.page_bytes),
                        DEVICE,
                        stripe=stripe,
                        seed=args.seed,
                    ),
                }
                first: dict[str, Any] = {}
                for name, r in variants.items():
                    wal_pages, wal_min = r["pages_by_role"].get("wal", [0, 0])
                    ins = st.phase_totals(r["phases"], "insert-")
                    ck = st.phase_totals(r["phases"], "checkpoint-")
                    it = args.iterations
                    row = {
                        **base,
                        "kind": "wal-aligned",
                        "case": f"wal-aligned/{name}",
                        "journal_mode": mode,
                        "variant": name,
                        "wal_flash_pages_per_iteration": round(wal_pages / it, 1),
                        "wal_flash_pages_per_commit": round(
                            wal_pages / it / -(-args.ops // args.per_txn), 3
                        ),
                        "wal_min_flash_pages_per_iteration": round(wal_min / it, 1),
                        "commits_per_iteration": -(-args.ops // args.per_txn),
                        "insert_ops_per_sec": _ops_per_sec(args.ops * it, ins.get("device_ns", 0)),
                        "checkpoint_ms": round(ck.get("device_ns", 0) / it / 1e6, 3),
                        "flash_pages": sum(v[0] for v in r["pages_by_role"].values()),
                        "pages_by_role": r["pages_by_role"],
                    }
                    if first:
                        row["wal_pages_saved_per_iteration"] = round(
                            first["wal_flash_pages_per_iteration"]
                            - row["wal_flash_pages_per_iteration"],
                            1,
                        )
                        row["wal_wear_reduction"] = round(
                            1 - wal_pages / (first["wal_flash_pages_per_iteration"] * it), 4
                        )
                    else:
                        first = row
                    rows.append(row)
            bar.update(1)
    lines = write_rows(rows, command, mach, args.out)
    if args.json:
        print("\n".join(lines))
        return 0
    for r in rows:
        print(_human(r))
    return 0

"""CLI verb `attune embed`: load embedding tables, simulate cache policies, show table stats.

* ``attune embed load DIR NAME=FILE.npy ...`` writes tables from 2-D ``.npy`` files;
  ``attune embed load DIR --criteo`` writes the Criteo-like tables (``C1``..``CN`` with the
  generator's scaled cardinalities, values drawn from N(0, 0.1²), seeded).
* ``attune embed simulate`` runs policies on the Criteo-like request stream and prints
  individual and perfect hit rates; with ``--store DIR`` the requests are served by an
  :class:`attune.embed.EmbeddingStore` over real table files (values read, decoded, counted).
* ``attune embed stats DIR`` lists the tables (rows, dim, bytes), ``--verify`` re-reads them and
  checks their checksums.

``--json`` prints one JSON object (``simulate``: one per line per policy).
"""

from __future__ import annotations

import json
import os

from attune import embed, workload
from attune.cli import add_output_flags, progress
from attune.errors import InvalidArgumentError


def _np():
    import numpy as np

    return np


def _load(args) -> int:
    np = _np()
    written = []
    if args.criteo:
        cards = workload.criteo(1, tables=args.tables, scale=args.scale, seed=args.seed)[
            "cardinalities"
        ]
        rng = np.random.default_rng(args.seed)
        with progress(args, total=len(cards), desc="tables", unit="table") as bar:
            for t, rows in enumerate(cards):
                name = f"C{t + 1}"
                values = rng.normal(0.0, 0.1, size=(int(rows), args.dim)).astype(np.float32)
                embed.load_table(args.dir, name, values, backend=args.backend)
                written.append({"name": name, "rows": int(rows), "dim": args.dim})
                bar.update(1)
    for spec in args.tables_from:
        name, sep, path = spec.partition("=")
        if not sep or not name or not path:
            raise InvalidArgumentError(f"expected NAME=FILE.npy, got `{spec}`")
        try:
            values = np.load(path, allow_pickle=False)
        except (OSError, ValueError) as e:
            raise InvalidArgumentError(f"cannot read {path} as a .npy array: {e}") from None
        embed.load_table(args.dir, name, values, backend=args.backend)
        written.append({"name": name, "rows": int(values.shape[0]), "dim": int(values.shape[1])})
    if not written:
        raise InvalidArgumentError("nothing to load: give NAME=FILE.npy arguments or --criteo")
    if args.json:
        print(json.dumps({"dir": args.dir, "tables": written}))
    else:
        for w in written:
            print(f"{w['name']}: {w['rows']} rows x {w['dim']}")
    return 0


def _simulate(args) -> int:
    np = _np()
    policies = [p.strip() for p in args.policy.split(",") if p.strip()]
    for p in policies:
        if p not in embed.POLICIES:
            raise InvalidArgumentError(f"unknown policy `{p}`; valid: {', '.join(embed.POLICIES)}")
    if not 0 < args.cache_fraction <= 1:
        raise InvalidArgumentError(f"--cache-fraction must be in (0, 1], got {args.cache_fraction}")
    gen = workload.criteo(
        args.requests,
        tables=args.tables,
        scale=args.scale,
        seed=args.seed,
        correlation=args.correlation,
        profile=args.generator,
    )
    keys = gen["keys"]
    total_rows = int(gen["cardinalities"].sum())
    capacity = int(total_rows * args.cache_fraction)
    warmup = int(args.requests * args.warmup)
    results = []
    for p in policies:
        if args.store:
            with embed.EmbeddingStore(args.store, tables=args.tables, backend=args.backend) as s0:
                dim = s0.dim
            store = embed.EmbeddingStore(
                args.store,
                tables=args.tables,
                cache_bytes=capacity * dim * 4,
                policy=p,
                backend=args.backend,
            )
            with progress(args, total=len(keys), desc=p, unit="req") as bar:
                for i in range(0, len(keys), 4096):
                    store.lookup(keys[i : i + 4096])
                    bar.update(min(4096, len(keys) - i))
            s = store.stats()
            r = {
                "policy": p,
                "capacity": capacity,
                "requests": s["requests"],
                "hit_rate": s["hit_rate"],
                "perfect_rate": s["perfect_rate"],
            }
            store.close()
        else:
            r = embed.simulate(keys, policy=p, capacity=capacity, warmup=warmup)
        r.update(
            {
                "cache_fraction": args.cache_fraction,
                "tables": args.tables,
                "scale": args.scale,
                "total_rows": total_rows,
                "seed": args.seed,
            }
        )
        results.append(r)
        if args.json:
            print(json.dumps(r))
        else:
            print(
                f"{p:16s} capacity {capacity:>9d} rows  individual {r['hit_rate']:.4f}"
                f"  perfect {r['perfect_rate']:.4f}"
            )
    del np
    return 0


def _stats(args) -> int:
    b = args.backend
    names = embed.list_tables(args.dir, backend=b)
    rows = []
    for n in names:
        if args.verify:
            r, d = embed.verify_table(args.dir, n, backend=b)
        else:
            with embed.EmbeddingStore(args.dir, tables=[n], backend=b) as s:
                r, d = s.rows[0], s.dim
        # The flat file's size; on the kv back end, the rows' bytes (the database's files are
        # shared by every table).
        size = os.path.getsize(os.path.join(args.dir, f"{n}.emb")) if b == "file" else r * d * 4
        rows.append({"name": n, "rows": r, "dim": d, "bytes": size})
    if args.json:
        print(json.dumps({"dir": args.dir, "backend": b, "verified": args.verify, "tables": rows}))
    else:
        for t in rows:
            print(f"{t['name']:>12s} {t['rows']:>12d} rows x {t['dim']:<4d} {t['bytes']:>14d} B")
        print(f"{len(rows)} tables, {sum(t['bytes'] for t in rows)} bytes")
    return 0


def _backend_flag(p) -> None:
    p.add_argument(
        "--backend",
        choices=embed.BACKENDS,
        default="file",
        help="where the rows live: file (one flat file per table) or kv (one Attune-DB"
        " database); default file",
    )


def register(subparsers) -> None:
    """Adds `attune embed` and its subcommands."""
    p = subparsers.add_parser(
        "embed",
        help="embedding tables larger than memory: load, simulate caches, stats",
        description=__doc__,
    )
    sub = p.add_subparsers(dest="embed_cmd", required=True)

    ld = sub.add_parser("load", help="write tables from .npy files or the Criteo-like generator")
    ld.add_argument("dir", help="store directory (created if missing)")
    ld.add_argument("tables_from", nargs="*", metavar="NAME=FILE.npy", help="tables to write")
    ld.add_argument("--criteo", action="store_true", help="write the Criteo-like tables C1..CN")
    ld.add_argument("--tables", type=int, default=26, help="Criteo tables (1-26, default 26)")
    ld.add_argument("--scale", type=float, default=0.001, help="cardinality scale (default 0.001)")
    ld.add_argument("--dim", type=int, default=36, help="values per row (default 36)")
    ld.add_argument("--seed", type=int, default=0, help="seed (default 0)")
    _backend_flag(ld)
    add_output_flags(ld)
    ld.set_defaults(func=_load)

    sm = sub.add_parser("simulate", help="hit rates of cache policies on the Criteo-like stream")
    sm.add_argument(
        "--policy",
        default="lru,lfu,clock,arc,car,lirs,ev-lfu,ev-arc,ev-car",
        help=f"comma-separated policies (default %(default)s); valid: {', '.join(embed.POLICIES)}",
    )
    sm.add_argument(
        "--cache-fraction",
        type=float,
        default=0.05,
        help="cache size as a fraction of all table rows (default 0.05)",
    )
    sm.add_argument("--tables", type=int, default=26, help="tables (1-26, default 26)")
    sm.add_argument("--scale", type=float, default=0.001, help="cardinality scale (default 0.001)")
    sm.add_argument("--requests", type=int, default=200_000, help="requests (default 200000)")
    sm.add_argument("--warmup", type=float, default=0.0, help="fraction not counted (default 0)")
    sm.add_argument(
        "--correlation", type=float, default=0.8, help="cross-table correlation (default 0.8)"
    )
    sm.add_argument(
        "--generator",
        choices=("kaggle", "zipf"),
        default="kaggle",
        help="Criteo-like profile: kaggle (calibrated long tails) or zipf (default kaggle)",
    )
    sm.add_argument("--seed", type=int, default=0, help="seed (default 0)")
    sm.add_argument("--store", metavar="DIR", help="serve the requests from the tables in DIR")
    _backend_flag(sm)
    add_output_flags(sm)
    sm.set_defaults(func=_simulate)

    st = sub.add_parser("stats", help="list the tables of a store directory")
    st.add_argument("dir", help="store directory")
    st.add_argument("--verify", action="store_true", help="re-read and check every checksum")
    _backend_flag(st)
    add_output_flags(st)
    st.set_defaults(func=_stats)

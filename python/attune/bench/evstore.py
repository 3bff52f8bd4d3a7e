"""`attune bench evstore`: EVStore's accuracy and EVProx studies on the calibrated Criteo-like
workload (docs/evstore.md).

One seeded stream of attune-workload's Criteo-like generator (profile ``kaggle`` by default) is
split in order: the first ``--train`` requests train a small DLRM (:mod:`attune.embed.dlrm`), the
trained tables are written to an embedding store, the last ``--warm`` training requests warm its
cache, and the following ``--test`` requests are served by the store and scored.

Modes:

* ``accuracy``: PR-AUC of the model fed by the store, one row per configuration (cache fraction
  of all rows, precisions, EVProx on/off), against exact fp32 embeddings (``pr_auc_exact``);
  ``pr_auc_loss_rel`` is the relative loss. Also the store's perfect-hit rates.
* ``latency``: per-request lookup latency (one request per call, wall clock, p50/p95/p99 and
  mean) with the page cache of the table files dropped before every request
  (``posix_fadvise(DONTNEED)``, outside the timed call), so misses are real reads, with and
  without EVProx at each cache fraction.
* ``sla``: the same per-request measurement for every cache configuration in ``--configs`` at
  every cache fraction in ``--fractions``, against a 2 ms average-latency SLA (``--sla-ms``):
  ``none`` (no cache, page cache dropped before every request), ``pagecache`` (no cache, the OS
  page cache keeps the table files: every table in memory), and ``POLICY[@BITS+BITS]`` (the
  store's cache with that policy and precisions). No model is trained: the tables are seeded
  random rows in [-1, 1] (latency does not depend on the values); ``--warm`` requests warm the
  cache and ``--test`` are timed. Each row says whether its mean meets the SLA; the smallest
  fraction that does per configuration is the study's answer.
* ``backends``: the same per-request measurement (seeded random tables, no model) with the rows
  on each back end in ``--backends`` (``file``: flat files read with ``pread``; ``kv``: one
  Attune-DB database, a request's misses read with one ``multi_get``), ``--policy`` at every
  fraction in ``--fractions``, with a warm page cache and a cold one (every file of the back
  end dropped with ``posix_fadvise(DONTNEED)`` before every request, outside the timed call).
  Rows of ``kv`` carry ``mean_us_over_file`` etc.: the ratio to ``file`` in the same run.

EVProx's surrogates are computed from the trained embeddings (top-10 nearest neighbours,
euclidean, exact) and the training stream's access counts; L3 gets ``--l3-share`` of the cache.

Rows (JSON lines, ``--out`` appends; every row has ``command`` and ``machine``).
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys
import tempfile
import time

import numpy as np

#: Default configurations of ``accuracy``: (label, cache fraction, precisions, EVProx).
ACCURACY_CONFIGS = (
    ("fp32-all", 1.0, (32,), False),
    ("fp16-all", 1.0, (16,), False),
    ("int8-all", 1.0, (8,), False),
    ("int4-all", 1.0, (4,), False),
    ("fp32-5%", 0.05, (32,), False),
    ("int8+int4-5%", 0.05, (8, 4), False),
    ("fp32+int4-5%", 0.05, (32, 4), False),
    ("fp32-5%+prox", 0.05, (32,), True),
    ("int8+int4-5%+prox", 0.05, (8, 4), True),
    ("fp32-20%", 0.2, (32,), False),
    ("fp32-20%+prox", 0.2, (32,), True),
)


#: Default configurations of ``sla``.
SLA_CONFIGS = "none,pagecache,lru,car,clockpro,ev-lfu,ev-arc,lru@8+4,ev-lfu@8+4,ev-arc@8+4"


def add_parser(verbs) -> None:
    from attune.cli import add_output_flags

    p = verbs.add_parser(
        "evstore",
        help="EVStore: PR-AUC of exact, quantised and approximate embeddings; EVProx latency",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "--mode", choices=("accuracy", "latency", "sla", "ceiling", "backends"), default="accuracy"
    )
    p.add_argument(
        "--backends", default="file,kv", help="backends: the back ends compared (file,kv)"
    )
    p.add_argument("--generator", choices=("kaggle", "zipf"), default="kaggle")
    p.add_argument("--scale", type=float, default=0.001, help="cardinality scale (0.001)")
    p.add_argument("--train", type=int, default=300_000, help="training requests (300000)")
    p.add_argument("--warm", type=int, default=50_000, help="cache warm-up requests (50000)")
    p.add_argument("--test", type=int, default=50_000, help="scored requests (50000)")
    p.add_argument("--epochs", type=int, default=1, help="training epochs (1)")
    p.add_argument("--policy", default="ev-lfu", help="cache policy (ev-lfu)")
    p.add_argument("--l3-share", type=float, default=0.04, help="EVProx's share (0.04)")
    p.add_argument(
        "--fractions",
        default="0.05,0.2",
        help="latency: cache fractions of all rows (0.05,0.2)",
    )
    p.add_argument("--precisions", default="32", help="latency: tier bits, e.g. 8,4 (32)")
    p.add_argument(
        "--configs",
        default=SLA_CONFIGS,
        help=f"sla: cache configurations ({SLA_CONFIGS})",
    )
    p.add_argument("--sla-ms", type=float, default=2.0, help="sla: mean latency target (2.0)")
    p.add_argument("--seed", type=int, default=1, help="generator and model seed (1)")
    add_output_flags(p, out="append the JSON rows to PATH")
    p.set_defaults(func=run)


def _setup(args, d: str):
    """Generates the stream, trains the model, writes its tables; returns what the modes need."""
    from attune import workload
    from attune.embed import load_table, surrogates
    from attune.embed.dlrm import DLRM

    n = args.train + args.test
    gen = workload.criteo(n, scale=args.scale, seed=args.seed, profile=args.generator)
    keys, dense, clicks = gen["keys"], gen["dense"], gen["clicks"]
    cards = [int(c) for c in gen["cardinalities"]]
    model = DLRM(cards, dim=36, seed=args.seed)
    t0 = time.perf_counter()
    losses = model.train(
        keys[: args.train], dense[: args.train], clicks[: args.train], epochs=args.epochs
    )
    train_s = time.perf_counter() - t0
    names = [f"C{t + 1}" for t in range(len(cards))]
    for t, name in enumerate(names):
        load_table(d, name, model.embeddings[t])
    t0 = time.perf_counter()
    sur = {}
    for t, name in enumerate(names):
        counts = np.bincount(keys[: args.train, t].astype(np.int64), minlength=cards[t])
        sur[name] = surrogates(model.embeddings[t], counts, k=10)
    knn_s = time.perf_counter() - t0
    return {
        "keys": keys,
        "dense": dense,
        "clicks": clicks,
        "cards": cards,
        "model": model,
        "names": names,
        "surrogates": sur,
        "losses": losses,
        "train_seconds": train_s,
        "knn_seconds": knn_s,
    }


def _store(args, d, s, fraction, precisions, prox):
    from attune.embed import EmbeddingStore

    total = sum(s["cards"])
    cache_bytes = int(total * fraction * 36 * 4)
    return EmbeddingStore(
        d,
        tables=s["names"],
        cache_bytes=cache_bytes,
        policy=args.policy,
        precisions=list(precisions),
        surrogates=s["surrogates"] if prox else None,
        l3_share=args.l3_share if prox else 0.0,
    )


def _accuracy(args, d, s, base) -> list[dict]:
    from attune.embed.dlrm import pr_auc

    lo, hi = args.train, args.train + args.test
    test_keys, test_dense, test_y = s["keys"][lo:hi], s["dense"][lo:hi], s["clicks"][lo:hi]
    exact = pr_auc(test_y, s["model"].predict(test_dense, s["model"].lookup(test_keys)))
    rows = [{**base, "kind": "exact", "config": "exact", "pr_auc": exact}]
    warm = s["keys"][max(0, args.train - args.warm) : args.train]
    for label, fraction, precs, prox in ACCURACY_CONFIGS:
        st = _store(args, d, s, fraction, precs, prox)
        for i in range(0, len(warm), 8192):
            st.lookup(warm[i : i + 8192])
        before = st.stats()
        emb = np.concatenate(
            [st.lookup(test_keys[i : i + 8192]) for i in range(0, len(test_keys), 8192)]
        )
        after = st.stats()
        st.close()
        auc = pr_auc(test_y, s["model"].predict(test_dense, emb))
        req = max(1, after["requests"] - before["requests"])
        keys_n = max(1, after["keys"] - before["keys"])
        rows.append(
            {
                **base,
                "kind": "config",
                "config": label,
                "cache_fraction": fraction,
                "precisions": list(precs),
                "evprox": prox,
                "l3_share": args.l3_share if prox else 0.0,
                "pr_auc": auc,
                "pr_auc_exact": exact,
                "pr_auc_loss_rel": (exact - auc) / exact,
                "pr_auc_loss_pct": 100.0 * (exact - auc) / exact,
                "perfect_rate": (after["perfect"] - before["perfect"]) / req,
                "perfect_approx_rate": (after["perfect_approx"] - before["perfect_approx"]) / req,
                "l3_hit_rate": (after["l3_hits"] - before["l3_hits"]) / keys_n,
                "clipped": after["clipped"],
            }
        )
    return rows


def _timed_lookups(st, warm, test, fds) -> tuple[dict, np.ndarray, dict]:
    """Warms `st` with `warm` (batches of 8192), then times one request of `test` at a time,
    dropping the page cache of `fds` before each: (stats before, nanoseconds per request,
    stats after)."""
    for i in range(0, len(warm), 8192):
        st.lookup(warm[i : i + 8192])
    before = st.stats()
    lat = np.empty(len(test), dtype=np.float64)
    for i in range(len(test)):
        for fd in fds:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        t0 = time.perf_counter_ns()
        st.lookup(test[i : i + 1])
        lat[i] = time.perf_counter_ns() - t0
    return before, lat, st.stats()


def _latency(args, d, s, base) -> list[dict]:
    fractions = [float(x) for x in args.fractions.split(",")]
    precs = [int(x) for x in args.precisions.split(",")]
    lo, hi = args.train, args.train + args.test
    test_keys = s["keys"][lo:hi]
    warm = s["keys"][max(0, args.train - args.warm) : args.train]
    fds = [os.open(os.path.join(d, f"{n}.emb"), os.O_RDONLY) for n in s["names"]]
    rows = []
    try:
        for fraction in fractions:
            for prox in (False, True):
                st = _store(args, d, s, fraction, precs, prox)
                before, lat, after = _timed_lookups(st, warm, test_keys, fds)
                st.close()
                req = max(1, after["requests"] - before["requests"])
                rows.append(
                    {
                        **base,
                        "kind": "latency",
                        "config": f"{'+'.join(map(str, precs))}-{fraction:g}"
                        + ("+prox" if prox else ""),
                        "cache_fraction": fraction,
                        "precisions": precs,
                        "evprox": prox,
                        "l3_share": args.l3_share if prox else 0.0,
                        "mean_us": float(lat.mean() / 1e3),
                        "p50_us": float(np.percentile(lat, 50) / 1e3),
                        "p95_us": float(np.percentile(lat, 95) / 1e3),
                        "p99_us": float(np.percentile(lat, 99) / 1e3),
                        "perfect_rate": (after["perfect"] - before["perfect"]) / req,
                        "perfect_approx_rate": (after["perfect_approx"] - before["perfect_approx"])
                        / req,
                        "misses_per_request": (after["misses"] - before["misses"]) / req,
                        "load_avg_1m": os.getloadavg()[0],
                    }
                )
    finally:
        for fd in fds:
            os.close(fd)
    # Ratios with EVProx over without, per fraction.
    by = {(r["cache_fraction"], r["evprox"]): r for r in rows}
    for r in rows:
        off = by.get((r["cache_fraction"], False))
        if r["evprox"] and off:
            for q in ("mean_us", "p95_us", "p99_us"):
                r[f"{q}_over_without"] = r[q] / off[q] if off[q] else None
    return rows


def _setup_random(args, d: str):
    """The stream and seeded random tables (for ``sla``: no model)."""
    from attune import workload
    from attune.embed import load_table

    n = args.warm + args.test
    gen = workload.criteo(n, scale=args.scale, seed=args.seed, profile=args.generator)
    cards = [int(c) for c in gen["cardinalities"]]
    names = [f"C{t + 1}" for t in range(len(cards))]
    rng = np.random.default_rng(args.seed)
    for name, c in zip(names, cards):
        load_table(d, name, rng.uniform(-1, 1, size=(c, 36)).astype(np.float32))
    return {"keys": gen["keys"], "cards": cards, "names": names}


def _files(path: str) -> list[str]:
    out = []
    for root, _, names in os.walk(path):
        out.extend(os.path.join(root, n) for n in names)
    return out


def _backends(args, d: str, base) -> list[dict]:
    """Per-request latency and perfect hits with the rows on each back end, warm and cold."""
    from attune import workload
    from attune.embed import BACKENDS, EmbeddingStore, load_table
    from attune.errors import InvalidArgumentError

    backends = [b.strip() for b in args.backends.split(",") if b.strip()]
    for b in backends:
        if b not in BACKENDS:
            raise InvalidArgumentError(f"--backends: unknown backend `{b}`")
    fractions = [float(x) for x in args.fractions.split(",")]
    precs = [int(x) for x in args.precisions.split(",")]
    gen = workload.criteo(
        args.warm + args.test, scale=args.scale, seed=args.seed, profile=args.generator
    )
    keys = gen["keys"]
    cards = [int(c) for c in gen["cardinalities"]]
    names = [f"C{t + 1}" for t in range(len(cards))]
    rng = np.random.default_rng(args.seed)
    tables = [rng.uniform(-1, 1, size=(c, 36)).astype(np.float32) for c in cards]
    load_s = {}
    for b in backends:
        t0 = time.perf_counter()
        for name, v in zip(names, tables):
            load_table(os.path.join(d, b), name, v, backend=b)
        load_s[b] = time.perf_counter() - t0
    warm, test = keys[: args.warm], keys[args.warm :]
    total = sum(cards)
    rows = []
    for fraction in fractions:
        for cold in (False, True):
            for b in backends:
                path = os.path.join(d, b)
                st = EmbeddingStore(
                    path,
                    tables=names,
                    cache_bytes=int(total * fraction * 36 * 4),
                    policy=args.policy,
                    precisions=precs,
                    backend=b,
                )
                fds = [os.open(f, os.O_RDONLY) for f in _files(path)] if cold else []
                try:
                    before, lat, after = _timed_lookups(st, warm, test, fds)
                finally:
                    for fd in fds:
                        os.close(fd)
                    st.close()
                req = max(1, after["requests"] - before["requests"])
                rows.append(
                    {
                        **base,
                        "kind": "backends",
                        "config": f"{b}-{'cold' if cold else 'warm'}",
                        "backend": b,
                        "page_cache": "cold" if cold else "warm",
                        "cache_fraction": fraction,
                        "precisions": precs,
                        "total_rows": total,
                        "load_seconds": load_s[b],
                        "mean_us": float(lat.mean() / 1e3),
                        "p50_us": float(np.percentile(lat, 50) / 1e3),
                        "p95_us": float(np.percentile(lat, 95) / 1e3),
                        "p99_us": float(np.percentile(lat, 99) / 1e3),
                        "perfect_rate": (after["perfect"] - before["perfect"]) / req,
                        "misses_per_request": (after["misses"] - before["misses"]) / req,
                        "load_avg_1m": os.getloadavg()[0],
                    }
                )
    by = {(r["cache_fraction"], r["page_cache"], r["backend"]): r for r in rows}
    for r in rows:
        ref = by.get((r["cache_fraction"], r["page_cache"], "file"))
        if r["backend"] != "file" and ref:
            for q in ("mean_us", "p50_us", "p95_us", "p99_us"):
                r[f"{q}_over_file"] = r[q] / ref[q] if ref[q] else None
    return rows


def _parse_config(c: str):
    """``none`` | ``pagecache`` | ``POLICY[@BITS+BITS]`` -> (policy or None, precisions, drop)."""
    from attune.errors import InvalidArgumentError

    if c == "none":
        return None, [32], True
    if c == "pagecache":
        return None, [32], False
    policy, _, bits = c.partition("@")
    try:
        precs = [int(b) for b in bits.split("+")] if bits else [32]
    except ValueError:
        raise InvalidArgumentError(f"--configs: cannot parse `{c}` (POLICY[@BITS+BITS])") from None
    return policy, precs, True


def _sla(args, d, s, base) -> list[dict]:
    from attune.embed import EmbeddingStore

    fractions = [float(x) for x in args.fractions.split(",")]
    configs = [c.strip() for c in args.configs.split(",") if c.strip()]
    parsed = {c: _parse_config(c) for c in configs}
    warm, test_keys = s["keys"][: args.warm], s["keys"][args.warm :]
    total = sum(s["cards"])
    fds = [os.open(os.path.join(d, f"{n}.emb"), os.O_RDONLY) for n in s["names"]]
    rows = []
    try:
        for c in configs:
            policy, precs, drop = parsed[c]
            for fraction in [0.0] if policy is None else fractions:
                cache_bytes = int(total * fraction * 36 * 4)
                st = EmbeddingStore(
                    d,
                    tables=s["names"],
                    cache_bytes=cache_bytes,
                    policy=policy or "lru",
                    precisions=precs,
                )
                for i in range(0, len(warm), 8192):
                    st.lookup(warm[i : i + 8192])
                if not drop:
                    st.lookup(test_keys)  # the OS page cache holds every row read
                before = st.stats()
                lat = np.empty(len(test_keys), dtype=np.float64)
                for i in range(len(test_keys)):
                    if drop:
                        for fd in fds:
                            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
                    t0 = time.perf_counter_ns()
                    st.lookup(test_keys[i : i + 1])
                    lat[i] = time.perf_counter_ns() - t0
                after = st.stats()
                st.close()
                req = max(1, after["requests"] - before["requests"])
                mean_ms = float(lat.mean() / 1e6)
                rows.append(
                    {
                        **base,
                        "kind": "sla",
                        "config": c,
                        "policy": policy or c,
                        "precisions": precs,
                        # Memory for the tables: the cache, or every row in the page cache.
                        "cache_fraction": fraction if drop else 1.0,
                        "mean_us": mean_ms * 1e3,
                        "p50_us": float(np.percentile(lat, 50) / 1e3),
                        "p95_us": float(np.percentile(lat, 95) / 1e3),
                        "p99_us": float(np.percentile(lat, 99) / 1e3),
                        "sla_ms": args.sla_ms,
                        "meets_sla": mean_ms <= args.sla_ms,
                        "perfect_rate": (after["perfect"] - before["perfect"]) / req,
                        "misses_per_request": (after["misses"] - before["misses"]) / req,
                        "load_avg_1m": os.getloadavg()[0],
                    }
                )
    finally:
        for fd in fds:
            os.close(fd)
    # The smallest fraction meeting the SLA, per configuration.
    for c in configs:
        ok = [r["cache_fraction"] for r in rows if r["config"] == c and r["meets_sla"]]
        for r in rows:
            if r["config"] == c:
                r["min_fraction_meeting_sla"] = min(ok) if ok else None
    return rows


def _ceiling(args, base) -> list[dict]:
    """Perfect-hit limits on one stream (``--warm`` + ``--test`` requests, counted over the
    ``--test`` ones): the share of requests holding a key's first reference in the stream
    (never perfect, whatever the cache), and two static oracles per ``--fractions`` size that
    know the window's key counts: the most used keys, and whole requests in order of their
    rarest key's count (group-aware); an oracle's request counts only if it holds no first
    reference. ``--policy`` (and each policy named in ``--configs``) runs online on the same
    stream for the ratio."""
    import numpy as np

    from attune import embed, workload

    n = args.warm + args.test
    g = workload.criteo(n, tables=26, scale=args.scale, seed=args.seed, profile=args.generator)
    keys = g["keys"]
    total = int(g["cardinalities"].sum())
    tagged = keys.astype(np.int64) + (np.arange(keys.shape[1], dtype=np.int64)[None, :] << 40)
    meas = tagged[args.warm :]
    _, inv, cnt = np.unique(meas.ravel(), return_inverse=True, return_counts=True)
    inv = inv.reshape(meas.shape)
    _, first = np.unique(tagged.ravel(), return_index=True)
    is_first = np.zeros(tagged.size, bool)
    is_first[first] = True
    fresh = is_first.reshape(tagged.shape)[args.warm :].any(axis=1)
    once = float(fresh.mean())
    by_count = np.argsort(-cnt, kind="stable")
    by_rarest = [r for r in np.argsort(-cnt[inv].min(axis=1), kind="stable") if not fresh[r]]
    policies = [args.policy] + [
        c for c in args.configs.split(",") if c in embed.POLICIES and c != args.policy
    ]
    rows = []
    for f in (float(x) for x in args.fractions.split(",")):
        cap = int(total * f)
        row = dict(base, kind="ceiling", cache_fraction=f, capacity_rows=cap)
        row["first_reference_rate"] = once
        top = np.zeros(len(cnt), bool)
        top[by_count[:cap]] = True
        row["oracle_top_perfect"] = float((top[inv].all(axis=1) & ~fresh).mean())
        grp = np.zeros(len(cnt), bool)
        used = 0
        for r in by_rarest:
            new = np.unique(inv[r][~grp[inv[r]]])
            if used + len(new) <= cap:
                grp[new] = True
                used += len(new)
            elif used >= cap - 1:
                break
        row["oracle_group_perfect"] = float((grp[inv].all(axis=1) & ~fresh).mean())
        for pol in policies:
            sim = embed.simulate(keys, policy=pol, capacity=cap, warmup=args.warm)
            row[f"{pol}_perfect"] = sim["perfect_rate"]
        ref = row[f"{args.policy}_perfect"]
        row["oracle_top_vs_policy"] = row["oracle_top_perfect"] / ref if ref else None
        row["oracle_group_vs_policy"] = row["oracle_group_perfect"] / ref if ref else None
        row["config"] = f"ceiling {args.policy}"
        rows.append(row)
    return rows


def run(args) -> int:
    from attune.errors import InvalidArgumentError

    if min(args.train, args.test) < 1 or args.warm < 0 or args.scale <= 0 or args.scale > 1:
        raise InvalidArgumentError("--train/--test must be >= 1, --warm >= 0, --scale in (0, 1]")
    if not 0 <= args.l3_share <= 0.5:
        raise InvalidArgumentError(f"--l3-share must be in [0, 0.5], got {args.l3_share}")
    command = "attune bench evstore " + shlex.join(sys.argv[3:])
    base = {
        "bench": "evstore",
        "mode": args.mode,
        "generator": args.generator,
        "scale": args.scale,
        "train": args.train,
        "warm": args.warm,
        "test": args.test,
        "policy": args.policy,
        "seed": args.seed,
    }
    if args.mode == "ceiling":
        return _emit(args, _ceiling(args, base), command)
    if args.mode == "backends":
        with tempfile.TemporaryDirectory(prefix="attune-evstore-") as d:
            rows = _backends(args, d, base)
        return _emit(args, rows, command)
    if args.mode == "sla":
        for c in args.configs.split(","):
            _parse_config(c.strip())
        with tempfile.TemporaryDirectory(prefix="attune-evstore-") as d:
            rows = _sla(args, d, _setup_random(args, d), base)
        return _emit(args, rows, command)
    with tempfile.TemporaryDirectory(prefix="attune-evstore-") as d:
        s = _setup(args, d)
        base["train_seconds"] = s["train_seconds"]
        base["knn_seconds"] = s["knn_seconds"]
        base["train_loss"] = s["losses"][-1]
        rows = (
            _accuracy(args, d, s, base) if args.mode == "accuracy" else _latency(args, d, s, base)
        )
    return _emit(args, rows, command)


def _emit(args, rows, command) -> int:
    from attune.bench import machine, write_rows

    mach = machine()
    lines = write_rows(rows, command, mach, args.out)
    if args.json:
        print("\n".join(lines))
        return 0
    for r in rows:
        keys = (
            "oracle_top_perfect",
            "oracle_group_perfect",
            "oracle_group_vs_policy",
            "pr_auc",
            "pr_auc_loss_rel",
            "perfect_rate",
            "perfect_approx_rate",
            "mean_us",
            "p95_us",
            "p99_us",
        )
        label = r["config"]
        if r.get("kind") in ("sla", "ceiling", "backends"):
            label = f"{label} {r['cache_fraction']:g}"
        print(f"{label:22} " + "  ".join(f"{k} {r[k]:.4f}" for k in keys if k in r))
    return 0

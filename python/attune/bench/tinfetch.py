"""`attune bench tinfetch`: every prefetcher's hit rate, accuracy, timeliness, bandwidth load and
score over many samples of block traces (:mod:`attune.io.prefetch`).

Samples: each MSR cut whole (10,000 I/Os: the cuts are no longer), ``--windows`` windows of
10k–100k I/Os of the CloudPhysics sample, and ``--synthetic-windows`` generated traces of each
synthetic workload (``seq``, ``stride``, ``mixed``, ``random``; 10k–50k I/Os, 8 jobs). Every
method is measured on the second half of each sample (the first half warms it up and trains the
LSTM: the chapter's 50:50 split). The TinFetch network is pretrained once, on the first halves of
the real traces (whose second halves hold every measured real sample) plus noisy synthetic
sequences, or taken from ``--model``.

Rows (JSON lines, ``--out`` appends; every row has ``command`` and ``machine``):

* ``kind = "method"``: one per sample and method: ``hit_rate``, ``accuracy``, ``timeliness``,
  ``bandwidth_load``, ``score``, block counts, and ``score_over_best_heuristic`` (over the best
  of readahead, stride, Markov and Leap in the same sample);
* ``kind = "sample"``: one per sample: ``tinfetch_over_best_heuristic``,
  ``tinfetch_over_lstm`` and which heuristic was best;
* ``kind = "training"``: the pretrained model's rows, training seconds and MAE (1 KiB units).
"""

from __future__ import annotations

import argparse
import shlex
import statistics
import sys
import time
from pathlib import Path

import numpy as np

from attune.bench.heimdall import _SHARED, DEFAULT_TRACES

#: The heuristics TinFetch is compared with (``none`` is reported but never "best").
BASELINES = ("readahead", "stride", "markov", "leap")
SYNTHETIC = ("seq", "stride", "mixed", "random")


def add_parser(verbs) -> None:
    from attune.cli import add_output_flags

    p = verbs.add_parser(
        "tinfetch",
        help="prefetchers' hit rate, bandwidth load and score over trace samples",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("traces", nargs="*", help="trace files (default: the shared samples)")
    p.add_argument("--windows", type=int, default=12, help="windows of long traces (12)")
    p.add_argument(
        "--synthetic-windows", type=int, default=3, help="traces per synthetic workload (3)"
    )
    p.add_argument("--model", help="TinFetch weight file (default: pretrain one)")
    p.add_argument("--epochs", type=int, default=6, help="pretraining epochs (6)")
    p.add_argument("--synthetic-rows", type=int, default=100_000, help="synthetic rows (100000)")
    p.add_argument("--no-lstm", action="store_true", help="skip the LSTM baseline")
    p.add_argument("--seed", type=int, default=1, help="window and training seed (1)")
    add_output_flags(p, out="append the JSON rows to PATH")
    p.set_defaults(func=run)


def _samples(pool, windows: int, synthetic: int, seed: int):
    """(source, trace) pairs; real windows keep their measured half in the trace's second half."""
    from attune.io import prefetch as pf

    rng = np.random.default_rng(seed)
    out = []
    for t in pool:
        n = len(t)
        source = t.name.split("-")[0].split(".")[0]
        if n <= 20_000:
            out.append((source, t))
            continue
        for _ in range(windows):
            length = int(rng.integers(10_000, min(100_000, n) + 1))
            lo = max(0, n // 2 - length // 2)
            hi = n - length
            start = int(rng.integers(lo, hi + 1)) if hi >= lo else 0
            w = t.slice(start, start + length)
            out.append((source, w))
    for kind in SYNTHETIC:
        for k in range(synthetic):
            n = int(rng.integers(10_000, 50_001))
            out.append((f"synthetic-{kind}", pf.synthetic_trace(kind, n, 8, seed * 100 + k)))
    return out


def pretrain(pool, *, epochs: int, synthetic_rows: int, seed: int):
    """The pretrained network: the first half of every trace plus synthetic rows."""
    from attune.io import prefetch as pf

    halves = [t.slice(0, len(t) // 2) for t in pool]
    x, y = pf.training_set(halves, synthetic=synthetic_rows, seed=seed)
    t0 = time.process_time()
    r = pf.train(x, y, epochs=epochs, seed=seed)
    return r, time.process_time() - t0


def run(args) -> int:
    from attune.bench import machine, write_rows
    from attune.cli import progress
    from attune.errors import InvalidArgumentError
    from attune.io import load_trace
    from attune.io import prefetch as pf

    paths = [Path(t) for t in args.traces] or [_SHARED / n for n in DEFAULT_TRACES]
    missing = [str(p) for p in paths if not p.exists()]
    if missing:
        raise InvalidArgumentError(f"trace files not found: {', '.join(missing)}")
    pool = [load_trace(p) for p in paths]
    command = (
        "attune bench tinfetch " + shlex.join(sys.argv[3:])
        if len(sys.argv) > 3
        else "attune bench tinfetch"
    )
    mach = machine()
    rows: list[dict] = []
    if args.model:
        model = pf.load_model(args.model)
    else:
        r, secs = pretrain(
            pool, epochs=args.epochs, synthetic_rows=args.synthetic_rows, seed=args.seed
        )
        model = r.to_bytes()
        rows.append(
            {
                "bench": "tinfetch",
                "kind": "training",
                "rows": r.rows,
                "epochs": args.epochs,
                "cpu_seconds": round(secs, 2),
                "mae_units": round(r.mae_units, 2),
            }
        )
    samples = _samples(pool, args.windows, args.synthetic_windows, args.seed)
    methods = ["none", *BASELINES, *pf.TINFETCH_VARIANTS]
    with progress(args, total=len(samples), desc="samples", unit="sample") as bar:
        for i, (source, t) in enumerate(samples):
            half = len(t) // 2
            preds = None
            if not args.no_lstm:
                preds = pf.lstm_predictions(t, seed=args.seed)
            res = pf.evaluate(t, methods, model, measure_from=half, predictions=preds)
            by = {m["method"]: m for m in res}
            best_name = max(BASELINES, key=lambda b: by[b]["score"])
            best = by[best_name]["score"]
            base = {
                "bench": "tinfetch",
                "sample": i,
                "source": source,
                "ios": len(t),
                "seed": args.seed,
            }
            for m in res:
                rows.append(
                    {
                        **base,
                        "kind": "method",
                        **m,
                        "score_over_best_heuristic": _ratio(m["score"], best),
                    }
                )
            tf = by["tinfetch"]["score"]
            rows.append(
                {
                    **base,
                    "kind": "sample",
                    "best_heuristic": best_name,
                    "tinfetch_over_best_heuristic": _ratio(tf, best),
                    "tinfetch_over_lstm": _ratio(tf, by["lstm"]["score"]) if "lstm" in by else None,
                }
            )
            bar.update(1)
    lines = write_rows(rows, command, mach, args.out)
    if args.json:
        print("\n".join(lines))
        return 0
    _print_summary(rows)
    return 0


def _ratio(a: float, b: float) -> float | None:
    """a / b; ``None`` when b is 0 (no heuristic scored anything)."""
    return a / b if b > 0 else None


def _print_summary(rows: list[dict]) -> None:
    per: dict[str, list[float]] = {}
    for r in rows:
        if r["kind"] == "method":
            per.setdefault(r["method"], []).append(r["score"])
    n = len(next(iter(per.values()), []))
    print(f"{n} samples: median score per method")
    for m, v in sorted(per.items(), key=lambda kv: -statistics.median(kv[1])):
        print(f"  {m:24} {statistics.median(v):8.3f}")
    ratios = [
        r["tinfetch_over_best_heuristic"]
        for r in rows
        if r["kind"] == "sample" and r["tinfetch_over_best_heuristic"] is not None
    ]
    if ratios:
        print(f"  tinfetch / best heuristic, median over samples: {statistics.median(ratios):.2f}")

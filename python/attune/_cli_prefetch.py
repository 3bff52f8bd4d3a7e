"""`attune io prefetch`: TinFetch and the block prefetchers.

* ``attune io prefetch eval TRACE [--model MODEL]``: every method's hit rate, accuracy,
  timeliness, bandwidth load and score on TRACE, measured on its second half (the first half
  warms the prefetchers up and trains the LSTM baseline; prefetches issued there never count as
  hits in the second). Without ``--model`` a TinFetch network is trained first on the first half
  plus noisy synthetic sequences (``--seed`` seeds it and the LSTM). "n/a" timeliness: no
  prefetched block was used.
* ``attune io prefetch train TRACE... --out MODEL``: train the 10→128→16→1 network on the first
  half of each trace plus synthetic sequences; write the checksummed weight file.

Design note: ``docs/tinfetch.md``.
"""

from __future__ import annotations

import argparse
import json

DESCRIPTION = (__doc__ or "").replace("``", "")


def _nonneg(text: str) -> int:
    """An argparse type: an integer ≥ 0 (says "negative" for a negative one)."""
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if v < 0:
        raise argparse.ArgumentTypeError(f"{v} is negative")
    return v


def _positive(text: str) -> int:
    """An argparse type: an integer ≥ 1."""
    v = _nonneg(text)
    if v == 0:
        raise argparse.ArgumentTypeError("0: must be at least 1")
    return v


def _seed(text: str) -> int:
    v = _nonneg(text)
    if v >= 2**64:
        raise argparse.ArgumentTypeError(f"{v} is too large (at most 2^64 - 1)")
    return v


def _traces(args):
    from attune.errors import InvalidArgumentError
    from attune.io import load_trace

    paths = args.trace if isinstance(args.trace, list) else [args.trace]
    out = []
    for p in paths:
        t = load_trace(p, args.format)
        if len(t) == 0:
            raise InvalidArgumentError(f"trace {p} holds no I/Os", str(p))
        out.append(t)
    return out


def _check_out(path: str) -> None:
    """Refuses an unwritable ``--out`` before any training starts (the file is not created)."""
    import os

    from attune.errors import StorageIOError

    parent = os.path.dirname(os.path.abspath(path)) or "."
    if os.path.isdir(path):
        raise StorageIOError(f"cannot write model {path}: it is a directory", path)
    if not os.path.isdir(parent):
        raise StorageIOError(f"cannot write model {path}: no directory {parent}", path)
    target = path if os.path.exists(path) else parent
    if not os.access(target, os.W_OK):
        raise StorageIOError(f"cannot write model {path}: permission denied", path)


def _eval(args) -> int:
    from attune.io import prefetch as pf

    (t,) = _traces(args)
    if args.model:
        model = pf.load_model(args.model)
    else:
        x, y = pf.training_set(
            [t.slice(0, len(t) // 2)], synthetic=args.synthetic_rows, seed=args.seed
        )
        model = pf.train(x, y, epochs=args.epochs, seed=args.seed).to_bytes()
    methods = ["none", "readahead", "stride", "markov", "leap", *pf.TINFETCH_VARIANTS]
    preds = None if args.no_lstm else pf.lstm_predictions(t, seed=args.seed)
    half = len(t) // 2
    res = pf.evaluate(
        t,
        methods,
        model,
        measure_from=half,
        delay_ms=args.delay_ms,
        reads_only=args.reads_only,
        predictions=preds,
    )
    if args.json:
        print(json.dumps({"trace": t.name, "ios": len(t), "measured_from": half, "methods": res}))
        return 0
    print(f"{t.name}: {len(t)} I/Os, measured from {half} (delay {args.delay_ms} ms)")
    print(f"  {'method':22} {'hit':>7} {'accuracy':>9} {'timely':>7} {'bw load':>8} {'score':>7}")
    for m in res:
        timely = "n/a" if m["timeliness"] is None else f"{m['timeliness']:.1%}"
        print(
            f"  {m['method']:22} {m['hit_rate']:7.1%} {m['accuracy']:9.1%} "
            f"{timely:>7} {m['bandwidth_load']:8.1%} {m['score']:7.3f}"
        )
    print("  (timely n/a: no prefetched block was used; warm-up prefetches never count as hits)")
    return 0


def _train(args) -> int:
    from attune.io import prefetch as pf

    _check_out(args.out)
    pool = _traces(args)
    halves = [t.slice(0, len(t) // 2) for t in pool]
    x, y = pf.training_set(halves, synthetic=args.synthetic_rows, seed=args.seed)
    trace_rows = len(x) - args.synthetic_rows
    if trace_rows == 0:
        from attune.errors import InvalidArgumentError

        raise InvalidArgumentError(
            "the traces' first halves give no training rows (too few I/Os per stream)"
        )
    r = pf.train(x, y, epochs=args.epochs, seed=args.seed)
    r.save(args.out)
    if args.json:
        print(
            json.dumps(
                {
                    "out": args.out,
                    "rows": r.rows,
                    "trace_rows": trace_rows,
                    "mae_units": r.mae_units,
                    "mae_kib": r.mae_units,
                }
            )
        )
    else:
        print(
            f"wrote {args.out}: {r.rows} rows ({trace_rows} from the traces), "
            f"MAE {r.mae_units:.1f} KiB"
        )
    return 0


def add_parser(vs) -> None:
    """Adds ``prefetch`` under ``attune io``."""
    from attune.cli import add_output_flags

    p = vs.add_parser(
        "prefetch",
        help="TinFetch and the block prefetchers: evaluate, train",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ps = p.add_subparsers(dest="prefetch_verb", metavar="COMMAND", required=True)
    for name in ("eval", "train"):
        q = ps.add_parser(
            name,
            help="every method's metrics on TRACE" if name == "eval" else "train a model",
        )
        q.add_argument("trace", nargs=None if name == "eval" else "+", metavar="TRACE")
        q.add_argument(
            "--format",
            choices=("msr", "cloudphysics", "attune-csv", "attune"),
            help="trace format (sniffed when omitted)",
        )
        q.add_argument("--epochs", type=_positive, default=6, help="training epochs, ≥ 1 (6)")
        q.add_argument(
            "--synthetic-rows",
            type=_nonneg,
            default=100_000,
            help="synthetic training rows (100000)",
        )
        q.add_argument("--seed", type=_seed, default=0, help="training seed, ≥ 0 (0)")
        if name == "eval":
            q.add_argument("--model", help="TinFetch weight file (default: train one)")
            q.add_argument("--delay-ms", type=float, default=20.0, help="pending delay (20)")
            q.add_argument("--reads-only", action="store_true", help="only reads are demands")
            q.add_argument("--no-lstm", action="store_true", help="skip the LSTM baseline")
            add_output_flags(q)
            q.set_defaults(func=_eval)
        else:
            add_output_flags(q, out="weight file to write", out_required=True)
            q.set_defaults(func=_train)

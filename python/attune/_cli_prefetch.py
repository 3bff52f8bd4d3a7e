"""`attune io prefetch`: TinFetch and the block prefetchers.

* ``attune io prefetch eval TRACE [--model MODEL]``: every method's hit rate, accuracy,
  timeliness, bandwidth load and score on TRACE, measured on its second half (the first half
  warms the prefetchers up and trains the LSTM baseline). Without ``--model`` a TinFetch network
  is trained first on the first half plus noisy synthetic sequences.
* ``attune io prefetch train TRACE... --out MODEL``: train the 10→128→16→1 network on the first
  half of each trace plus synthetic sequences; write the checksummed weight file.

Design note: ``docs/tinfetch.md``.
"""

from __future__ import annotations

import argparse
import json

DESCRIPTION = __doc__


def _traces(args):
    from attune.io import load_trace

    paths = args.trace if isinstance(args.trace, list) else [args.trace]
    return [load_trace(p, args.format) for p in paths]


def _eval(args) -> int:
    from attune.io import prefetch as pf

    (t,) = _traces(args)
    if args.model:
        model = pf.load_model(args.model)
    else:
        x, y = pf.training_set([t.slice(0, len(t) // 2)], synthetic=args.synthetic_rows)
        model = pf.train(x, y, epochs=args.epochs).to_bytes()
    methods = ["none", "readahead", "stride", "markov", "leap", *pf.TINFETCH_VARIANTS]
    preds = None if args.no_lstm else pf.lstm_predictions(t)
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
        print(
            f"  {m['method']:22} {m['hit_rate']:7.1%} {m['accuracy']:9.1%} "
            f"{m['timeliness']:7.1%} {m['bandwidth_load']:8.1%} {m['score']:7.3f}"
        )
    return 0


def _train(args) -> int:
    from attune.io import prefetch as pf

    pool = _traces(args)
    halves = [t.slice(0, len(t) // 2) for t in pool]
    x, y = pf.training_set(halves, synthetic=args.synthetic_rows, seed=args.seed)
    r = pf.train(x, y, epochs=args.epochs, seed=args.seed)
    r.save(args.out)
    if args.json:
        print(json.dumps({"out": args.out, "rows": r.rows, "mae_units": r.mae_units}))
    else:
        print(f"wrote {args.out}: {r.rows} rows, MAE {r.mae_units:.1f} KiB")
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
        q.add_argument("--epochs", type=int, default=6, help="training epochs (6)")
        q.add_argument(
            "--synthetic-rows", type=int, default=100_000, help="synthetic training rows (100000)"
        )
        if name == "eval":
            q.add_argument("--model", help="TinFetch weight file (default: train one)")
            q.add_argument("--delay-ms", type=float, default=20.0, help="pending delay (20)")
            q.add_argument("--reads-only", action="store_true", help="only reads are demands")
            q.add_argument("--no-lstm", action="store_true", help="skip the LSTM baseline")
            add_output_flags(q)
            q.set_defaults(func=_eval)
        else:
            q.add_argument("--seed", type=int, default=0, help="training seed (0)")
            add_output_flags(q, out="weight file to write", out_required=True)
            q.set_defaults(func=_train)

"""`attune bench heimdall`: Heimdall's accuracy and every routing policy's read latency over
random windows of block traces served by simulated SSDs (:mod:`attune.io.evaluate`).

Rows (JSON lines, ``--out`` appends; every row has ``command`` and ``machine``):

* ``kind = "policy"``: one per window and policy: read latency ``mean_us``, ``p50_us``,
  ``p99_us``, ``p999_us``, ``redirected`` reads, ``mean_over_heimdall`` / ``p99_over_heimdall``
  (the policy's latency over Heimdall's in the same window: above 1, Heimdall is faster),
  ``mean_over_best_baseline`` (over the best baseline's mean in the window: 0.85 or less meets the
  target), ``p99_over_hedging``, ``gc_share`` (reads that met a busy period, ground truth) and
  ``served_share`` (share of the reads each replica served), ``probe_share`` and
  ``backup_share`` (probe and backup reads sent, per client read) and ``quantiles_us`` (read latency
  at ``evaluate.CDF_PERCENTILES``, for CDF plots);
* ``kind = "accuracy"``: one per window: ROC-AUC of the quantised model against the period labels
  (``auc_period``) and the simulator's busy truth (``auc_busy``), LinnOS's (``auc_linnos_period``),
  the live model's (``auc_period_live``, ``auc_busy_live``: Heimdall's features plus the reads in
  flight), the fraction of busy and slow reads;
* ``kind = "ladder"``: one per window and pipeline stage (``--ladder``): ``auc``;
* ``kind = "joint"``: one per window and joint size P (``--joints``): ``auc``.

Traces default to the samples in ``../shared/data/traces/`` when present; ``--synthetic`` uses
generated ones instead.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import shlex
import sys
from pathlib import Path

DEFAULT_TRACES = (
    "msr-rw_20_80-105.trace",
    "msr-rand_iops-1006.trace",
    "cloudphysics-io.csv.gz",
)
_SHARED = Path(__file__).resolve().parents[4] / "shared" / "data" / "traces"


def add_parser(verbs) -> None:
    from attune._cli_io import add_device_flags
    from attune.cli import add_output_flags

    p = verbs.add_parser(
        "heimdall",
        help="Heimdall's accuracy and per-policy read latency over random trace windows",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("traces", nargs="*", help="trace files (default: the shared samples)")
    p.add_argument("--synthetic", action="store_true", help="generated traces instead")
    p.add_argument("--windows", type=int, default=20, help="window pairs (20)")
    p.add_argument("--window-ios", type=int, default=4000, help="I/Os per window (4000)")
    p.add_argument("--replicas", type=int, choices=(2, 3), default=2)
    p.add_argument("--ladder", action="store_true", help="also the accuracy ladder")
    p.add_argument(
        "--policies",
        default="",
        help="routing policies to run, comma-separated (default: all; heimdall always runs)",
    )
    p.add_argument("--joints", default="", help="joint sizes to measure, e.g. 1,3,9")
    p.add_argument("--no-augment", action="store_true", help="no re-rating or resizing")
    p.add_argument("--epochs", type=int, default=20, help="training epochs (20)")
    p.add_argument(
        "--min-busy",
        type=float,
        default=0.0,
        help="only windows whose halves, served alone, have this share of reads in busy periods",
    )
    p.add_argument(
        "--rule-search",
        action="store_true",
        help="choose each window's labelling rule on its training half (grid search)",
    )
    p.add_argument(
        "--device-model",
        action="store_true",
        help="one model per kind of device, trained on every window's training half",
    )
    p.add_argument(
        "--rank-tie",
        type=float,
        default=2.0,
        help="heimdall-rank: logit margin within which replicas count as tied (2; 0: only "
        "replicas predicted fast)",
    )
    p.add_argument(
        "--slow-factor",
        type=float,
        default=10.0,
        help="heimdall-cost: a replica predicted slow counts as a queue this many times longer (10)",
    )
    p.add_argument(
        "--probe-reads-us",
        type=float,
        default=5000.0,
        help="the *-probe policies: probe a replica with no read completed or in flight for "
        "this many µs (5000)",
    )
    p.add_argument(
        "--live-rank-tie",
        type=float,
        default=1.0,
        help="heimdall-live-rank(-probe): as --rank-tie, for the live model (1)",
    )
    p.add_argument(
        "--unknown-phase",
        action="store_true",
        help="every replica is written a random (seeded) number of bytes before each evaluation "
        "half, and the write clock anchors at observed busy periods instead of counting from an "
        "empty device",
    )
    p.add_argument("--seed", type=int, default=1, help="window and simulation seed (1)")
    p.add_argument(
        "--drift",
        action="store_true",
        help="instead of windows: each whole trace cut into intervals, the model trained once "
        "against retrained when its ROC-AUC falls below --drift-threshold (kind = drift rows)",
    )
    p.add_argument("--drift-interval", type=float, default=60.0, help="seconds (60)")
    p.add_argument("--drift-threshold", type=float, default=0.8, help="ROC-AUC (0.8)")
    p.add_argument("--drift-rerate", type=float, default=1.0, help="re-rate the whole traces (1.0)")
    p.add_argument(
        "--drift-resize", type=float, default=1.0, help="resize the whole traces' I/Os (1.0)"
    )
    p.add_argument(
        "--drift-concat",
        action="store_true",
        help="join the traces end to end into one (the workload's regime changes at each join)",
    )
    p.add_argument(
        "--plots",
        metavar="DIR",
        help="also write PNGs to DIR: latency CDFs per policy (median window), mean latency over "
        "the best baseline per window, the accuracy ladder (with --ladder)",
    )
    p.add_argument(
        "--plot-from",
        metavar="RESULTS",
        help="no run: draw the --plots PNGs from the rows of a results file instead",
    )
    add_device_flags(p)
    add_output_flags(p, out="append the JSON rows to PATH")
    p.set_defaults(func=run)


def _pool(args):
    from attune.errors import InvalidArgumentError
    from attune.io import load_trace, synthetic_trace

    if args.synthetic:
        return [
            synthetic_trace(20_000, write_fraction=w, iops=i, seed=s)
            for s, (w, i) in enumerate(((0.7, 30_000), (0.3, 10_000), (0.5, 20_000)))
        ]
    paths = [Path(t) for t in args.traces] or [_SHARED / n for n in DEFAULT_TRACES]
    missing = [str(p) for p in paths if not p.exists()]
    if missing:
        raise InvalidArgumentError(
            f"trace files not found: {', '.join(missing)} (pass TRACES or --synthetic)"
        )
    return [load_trace(p) for p in paths]


def parse_joints(text: str) -> tuple[int, ...]:
    """``--joints``: comma-separated integers in 1..9 (empty: none), else
    :class:`attune.InvalidArgumentError` naming the option."""
    from attune.errors import InvalidArgumentError

    parts = [j.strip() for j in text.split(",") if j.strip()]
    if not all(j.isdigit() and 1 <= int(j) <= 9 for j in parts):
        raise InvalidArgumentError(
            f"--joints must be comma-separated integers in 1..9, got {text!r}"
        )
    return tuple(int(j) for j in parts)


def check_args(args) -> None:
    """Every option range-checked before any work (traces are loaded after), each error naming
    the option."""
    from attune._cli_io import check_option
    from attune.errors import InvalidArgumentError
    from attune.io import heimdall as hd
    from attune.io.trace import RERATE_RANGE, RESIZE_RANGE, check_factor

    if args.windows < 1:
        raise InvalidArgumentError(f"--windows must be at least 1, got {args.windows}")
    if args.window_ios < 100:
        raise InvalidArgumentError(f"--window-ios must be at least 100, got {args.window_ios}")
    if not 1 <= args.epochs <= hd.EPOCHS_MAX:
        raise InvalidArgumentError(f"--epochs must be in 1..{hd.EPOCHS_MAX}, got {args.epochs}")
    if not 0 <= args.seed < 2**64:
        raise InvalidArgumentError(f"--seed must be in 0..2**64-1, got {args.seed}")
    args.joints_parsed = parse_joints(args.joints)
    check_option("--min-busy", args.min_busy, 0, 1, hi_open=True)
    check_option("--rank-tie", args.rank_tie, 0, math.inf, hi_open=True)
    check_option("--live-rank-tie", args.live_rank_tie, 0, math.inf, hi_open=True)
    check_option("--slow-factor", args.slow_factor, 1, math.inf, hi_open=True)
    check_option("--probe-reads-us", args.probe_reads_us, 0, math.inf, hi_open=True)
    check_option("--drift-interval", args.drift_interval, 0, math.inf, lo_open=True, hi_open=True)
    check_option("--drift-threshold", args.drift_threshold, 0, 1, lo_open=True, hi_open=True)
    check_factor("--drift-rerate", args.drift_rerate, RERATE_RANGE)
    check_factor("--drift-resize", args.drift_resize, RESIZE_RANGE)
    from attune._cli_io import _params
    from attune.io import ssd_params

    ssd_params(_params(args))  # --device and --set, validated before any work
    if args.out and not Path(args.out).resolve().parent.is_dir():
        raise InvalidArgumentError(
            f"--out {args.out}: directory {Path(args.out).resolve().parent} does not exist"
        )


def run(args) -> int:
    from attune._cli_io import _params, check_window_ios
    from attune.bench import machine, write_rows
    from attune.cli import progress
    from attune.io import evaluate as ev
    from attune.io import heimdall as hd

    if args.plot_from:
        return _plot_from(args)
    check_args(args)
    policies = tuple(ev.POLICIES)
    if args.policies:
        asked = [x.strip() for x in args.policies.split(",") if x.strip()]
        bad = [x for x in asked if x not in ev.POLICIES]
        if bad:
            from attune.errors import InvalidArgumentError

            raise InvalidArgumentError(
                f"unknown policies {', '.join(bad)}; valid: {', '.join(ev.POLICIES)}"
            )
        policies = tuple(p for p in ev.POLICIES if p in asked or p == "heimdall")
    pool = _pool(args)
    if args.drift:
        return _drift(args, pool)
    check_window_ios(args.window_ios, args.windows, pool)
    joints = args.joints_parsed
    groups = ev.random_windows(
        pool,
        args.windows,
        args.window_ios,
        args.seed,
        replicas=args.replicas,
        augmentations=not args.no_augment,
        min_busy=args.min_busy,
        params=_params(args),
    )
    params = _params(args)
    pipeline = hd.Pipeline(epochs=args.epochs, seed=args.seed)
    rules: list = [None] * len(groups)
    model = live_model = clock = None
    if args.rule_search or args.device_model:
        with progress(args, total=len(groups), desc="training halves", unit="window") as bar:
            halves = ev.training_halves(
                groups, params, args.seed, pipeline.rule, args.rule_search, lambda: bar.update(1)
            )
        rules = list(halves.rules)
        rows_all, rules_all = halves.rows, halves.rules_flat
        halves_all = [t.slice(0, len(t) // 2) for g in groups for t, _ in g]
        if args.device_model:
            model = ev.device_model(rows_all, rules_all, pipeline)
            if any(p in ev.LIVE_POLICIES for p in policies):
                live = dataclasses.replace(pipeline, features="live")
                live_model = ev.device_model(rows_all, rules_all, live)
            if any(p in ev.CLOCK_POLICIES for p in policies):
                # One write clock for the device, as one model: fitted on every training half.
                labels = [
                    hd.label_periods(r["size"], r["latency_ns"], rule)
                    for r, rule in zip(rows_all, rules_all)
                ]
                clock = hd.fit_write_clock(halves_all, labels)[0]
    config = {
        "device": args.device,
        "min_busy": args.min_busy,
        "rule_search": args.rule_search,
        "device_model": args.device_model,
        "rank_tie": args.rank_tie,
        "slow_factor": args.slow_factor,
        "probe_reads_us": args.probe_reads_us,
        "live_rank_tie": args.live_rank_tie,
        "unknown_phase": args.unknown_phase,
    }
    command = (
        "attune bench heimdall " + shlex.join(sys.argv[3:])
        if len(sys.argv) > 3
        else "attune bench heimdall"
    )
    mach = machine()
    rows = []
    results = []
    with progress(args, total=len(groups), desc="windows", unit="window") as bar:
        for i, g in enumerate(groups):
            r = ev.evaluate_pair(
                g,
                params=params,
                seed=args.seed + i,
                pipeline=pipeline,
                ladder=args.ladder,
                joints=joints,
                model=model,
                rules=rules[i],
                policies=policies,
                rank_tie=args.rank_tie,
                slow_factor=args.slow_factor,
                live_model=live_model,
                probe_reads_us=args.probe_reads_us,
                live_rank_tie=args.live_rank_tie,
                write_clock=clock,
                unknown_phase=args.unknown_phase,
            )
            results.append(r)
            best = ev.best_baseline(r)
            base = {
                "bench": "heimdall",
                "window": i,
                "replicas": args.replicas,
                "traces": [w.trace for w in r.windows],
                "augmentations": [w.augmentation for w in r.windows],
                **config,
            }
            h = r.latency_us["heimdall"]
            for pol, s in r.latency_us.items():
                rows.append(
                    {
                        **base,
                        "kind": "policy",
                        "policy": pol,
                        **{f"{k}_us": v for k, v in s.items()},
                        "redirected": r.redirected[pol],
                        "probe_share": r.probe_share[pol],
                        "backup_share": r.backup_share[pol],
                        "mean_over_heimdall": s["mean"] / h["mean"],
                        "p99_over_heimdall": s["p99"] / h["p99"],
                        "best_baseline": best[0],
                        "mean_over_best_baseline": s["mean"] / best[1],
                        "p99_over_hedging": (
                            s["p99"] / r.latency_us["hedging"]["p99"]
                            if "hedging" in r.latency_us
                            else None
                        ),
                        "gc_share": r.gc_share[pol],
                        "served_share": r.served_share[pol],
                        "quantiles_us": r.quantiles_us[pol],
                        "write_clock": r.write_clock if pol in ev.CLOCK_POLICIES else None,
                    }
                )
            rows.append(
                {
                    **base,
                    "kind": "accuracy",
                    "auc_period": r.auc_period,
                    "auc_busy": r.auc_busy,
                    "auc_linnos_period": r.auc_linnos_period,
                    "auc_period_live": r.auc_period_live,
                    "auc_busy_live": r.auc_busy_live,
                    "auc_truth_vs_labels": r.auc_truth_vs_labels,
                    "busy_fraction": r.busy_fraction,
                    "slow_fraction": r.slow_fraction,
                    "rule": list(dataclasses.astuple(rules[i][0])) if rules[i] else None,
                }
            )
            for stage, auc in r.ladder_auc.items():
                rows.append({**base, "kind": "ladder", "stage": stage, "auc": auc})
            for j, auc in r.joint_auc.items():
                rows.append({**base, "kind": "joint", "joint": j, "auc": auc})
            bar.update(1)
    lines = write_rows([_clean(r) for r in rows], command, mach, args.out)
    if args.plots:
        stem = f"heimdall-{args.replicas}r-{args.device}"
        for p in plot(rows, Path(args.plots), stem):
            print(f"wrote {p}", file=sys.stderr)
    if args.json:
        print("\n".join(lines))
        return 0
    s = ev.summarize(results)
    print(f"{s['windows']} windows, {args.replicas} replicas (medians over windows)")
    w = max(14, *(len(p) for p in s["policies"]))
    for pol, v in s["policies"].items():
        backups = s["backup_share_median"].get(pol, 0.0)
        print(
            f"  {pol:{w}} mean {v['mean']:9.1f} µs  p99 {v['p99']:10.1f} µs  "
            f"busy reads {s['gc_share_median'][pol]:.1%}"
            + (f"  backup reads {backups:.1%}" if backups else "")
        )
    # dict.fromkeys: a policy in two of the groups is printed once.
    for pol in dict.fromkeys((*ev.HEIMDALL_POLICIES, *ev.REFERENCE_POLICIES, *ev.BOUND_POLICIES)):
        if f"{pol}_mean_reduction_vs_best_baseline_median" in s:
            print(
                f"  {pol} mean latency vs best baseline: "
                f"{-s[f'{pol}_mean_reduction_vs_best_baseline_median']:+.1%} (negative: faster); "
                f"p99 / hedging p99: {s.get(f'{pol}_p99_over_hedging_median', float('nan')):.2f}"
            )
    print(
        f"  ROC-AUC period {s['auc_period_median']:.3f}, busy {s['auc_busy_median']:.3f}, "
        f"LinnOS {s['auc_linnos_period_median']:.3f}, live {s['auc_period_live_median']:.3f}"
    )
    return 0


def _drift(args, pool) -> int:
    import numpy as np

    from attune._cli_io import _params
    from attune.bench import machine, write_rows
    from attune.cli import progress
    from attune.errors import InvalidArgumentError
    from attune.io import evaluate as ev
    from attune.io import heimdall as hd
    from attune.io.trace import concat_traces, display_name

    command = "attune bench heimdall " + shlex.join(sys.argv[3:])
    mach = machine()
    rows = []
    skipped = []
    if args.drift_concat:
        pool = [concat_traces(pool)]
    with progress(args, total=len(pool), desc="traces", unit="trace") as bar:
        for t in pool:
            try:
                t = t.rerate(args.drift_rerate).resize(args.drift_resize)
            except InvalidArgumentError as e:
                opt = "--drift-resize" if str(e).startswith("factor") else "--drift-rerate"
                raise InvalidArgumentError(f"{opt} {str(e).split(' ', 1)[1]}") from None
            try:
                r = ev.drift_run(
                    t,
                    params=_params(args),
                    seed=args.seed,
                    interval_s=args.drift_interval,
                    threshold=args.drift_threshold,
                    pipeline=hd.Pipeline(epochs=args.epochs, seed=args.seed),
                )
            except InvalidArgumentError as e:
                skipped.append(f"{display_name(t.name)}: {e}")
                bar.update(1)
                continue
            for mode, aucs, retrains in (
                ("off", r.auc_static, 0),
                ("on", r.auc_retrain, len(r.retrained_at)),
            ):
                a = np.asarray(aucs, dtype=np.float64)
                ok = a[~np.isnan(a)]
                rows.append(
                    {
                        "bench": "heimdall",
                        "kind": "drift",
                        "trace": t.name,
                        "device": args.device,
                        "retraining": mode,
                        "interval_s": args.drift_interval,
                        "rerate": args.drift_rerate,
                        "resize": args.drift_resize,
                        "concat": args.drift_concat,
                        "threshold": args.drift_threshold,
                        "intervals": len(a),
                        "scored": len(ok),
                        "auc_mean": float(ok.mean()) if len(ok) else None,
                        "auc_median": float(np.median(ok)) if len(ok) else None,
                        "below_threshold": int((ok < args.drift_threshold).sum()),
                        "retrains": retrains,
                        "auc_per_interval": [None if np.isnan(x) else round(x, 4) for x in a],
                    }
                )
            bar.update(1)
    if not rows:
        raise InvalidArgumentError(
            f"no drift result: every trace was skipped: {'; '.join(skipped)}"
        )
    for why in skipped:
        print(f"skipped {why}", file=sys.stderr)
    lines = write_rows([_clean(r) for r in rows], command, mach, args.out)
    if args.json:
        print("\n".join(lines))
        return 0
    for r in rows:
        print(
            f"  {r['trace'][:28]:28} retraining {r['retraining']:3}  mean AUC "
            f"{r['auc_mean'] or float('nan'):.3f} over {r['scored']} intervals, "
            f"{r['below_threshold']} below {r['threshold']}, {r['retrains']} retrains"
        )
    return 0


def _plot_from(args) -> int:
    from attune.errors import InvalidArgumentError

    if not args.plots:
        raise InvalidArgumentError("--plot-from needs --plots DIR")
    src = Path(args.plot_from)
    if not src.exists():
        raise InvalidArgumentError(f"results file not found: {src}")
    rows = []
    for n, line in enumerate(src.read_text().splitlines(), 1):
        if line.strip():
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError as e:
                raise InvalidArgumentError(f"{src}: line {n} is not JSON ({e.msg})") from None
    rows = [r for r in rows if r.get("bench") == "heimdall"]
    if not rows:
        raise InvalidArgumentError(f"{src} holds no heimdall rows")
    first = next((r for r in rows if r.get("kind") == "policy"), rows[0])
    stem = f"heimdall-{first.get('replicas', 2)}r-{first.get('device', 'default')}"
    for p in plot(rows, Path(args.plots), stem):
        print(f"wrote {p}", file=sys.stderr)
    return 0


#: Line styles of the CDF plot: the baselines dashed, Heimdall's policies solid, the bound dotted.
def _style(policy: str) -> str:
    from attune.io import evaluate as ev

    if policy in ev.BOUND_POLICIES:
        return ":"
    return "-" if policy in ev.HEIMDALL_POLICIES else "--"


def plot(rows: list[dict], out_dir: Path, stem: str) -> list[Path]:
    """PNGs from one run's rows: ``<stem>-cdf.png`` (read latency CDF of every policy on the
    median window, the window whose best Heimdall policy's mean over the best baseline is the
    median), ``<stem>-vs-best.png`` (each policy's mean over the best baseline's, per window)
    and, when the rows hold ladder rows, ``<stem>-ladder.png`` (median ROC-AUC per stage)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    from attune.io import evaluate as ev
    from attune.io.trace import display_name

    out_dir.mkdir(parents=True, exist_ok=True)
    made: list[Path] = []
    pol_rows = [r for r in rows if r.get("kind") == "policy" and r.get("quantiles_us")]
    if pol_rows:
        windows = sorted({r["window"] for r in pol_rows})
        by = {(r["window"], r["policy"]): r for r in pol_rows}
        policies = list(dict.fromkeys(r["policy"] for r in pol_rows))
        heim = [p for p in policies if p in ev.HEIMDALL_POLICIES]

        def best_heimdall(w: int) -> float:
            return min(by[(w, p)]["mean_over_best_baseline"] for p in heim if (w, p) in by)

        order = sorted(windows, key=best_heimdall)
        w = order[len(order) // 2]
        fig, ax = plt.subplots(figsize=(10, 4.8))
        pct = np.asarray(ev.CDF_PERCENTILES) / 100
        colours = plt.get_cmap("tab20")
        for i, p in enumerate(policies):
            q = by.get((w, p), {}).get("quantiles_us")
            if q:
                # tab20 pairs a dark and a light shade of each hue: the first ten policies take
                # the ten dark shades, the next ten the light ones, so neighbours differ in hue.
                c = colours((2 * i) % 20 + (i // 10) % 2)
                ax.plot(q, pct, _style(p), label=p, linewidth=1.4, color=c)
        ax.set_xscale("log")
        ax.set_xlabel("read latency (µs, log)")
        ax.set_ylabel("fraction of reads")
        ax.set_ylim(0, 1.0)
        traces = ", ".join(display_name(n) for n in by[(w, policies[0])].get("traces", []))
        ax.set_title(f"Read latency CDF, median window {w} ({traces})", fontsize="small")
        ax.grid(alpha=0.3)
        # Outside the axes: with a dozen and more policies a legend inside hides the curves.
        ax.legend(fontsize="x-small", loc="upper left", bbox_to_anchor=(1.01, 1.0))
        fig.tight_layout()
        path = out_dir / f"{stem}-cdf.png"
        fig.savefig(path, dpi=110)
        plt.close(fig)
        made.append(path)

        fig, ax = plt.subplots(figsize=(10, 5.5))
        data = [[by[(x, p)]["mean_over_best_baseline"] for x in windows] for p in policies]
        ax.boxplot(data, showfliers=True)
        ax.set_xticks(range(1, len(policies) + 1))
        ax.set_xticklabels(policies, rotation=60, ha="right", fontsize="small")
        ax.axhline(1.0, color="grey", linewidth=0.8)
        ax.axhline(0.85, color="green", linewidth=0.8, linestyle="--", label="target (0.85)")
        ax.set_yscale("log")
        ax.set_ylabel("mean latency / best baseline's (per window, log)")
        ax.legend(fontsize="small")
        fig.tight_layout()
        path = out_dir / f"{stem}-vs-best.png"
        fig.savefig(path, dpi=110)
        plt.close(fig)
        made.append(path)
    ladder = [r for r in rows if r.get("kind") == "ladder" and r.get("auc") is not None]
    acc = [r for r in rows if r.get("kind") == "accuracy" and r.get("auc_period") is not None]
    if ladder:
        stages = list(dict.fromkeys(r["stage"] for r in ladder))
        vals = [float(np.median([r["auc"] for r in ladder if r["stage"] == s])) for s in stages]
        labels = list(stages)
        if acc:
            labels.append("device model, quantised")
            vals.append(float(np.median([r["auc_period"] for r in acc])))
        fig, ax = plt.subplots(figsize=(8, 4.2))
        ax.barh(range(len(vals)), vals, color="tab:blue")
        ax.set_yticks(range(len(vals)))
        ax.set_yticklabels(labels, fontsize="small")
        ax.invert_yaxis()
        ax.set_xlim(0.5, 1.0)
        ax.axvline(0.9, color="green", linewidth=0.8, linestyle="--")
        for i, v in enumerate(vals):
            ax.text(v + 0.005, i, f"{v:.3f}", va="center", fontsize="small")
        ax.set_xlabel("held-out ROC-AUC (median over windows)")
        ax.set_title("Accuracy ladder", fontsize="small")
        fig.tight_layout()
        path = out_dir / f"{stem}-ladder.png"
        fig.savefig(path, dpi=110)
        plt.close(fig)
        made.append(path)
    return made


def _clean(row: dict) -> dict:
    """NaN (no positives in a window) as null, which JSON has, at any depth."""
    from attune._cli_io import json_safe

    return json_safe(row)

"""`attune io`: the simulated SSD, Heimdall's learned I/O admission and block prefetching.

* ``attune io simulate [TRACE]``: serve a trace (or a synthetic one) on one simulated SSD and
  print its latency summary and counters.
* ``attune io replay TRACE --out CSV``: the same, writing every I/O with its simulated latency as
  an Attune block-trace CSV (``docs/formats/block-trace.md``).
* ``attune io heimdall train TRACE --out MODEL``: label, filter and train on the first half of the
  trace served by the simulated SSD; write the checksummed weight file.
* ``attune io heimdall eval TRACE... [--model MODEL]``: accuracy and every policy's read latency
  over random windows (``attune.io.evaluate``).

* ``attune io prefetch eval|train ...``: TinFetch and the block prefetchers (readahead, stride,
  Markov, Leap): evaluate them on a trace, train TinFetch's network (``attune io prefetch -h``).

SSD parameters: ``--set NAME=VALUE`` (repeatable; ``attune io simulate --list-params``).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys

import numpy as np

from attune.errors import InvalidArgumentError

DESCRIPTION = (__doc__ or "").replace("``", "")


def check_option(
    opt: str,
    value: float,
    lo: float | None = None,
    hi: float | None = None,
    *,
    lo_open: bool = False,
    hi_open: bool = False,
) -> float:
    """``value`` if it is a number (never NaN) within ``lo``..``hi`` (open ends where asked), else
    :class:`attune.InvalidArgumentError` naming the option ``opt`` and the allowed range."""
    left = "" if lo is None else ("> " if lo_open else ">= ") + f"{lo:g}"
    right = "" if hi is None or math.isinf(hi) else ("< " if hi_open else "<= ") + f"{hi:g}"
    allowed = " and ".join(x for x in (left, right) if x)
    if hi is not None and math.isinf(hi):
        allowed = f"a finite number {allowed}"
    v = float(value)
    ok = not np.isnan(v)
    if ok and lo is not None:
        ok = v > lo if lo_open else v >= lo
    if ok and hi is not None:
        ok = v < hi if hi_open else v <= hi
    if not ok:
        raise InvalidArgumentError(f"{opt} must be {allowed}, got {value}")
    return v


def json_safe(obj):
    """``obj`` with every NaN or infinite float (an AUC of a window without slow reads) as None:
    strict JSON has no NaN."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: json_safe(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [json_safe(v) for v in obj]
    if isinstance(obj, np.floating):
        return json_safe(float(obj))
    return obj


def check_window_ios(window_ios: int, windows: int, pool) -> None:
    """``--window-ios`` within 100..the shortest trace's length, and below that length when
    ``--windows`` > 1 (a window as long as a trace has one possible start: every draw from it
    would be the same window)."""
    shortest = min(pool, key=len)
    n = len(shortest)
    name = shortest.name or "(unnamed)"
    if n == 0:
        raise InvalidArgumentError(f"trace {name} holds no I/Os")
    if not 100 <= window_ios <= n:
        raise InvalidArgumentError(
            f"--window-ios must be in 100..{n} (the I/Os of the shortest trace, {name}), got "
            f"{window_ios}"
        )
    if window_ios == n and windows > 1:
        raise InvalidArgumentError(
            f"--window-ios {window_ios} is the whole of trace {name}: every one of the "
            f"--windows {windows} windows drawn from it would be the same; use --window-ios "
            f"below {n} or --windows 1"
        )


def _params(args) -> dict:
    from attune.io import device_params

    out = {}
    for item in args.set or []:
        name, sep, value = item.partition("=")
        if not sep:
            raise InvalidArgumentError(f"--set takes NAME=VALUE, got {item!r}")
        out[name.strip()] = value.strip()
    return device_params(getattr(args, "device", None) or "default", out)


def add_device_flags(p: argparse.ArgumentParser) -> None:
    """``--device PRESET`` and ``--set NAME=VALUE`` (the simulated SSD's parameters)."""
    from attune.io import DEVICE_PRESETS

    p.add_argument(
        "--device",
        choices=tuple(DEVICE_PRESETS),
        default="default",
        help="simulated device preset (default); --set overrides its parameters",
    )
    p.add_argument(
        "--set",
        action="append",
        metavar="NAME=VALUE",
        help="an SSD parameter (repeatable); see `attune io simulate --list-params`",
    )


def _add_common(p: argparse.ArgumentParser) -> None:
    from attune.cli import int_range

    p.add_argument(
        "--format",
        choices=("msr", "cloudphysics", "attune-csv", "attune"),
        help="trace format (sniffed when omitted)",
    )
    add_device_flags(p)
    p.add_argument("--seed", type=int_range(0, 2**64 - 1), default=0, help="simulation seed (0)")
    p.add_argument(
        "--rerate", type=float, default=1.0, help="arrival-rate factor, 0.001..1000 (1.0)"
    )
    p.add_argument("--resize", type=float, default=1.0, help="I/O size factor, 0.001..1024 (1.0)")


#: The synthetic trace's arrival rate on the command line: the library's 20,000 I/Os/s of 70 %
#: writes offer about 1 GB/s, which keeps the default device's garbage collection running and
#: its queues growing; 4,000 is an estimated chip load of 0.35 (``attune.io.write_load``).
SYNTHETIC_CLI_IOPS = 4000.0


def _trace(args, path: str | None):
    from attune.io import load_trace, synthetic_trace
    from attune.io.trace import RERATE_RANGE, RESIZE_RANGE, SYNTHETIC_IOPS_RANGE, check_factor

    args.rerate = check_factor("--rerate", args.rerate, RERATE_RANGE)
    args.resize = check_factor("--resize", args.resize, RESIZE_RANGE)

    t = (
        load_trace(path, args.format)
        if path
        else synthetic_trace(
            getattr(args, "synthetic", 10_000),
            iops=check_factor(
                "--iops", getattr(args, "iops", SYNTHETIC_CLI_IOPS), SYNTHETIC_IOPS_RANGE
            ),
            seed=args.seed,
        )
    )
    if len(t) == 0:
        from attune.errors import CorruptionError

        raise CorruptionError(f"trace {path} holds no I/Os", str(path), 0)
    return _scaled(t, args)


def _scaled(t, args):
    """``t`` with ``--rerate`` and ``--resize`` applied (both already range-checked)."""
    try:
        if args.rerate != 1.0:
            t = t.rerate(args.rerate)
        if args.resize != 1.0:
            t = t.resize(args.resize)
    except InvalidArgumentError as e:
        opt = "--resize" if str(e).startswith("factor") else "--rerate"
        raise InvalidArgumentError(f"{opt} {str(e).split(' ', 1)[1]}") from None
    return t


def _summary(lat_ns: np.ndarray) -> dict:
    if len(lat_ns) == 0:
        return {}
    us = lat_ns / 1e3
    q = np.percentile(us, [50, 90, 99, 99.9])
    return {
        "count": len(us),
        "mean_us": float(us.mean()),
        "p50_us": float(q[0]),
        "p90_us": float(q[1]),
        "p99_us": float(q[2]),
        "p999_us": float(q[3]),
        "max_us": float(us.max()),
    }


def _overload_warning(t, params, rerate: float = 1.0) -> str | None:
    """A one-line warning when ``t`` drives the simulated device past what it sustains
    (latencies then grow with the length of the trace), naming the options that fix it."""
    from attune.io import LOAD_LIMIT, write_load

    ld = write_load(t, params)
    if ld["chip_load"] <= LOAD_LIMIT:
        return None
    return (
        f"the trace overloads the simulated device: {ld['write_bytes_per_s'] / 1e6:.0f} MB/s of "
        f"writes keep garbage collection running {ld['gc_duty']:.0%} of the time, and the "
        f"estimated load of a collecting chip is {ld['chip_load']:.2f} (above {LOAD_LIMIT}), so "
        f"I/Os queue behind flushes and latencies grow with the trace's length; slow the trace "
        f"down (--rerate {math.floor(rerate * ld['rerate'] * 100) / 100:g}) or give the device more room "
        f"(--set chips_per_channel, --set program_page_us, --set gc_every_bytes, "
        f"--set gc_duration_us)"
    )


def _simulate(args) -> int:
    from attune.io import replay, ssd_params

    params = _params(args)
    if args.list_params:
        full = ssd_params(params)
        if args.json:
            print(json.dumps(full))
        else:
            for k, v in full.items():
                print(f"{k} = {v}")
        return 0
    t = _trace(args, args.trace)
    r = replay(t, params, args.seed)
    lat = np.asarray(r["latency_ns"], dtype=np.float64)
    warning = _overload_warning(t, params, args.rerate)
    out = {
        "trace": t.name,
        "ios": len(t),
        "duration_s": t.duration_ns / 1e9,
        "reordered_ios": t.reordered,
        "reads": _summary(lat[t.is_read]),
        "writes": _summary(lat[~t.is_read]),
        "busy_reads": int((np.asarray(r["gc_pages"])[t.is_read] > 0).sum()),
        "stats": r["stats"],
        "params": ssd_params(params),
        "warning": warning,
    }
    if warning:
        print(f"attune: warning: {warning}", file=sys.stderr)
    if args.json:
        print(json.dumps(out))
        return 0
    sorted_note = f" ({t.reordered} I/Os moved into time order)" if t.reordered else ""
    print(f"{out['trace']}: {len(t)} I/Os over {out['duration_s']:.3f} s{sorted_note}")
    for kind in ("reads", "writes"):
        s = out[kind]
        if s:
            print(
                f"  {kind:6}: {s['count']:>8}  mean {s['mean_us']:9.1f} µs  p50 {s['p50_us']:9.1f}"
                f"  p99 {s['p99_us']:9.1f}  p99.9 {s['p999_us']:9.1f}"
            )
    st = r["stats"]
    print(
        f"  flushes {st['flushes']}, gc periods {st['gc_periods']}, reads slowed by gc "
        f"{st['gc_reads']}, stalled writes {st['stalled_writes']}, hot reads {st['hot_reads']}"
    )
    return 0


def _out_is_not_an_input(out, *inputs) -> None:
    """Refuses an output path that names one of the inputs: writing it would destroy the
    input (a trace replaced by weights or a CSV)."""
    for path in inputs:
        exist = path and out and os.path.exists(path) and os.path.exists(out)
        if exist and os.path.samefile(path, out):
            raise InvalidArgumentError(
                f"--out {out} is the input {path}: writing it would destroy the input; "
                "name another output file"
            )


def _replay(args) -> int:
    from attune.io import replay

    _out_is_not_an_input(args.out, args.trace, args.direct)
    if args.direct:
        _out_is_not_an_input(args.direct, args.trace)
    t = _trace(args, args.trace)
    if args.direct:
        from attune.io import replay_direct

        if args.file_mb < 1:
            raise InvalidArgumentError(f"--file-mb must be at least 1, got {args.file_mb}")
        r = replay_direct(
            t,
            args.direct,
            args.file_mb << 20,
            pace=args.pace,
            direct=not args.buffered,
            overwrite=args.overwrite,
        )
        if r["memory_backed"]:
            print(
                f"attune: warning: {args.direct} is on a memory-backed file system (tmpfs or "
                "ramfs): the latencies are memory copies, not a disk's",
                file=sys.stderr,
            )
        warning = None
    else:
        params = _params(args)
        r = replay(t, params, args.seed)
        warning = _overload_warning(t, params, args.rerate)
        if warning:
            print(f"attune: warning: {warning}", file=sys.stderr)
    lat = r["latency_ns"]
    try:
        with open(args.out, "w") as f:
            f.write("timestamp_ns,offset,size,op,latency_ns\n")
            for i in range(len(t)):
                op = "R" if t.is_read[i] else "W"
                f.write(f"{t.timestamp_ns[i]},{t.offset[i]},{t.size[i]},{op},{lat[i]}\n")
    except OSError as e:
        from attune.errors import StorageIOError

        raise StorageIOError(f"cannot write {args.out}: {e.strerror or e}", args.out) from e
    arr = np.asarray(lat, dtype=np.float64)
    summary = {
        "trace": t.name,
        "ios": len(t),
        "out": args.out,
        "device": ("buffered " if args.buffered else "O_DIRECT ") + args.direct
        if args.direct
        else "simulated",
        "reads": _summary(arr[t.is_read]),
        "writes": _summary(arr[~t.is_read]),
        "warning": warning,
    }
    if args.direct:
        summary["memory_backed"] = bool(r["memory_backed"])
    if args.json:
        print(json.dumps(summary))
    else:
        kind = "measured" if args.direct else "simulated"
        if args.direct and r["memory_backed"]:
            kind = "measured (in memory, not a disk)"
        print(f"{len(t)} I/Os with {kind} latencies written to {args.out}")
        for k in ("reads", "writes"):
            v = summary[k]
            if v:
                print(
                    f"  {k:6} {v['count']:7d}  mean {v['mean_us']:8.1f} µs  p50 "
                    f"{v['p50_us']:8.1f}  p99 {v['p99_us']:9.1f}  max {v['max_us']:9.1f}"
                )
    return 0


def _pipeline(args):
    from attune.io import heimdall as hd

    if not 1 <= args.epochs <= hd.EPOCHS_MAX:
        raise InvalidArgumentError(f"--epochs must be in 1..{hd.EPOCHS_MAX}, got {args.epochs}")
    if not 1 <= args.joint <= 9:
        raise InvalidArgumentError(f"--joint must be in 1..9, got {args.joint}")

    return hd.Pipeline(
        labelling=args.labelling,
        features=args.features,
        noise_filter=not args.no_noise_filter,
        joint=args.joint,
        epochs=args.epochs,
        seed=args.seed,
    )


def _train(args) -> int:
    from attune.io import heimdall as hd
    from attune.io import replay

    if not 0 < args.train_fraction <= 1:  # NaN fails too
        raise InvalidArgumentError(f"--train-fraction must be in (0, 1], got {args.train_fraction}")
    _out_is_not_an_input(args.out, args.trace)
    p = _pipeline(args)
    t = _trace(args, args.trace)
    n = int(len(t) * args.train_fraction)
    part = t.slice(0, n)
    rows = hd.read_rows(replay(part, _params(args), args.seed), part)
    with _progress(args, 1, "training") as bar:
        model = (
            hd.train(rows, p)
            if not args.linnos
            else hd.train_linnos(rows, epochs=args.epochs, seed=args.seed)
        )
        bar.update(1)
    model.save(args.out)
    labels = hd.make_labels(rows, p)
    x, _ = hd.model_inputs(model, rows, basic=p.features == "basic")
    declined = int((model.predict_proba(x) > model.threshold).sum()) if len(x) else 0
    warning = None
    if declined == 0:
        warning = (
            f"the model declines none of the {len(x)} training reads at its threshold "
            f"{model.threshold:.3f}: it admits every read (too few slow reads to learn from). "
            "Train on a device with garbage collection busy periods (e.g. --device device-gc, "
            "or more writes), or on a longer trace"
        )
        print(f"attune: warning: {warning}", file=sys.stderr)
    out = {
        "model": args.out,
        "dims": model.dims,
        "joint": model.joint,
        "threshold": model.threshold,
        "train_reads": len(rows["size"]),
        "slow_fraction": float(labels.mean()) if len(labels) else 0.0,
        "declined_train_reads": declined,
        "warning": warning,
        "final_loss": model.history[-1] if model.history else None,
    }
    if args.json:
        print(json.dumps(out))
    else:
        print(
            f"trained {'x'.join(map(str, model.dims))} on {out['train_reads']} reads "
            f"({out['slow_fraction']:.1%} slow); threshold {model.threshold:.3f}; "
            f"wrote {args.out}"
        )
    return 0


def _progress(args, total: int, desc: str):
    from attune.cli import progress

    return progress(args, total=total, desc=desc, unit="step")


def _eval(args) -> int:
    from attune.io import evaluate as ev
    from attune.io import load_trace

    if args.joint != 1:
        raise InvalidArgumentError(
            f"--joint {args.joint}: eval routes one read at a time, so it takes --joint 1; "
            "measure joint sizes with `attune bench heimdall --joints 1,3,9`"
        )
    check_option("--min-busy", args.min_busy, 0, 1, hi_open=True)
    check_option("--rank-tie", args.rank_tie, 0, math.inf, hi_open=True)
    check_option("--slow-factor", args.slow_factor, 1, math.inf, hi_open=True)
    if args.device_model and args.model:
        raise InvalidArgumentError("--device-model trains the model: give it or --model, not both")
    if args.rule_search and args.model:
        raise InvalidArgumentError("--rule-search trains the models: give it or --model, not both")
    if args.windows < 1:
        raise InvalidArgumentError(f"--windows must be at least 1, got {args.windows}")
    check_option("--live-rank-tie", args.live_rank_tie, 0, math.inf, hi_open=True)
    check_option("--probe-reads-us", args.probe_reads_us, 0, math.inf, hi_open=True)
    from attune.io.trace import RERATE_RANGE, RESIZE_RANGE, check_factor

    args.rerate = check_factor("--rerate", args.rerate, RERATE_RANGE)
    args.resize = check_factor("--resize", args.resize, RESIZE_RANGE)
    policies = _policies(args.policies)
    pipeline = _pipeline(args)
    model = _eval_model(args, pipeline) if args.model else None
    pool = [_scaled(load_trace(p, args.format), args) for p in args.trace]
    check_window_ios(args.window_ios, args.windows, pool)
    params = _params(args)
    groups = ev.random_windows(
        pool,
        args.windows,
        args.window_ios,
        args.seed,
        replicas=args.replicas,
        augmentations=not args.no_augment,
        min_busy=args.min_busy,
        params=params,
    )
    rules: list = [None] * len(groups)
    if args.rule_search or args.device_model:
        with _progress(args, len(groups), "training halves") as bar:
            halves = ev.training_halves(
                groups, params, args.seed, pipeline.rule, args.rule_search, lambda: bar.update(1)
            )
        rules = list(halves.rules)
        if args.device_model:
            model = ev.device_model(halves.rows, halves.rules_flat, pipeline)
    results = []
    with _progress(args, len(groups), "windows") as bar:
        for i, g in enumerate(groups):
            results.append(
                ev.evaluate_pair(
                    g,
                    params=params,
                    seed=args.seed + i,
                    pipeline=pipeline,
                    ladder=args.ladder,
                    model=model,
                    rules=rules[i],
                    policies=policies,
                    rank_tie=args.rank_tie,
                    slow_factor=args.slow_factor,
                    probe_reads_us=args.probe_reads_us,
                    live_rank_tie=args.live_rank_tie,
                    unknown_phase=args.unknown_phase,
                )
            )
            bar.update(1)
    summary = ev.summarize(results)
    if args.json:
        doc = {
            "summary": summary,
            "unknown_phase": args.unknown_phase,
            "windows": [r.to_dict() for r in results],
        }
        print(json.dumps(json_safe(doc), allow_nan=False))
        return 0
    print(
        f"{summary['windows']} windows of {args.window_ios} I/Os, {args.replicas} replicas "
        "(medians over windows)"
    )
    w = max(14, *(len(p) for p in summary["policies"]))
    print(f"  {'policy':{w}} {'mean µs':>10} {'p50':>9} {'p90':>9} {'p99':>10} {'p99.9':>10}")
    for pol, s in summary["policies"].items():
        print(
            f"  {pol:{w}} {s['mean']:10.1f} {s['p50']:9.1f} {s['p90']:9.1f} {s['p99']:10.1f}"
            f" {s['p999']:10.1f}"
        )
    for pol in (*ev.HEIMDALL_POLICIES, *ev.REFERENCE_POLICIES, *ev.BOUND_POLICIES):
        key = f"{pol}_mean_reduction_vs_best_baseline_median"
        if key in summary:
            print(f"  {pol} mean latency vs best baseline: {-summary[key]:+.1%} (negative: faster)")
    print(
        f"  ROC-AUC (period labels) {summary['auc_period_median']:.3f}, (busy truth) "
        f"{summary['auc_busy_median']:.3f}, LinnOS {summary['auc_linnos_period_median']:.3f}"
    )
    for stage, auc in summary.get("ladder_auc_median", {}).items():
        print(f"  ladder: {stage:40} {auc:.3f}")
    return 0


def _policies(text: str) -> tuple[str, ...]:
    """``--policies a,b``: the evaluation's policies in their usual order (heimdall always
    runs: every summary is relative to it); empty: all."""
    from attune.io import evaluate as ev

    if not text:
        return tuple(ev.POLICIES)
    asked = [x.strip() for x in text.split(",") if x.strip()]
    bad = [x for x in asked if x not in ev.POLICIES]
    if bad:
        raise InvalidArgumentError(
            f"--policies: unknown {', '.join(bad)}; valid: {', '.join(ev.POLICIES)}"
        )
    return tuple(p for p in ev.POLICIES if p in asked or p == "heimdall")


def _eval_model(args, pipeline) -> bytes:
    """``--model``'s bytes, after checking that eval can use it: a Heimdall model of joint size
    1 whose inputs match ``--features`` (kind 1, or kind 4 with ``--features live``)."""
    from attune.io import heimdall as hd

    m = hd.load_model(args.model)
    want = hd.KIND_HEIMDALL_LIVE if pipeline.features == "live" else hd.KIND_HEIMDALL
    if m.kind != want:
        raise InvalidArgumentError(
            f"{args.model} is a {hd.KIND_NAMES[m.kind]} model (kind {m.kind}); with --features "
            f"{pipeline.features} eval's --model takes a {hd.KIND_NAMES[want]} model (kind "
            f"{want})" + ("; LinnOS always runs as its own baseline" if m.kind == 2 else "")
        )
    if m.joint != 1:
        raise InvalidArgumentError(
            f"{args.model} has joint size {m.joint}; eval's --model takes joint size 1 (the "
            "router decides one read at a time); joint sizes are measured by "
            "`attune bench heimdall --joints 1,3`"
        )
    return m.to_bytes()


def register(sub) -> None:
    from attune.cli import add_output_flags, int_range

    p = sub.add_parser(
        "io",
        help="the simulated SSD, Heimdall's learned I/O admission, block prefetching",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    vs = p.add_subparsers(dest="io_verb", metavar="COMMAND", required=True)

    s = vs.add_parser(
        "simulate",
        help="serve a trace on one simulated SSD and summarise it",
        description="Serve TRACE (or a synthetic trace) on one simulated SSD.",
    )
    s.add_argument("trace", nargs="?", metavar="TRACE", help="trace file (.gz ok)")
    s.add_argument(
        "--synthetic",
        type=int_range(1, 100_000_000),
        default=10_000,
        help="I/Os of the synthetic trace used without TRACE (10000)",
    )
    s.add_argument(
        "--iops",
        type=float,
        default=SYNTHETIC_CLI_IOPS,
        help=f"arrival rate of the synthetic trace, I/Os per second ({SYNTHETIC_CLI_IOPS:g}: "
        "the default device keeps up with it; 20000 overloads it)",
    )
    s.add_argument("--list-params", action="store_true", help="print every SSD parameter")
    _add_common(s)
    add_output_flags(s)
    s.set_defaults(func=_simulate)

    r = vs.add_parser(
        "replay",
        help="write every I/O of TRACE with its simulated (or, with --direct, real) latency",
        description="Serve TRACE on one simulated SSD and write each I/O with its "
        "latency as an Attune block-trace CSV. With --direct FILE the trace runs against FILE "
        "on this machine's disk instead (O_DIRECT, one I/O at a time, offsets wrapped to the "
        "file and aligned to 4 KiB) and the latency is the measured one.",
    )
    r.add_argument("trace", nargs="?", metavar="TRACE", help="trace file (.gz ok)")
    r.add_argument(
        "--synthetic",
        type=int_range(1, 100_000_000),
        default=10_000,
        help="I/Os of the synthetic trace used without TRACE (10000)",
    )
    r.add_argument(
        "--iops",
        type=float,
        default=SYNTHETIC_CLI_IOPS,
        help=f"arrival rate of the synthetic trace, I/Os per second ({SYNTHETIC_CLI_IOPS:g}: "
        "the default device keeps up with it; 20000 overloads it)",
    )
    _add_common(r)
    r.add_argument("--direct", metavar="FILE", help="replay against FILE with O_DIRECT")
    r.add_argument(
        "--file-mb",
        type=int_range(1, 1 << 30),
        default=256,
        help="size of FILE in MiB (256; filled first)",
    )
    r.add_argument("--pace", action="store_true", help="honour the trace's timestamps")
    r.add_argument(
        "--buffered", action="store_true", help="through the page cache instead of O_DIRECT"
    )
    r.add_argument(
        "--overwrite",
        action="store_true",
        help="use FILE although it exists and is not empty (the replay writes into it)",
    )
    add_output_flags(r, out="CSV file to write", out_required=True)
    r.set_defaults(func=_replay)

    from attune import _cli_prefetch

    _cli_prefetch.add_parser(vs)
    h = vs.add_parser("heimdall", help="train and evaluate Heimdall models")
    hs = h.add_subparsers(dest="heimdall_verb", metavar="COMMAND", required=True)
    for name in ("train", "eval"):
        q = hs.add_parser(
            name,
            help="train a model on TRACE"
            if name == "train"
            else "accuracy and per-policy latency over random windows",
        )
        q.add_argument("trace", nargs="+" if name == "eval" else None, metavar="TRACE")
        q.add_argument("--labelling", choices=("period", "cutoff"), default="period")
        q.add_argument("--features", choices=("full", "basic", "live"), default="full")
        q.add_argument("--no-noise-filter", action="store_true", help="skip the 3 filters")
        q.add_argument(
            "--joint",
            type=int,
            default=1,
            help="joint inference size P, 1..9 (1)"
            if name == "train"
            else "joint inference size P: eval routes one read at a time, so only 1 (measure "
            "other sizes with `attune bench heimdall --joints`)",
        )
        q.add_argument("--epochs", type=int, default=20, help="training epochs, 1..10000 (20)")
        _add_common(q)
        if name == "train":
            q.add_argument(
                "--train-fraction",
                type=float,
                default=0.5,
                help="leading fraction of the trace to train on (0.5)",
            )
            q.add_argument("--linnos", action="store_true", help="train the LinnOS baseline")
            add_output_flags(q, out="weight file to write", out_required=True)
            q.set_defaults(func=_train)
        else:
            q.add_argument(
                "--model",
                help="use this weight file on every replica instead of training one per window: "
                "a Heimdall model of joint size 1 (kind 1; kind 4 with --features live). The "
                "live, linnos and clock policies train their own models (and fit their own "
                "clock) and ignore it",
            )
            q.add_argument("--windows", type=int, default=10, help="window pairs, >= 1 (10)")
            q.add_argument(
                "--window-ios",
                type=int,
                default=4000,
                help="I/Os per window, 100..the shortest trace's length, below it with "
                "--windows > 1 (4000)",
            )
            q.add_argument(
                "--policies",
                default="",
                help="routing policies to run, comma-separated (default: all; heimdall always "
                "runs)",
            )
            q.add_argument(
                "--rule-search",
                action="store_true",
                help="choose each window's labelling rule on its training half (grid search)",
            )
            q.add_argument(
                "--probe-reads-us",
                type=float,
                default=5000.0,
                help="the *-probe policies: probe a replica with no read completed or in flight "
                "for this many µs (5000)",
            )
            q.add_argument(
                "--live-rank-tie",
                type=float,
                default=1.0,
                help="heimdall-live-rank(-probe): as --rank-tie, for the live model (1)",
            )
            q.add_argument("--replicas", type=int, choices=(2, 3), default=2)
            q.add_argument("--no-augment", action="store_true", help="no re-rating/resizing")
            q.add_argument("--ladder", action="store_true", help="also the accuracy ladder")
            q.add_argument(
                "--min-busy",
                type=float,
                default=0.0,
                help="only windows whose halves, served alone, have this share of reads in "
                "busy periods (0: any window)",
            )
            q.add_argument(
                "--device-model",
                action="store_true",
                help="one model for the device, trained on every window's training half",
            )
            q.add_argument(
                "--unknown-phase",
                action="store_true",
                help="every replica is written a random (seeded) number of bytes before each "
                "evaluation half, so the clock policies must find each replica's collection "
                "phase (the -clock-voted policies vote on it, -hedged ones send backup reads)",
            )
            q.add_argument(
                "--rank-tie",
                type=float,
                default=2.0,
                help="heimdall-rank: logit margin within which replicas count as tied (2)",
            )
            q.add_argument(
                "--slow-factor",
                type=float,
                default=10.0,
                help="heimdall-cost: a replica predicted slow counts this many times (10)",
            )
            add_output_flags(q)
            q.set_defaults(func=_eval)


if __name__ == "__main__":  # pragma: no cover
    sys.exit("use `attune io ...`")

"""CLI verb `attune cache mrc PATH`: the miss-ratio curve of a live read workload.

Opens the database at PATH with a cache budget (adaptive sizing, so the Symbiosis ghosts run),
replays a read workload over its keys (drawn from the repository's workload library), and prints
the block cache's LRU miss-ratio curve that the controller measured on those reads (stack
distances over sampled key groups), with the split it chose. ``--json`` prints one object;
``--plot FILE`` draws that miss-ratio curve (miss ratio against block cache size, PNG);
``--timeline FILE`` writes the controller's time series (M_a, H_a, H_k, L_e modelled and
measured, state, per window) as JSON, and ``--timeline-plot FILE`` draws it (PNG). Plots need
matplotlib, checked before any read.
"""

from __future__ import annotations

import json
import math
import os

import attune
from attune import workload
from attune._cli_deps import require
from attune._cli_kv import _parse_options
from attune.cli import add_output_flags, int_range, progress

KEYS_MAX = 2_000_000  # keys read into memory to draw requests from (bounded: ~100 MB at most)


#: Below this many bytes on disk `cache mrc` samples every block (unless -o cache_sample_inv).
SAMPLE_ALL_BYTES_MAX = 256 << 20


def _dir_bytes(path: str) -> int:
    """Bytes of the files directly in `path` (0 when it cannot be listed)."""
    try:
        with os.scandir(path) as it:
            return sum(e.stat().st_size for e in it if e.is_file())
    except OSError:
        return 0


def _human(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GiB"


def _mrc(args) -> int:
    if args.reads <= 0:
        raise attune.InvalidArgumentError("--reads must be > 0")
    if args.plot or args.timeline_plot:
        flag = "--plot" if args.plot else "--timeline-plot"
        require(f"attune cache mrc {flag}", "matplotlib")
    options = _parse_options(args.option)
    options.setdefault("memory_budget", args.memory_budget)
    options.setdefault("cache_sizing", "adaptive")
    options.setdefault("create_if_missing", "false")
    if "cache_sample_inv" not in options and _dir_bytes(args.path) < SAMPLE_ALL_BYTES_MAX:
        # A small database has too few blocks for a 1-in-N sample to finish a simulation
        # round: track every block (the ghosts stay small at this size).
        options["cache_sample_inv"] = "1"
    with attune.DB(args.path, **options) as db:
        keys: list[bytes] = []
        for item in db.items():
            keys.append(item[0])
            if len(keys) >= KEYS_MAX:
                break
        if not keys:
            raise attune.InvalidArgumentError(f"{args.path} holds no keys to read")
        stream = workload.iter_requests(args.distribution, len(keys), args.reads, args.seed)
        found = 0
        with progress(args, total=args.reads, desc="reads", unit="op") as bar:
            for i, r in enumerate(stream):
                found += db.get(keys[r]) is not None
                if i % 4096 == 4095:
                    bar.update(4096)
            bar.update(args.reads % 4096)
        tiers = db.stats()["cache_tiers"]
    if tiers is None:
        raise attune.InvalidArgumentError("cache sizing is off (memory_budget=0)")
    if args.timeline:
        series = {k: tiers[k] for k in ("budget_bytes", "rounds", "adoptions")}
        # A window with no device or second-tier read has no measured L_e: null, not NaN.
        series["timeline"] = [
            {k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in w.items()}
            for w in tiers["timeline"]
        ]
        with open(args.timeline, "w", encoding="utf-8") as f:
            json.dump(series, f, allow_nan=False)
    curve = [{"cache_bytes": b, "miss_ratio": r} for b, r in tiers["mrc"]]
    if args.plot:
        plot_mrc(curve, args.plot, f"{args.distribution}, {args.reads:,} reads, {len(keys):,} keys")
    if args.timeline_plot:
        _plot_timeline(tiers, args.timeline_plot)
    result = {
        "path": args.path,
        "reads": args.reads,
        "found": found,
        "distribution": args.distribution,
        "keys": len(keys),
        "layout": tiers["layout"],
        "budget_bytes": tiers["budget_bytes"],
        "app_bytes": tiers["app_bytes"],
        "rounds": tiers["rounds"],
        "adoptions": tiers["adoptions"],
        "controller_cpu_ns": tiers["controller_cpu_ns"],
        "h_a": tiers["h_a"],
        "h_k": tiers["h_k"],
        "mrc": curve,
    }
    if args.json:
        print(json.dumps(result))
        return 0
    print(
        f"{len(keys)} keys, {args.reads} reads ({args.distribution}); cache budget "
        f"{_human(tiers['budget_bytes'])} ({tiers['layout']} layout), block cache now "
        f"{_human(tiers['app_bytes'])}; rounds {tiers['rounds']}, adoptions {tiers['adoptions']}"
    )
    if not curve:
        print(
            "no simulation round finished yet: run more --reads, or sample more densely "
            "(-o cache_sample_inv=8)"
        )
        return 0
    step = max(1, len(curve) // args.points)
    print(f"\n{'block cache':>12}  miss ratio")
    for p in curve[::step]:
        bar = "#" * round(40 * p["miss_ratio"])
        print(f"{_human(p['cache_bytes']):>12}  {p['miss_ratio']:.3f} {bar}")
    return 0


def plot_mrc(curve: list[dict], path: str, subtitle: str = "") -> None:
    """The miss-ratio curve: miss ratio (0..1) against block cache size (MiB), one point per
    simulated size, as a PNG at ``path``."""
    if not curve:
        raise attune.InvalidArgumentError(
            "no simulation round finished yet, so there is no curve to plot: run more --reads, "
            "or sample more densely (-o cache_sample_inv=8)"
        )
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4))
    ax.plot(
        [p["cache_bytes"] / 2**20 for p in curve],
        [p["miss_ratio"] for p in curve],
        marker=".",
    )
    ax.set_xlabel("block cache size (MiB)")
    ax.set_ylabel("miss ratio")
    ax.set_ylim(0, 1.02)
    ax.set_xlim(left=0)
    ax.grid(True, alpha=0.3)
    ax.set_title("miss-ratio curve" + (f" ({subtitle})" if subtitle else ""))
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def _plot_timeline(tiers: dict, path: str) -> None:
    """M_a and L_e (modelled, measured) per controller window: how the split adapted."""
    windows = tiers["timeline"]
    if not windows:
        raise attune.InvalidArgumentError("no controller window recorded yet: run more --reads")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    t = [w["ms"] / 1000 for w in windows]
    fig, (top, bottom) = plt.subplots(2, 1, sharex=True, figsize=(7, 5))
    top.step(t, [w["app_bytes"] / 2**20 for w in windows], where="post")
    top.set_ylabel("block cache M_a (MiB)")
    top.set_ylim(0, tiers["budget_bytes"] / 2**20 * 1.05)
    bottom.plot(t, [w["le_model_ns"] for w in windows], label="L_e modelled")
    bottom.plot(t, [w["le_measured_ns"] for w in windows], label="L_e measured")
    bottom.set_ylabel("expected latency (ns)")
    bottom.set_xlabel("seconds since open")
    bottom.legend()
    top.set_title(f"adaptive cache sizing: {tiers['rounds']} rounds, {tiers['adoptions']} adopted")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def register(sub) -> None:
    p = sub.add_parser(
        "cache",
        help="inspect the adaptive block cache (Symbiosis) of an Attune database",
    )
    cs = p.add_subparsers(dest="cache_verb", metavar="COMMAND", required=True)
    m = cs.add_parser(
        "mrc",
        help="print the miss-ratio curve of a read workload on a database",
        description="Replays reads over PATH's keys with adaptive cache sizing on and prints "
        "the block cache's miss-ratio curve measured by the ghost simulation.",
    )
    m.add_argument("path", metavar="PATH", help="database directory")
    m.add_argument("--reads", type=int, default=1_000_000, help="reads to replay (1000000)")
    m.add_argument(
        "--distribution",
        default="zipfian:0.99",
        help="request distribution over the keys (zipfian:0.99, uniform, hotspot:0.2:0.8, ...)",
    )
    m.add_argument("--memory-budget", default="64MiB", help="memory_budget to open with (64MiB)")
    m.add_argument("--seed", type=int, default=1, help="random seed (1)")
    m.add_argument(
        "--points", type=int_range(1), default=16, help="curve points to print, >= 1 (16)"
    )
    m.add_argument(
        "-o",
        "--option",
        action="append",
        metavar="KEY=VALUE",
        help="DB option, e.g. -o cache_layout=user -o cache_sample_inv=8",
    )
    add_output_flags(m, json_help="print one JSON object")
    m.add_argument(
        "--timeline",
        metavar="FILE",
        help="write the controller's time series (M_a, H_a, H_k, L_e per window) as JSON",
    )
    m.add_argument(
        "--plot",
        metavar="FILE",
        help="draw the miss-ratio curve (miss ratio against block cache size) to a PNG",
    )
    m.add_argument(
        "--timeline-plot",
        metavar="FILE",
        help="draw the controller's M_a and L_e over time to a PNG",
    )
    m.set_defaults(func=_mrc)

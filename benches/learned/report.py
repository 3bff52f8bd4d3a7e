"""Markdown tables for docs/learned-index.md from benches/results/learned-*.jsonl.

Reads the rows `benches/learned/run.sh` wrote (one attune-bench run per file section, so every
ratio compares engines of the same run) and prints the tables of the section "Measured in the
engine". Usage: python benches/learned/report.py [results dir] > tables.md

Thread-safety: a plain script. Invariant: every number printed is a field of a result row or a
ratio of two such fields; nothing is typed in by hand.
"""

from __future__ import annotations

import itertools
import json
import math
import sys
from collections import defaultdict
from pathlib import Path

OFF = "attune:learned_index=off"
ALWAYS = "attune:learned_index=always"
ANALYZER = "attune:learned_index=analyzer"
SHORT = {
    OFF: "off",
    ALWAYS: "always",
    ANALYZER: "analyzer",
    "rocksdb": "RocksDB",
    "leveldb": "LevelDB",
}


def load(path: Path) -> list[dict]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def kops(v: float) -> str:
    return f"{v / 1000:.0f}k" if v >= 10000 else f"{v / 1000:.1f}k"


def ratio(a: float | None, b: float | None) -> str:
    if not a or not b:
        return "-"
    return f"{a / b:.2f}"


def gmean(xs: list[float]) -> float:
    xs = [x for x in xs if x > 0]
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else float("nan")


def index(rows: list[dict]) -> dict:
    """(key_set, workload, engine) -> row; with repeats, the row of the median throughput
    (the lower middle one for an even count), its `ops_range` holding the min and max."""
    groups: dict[tuple, list[dict]] = defaultdict(list)
    for r in rows:
        groups[(r["params"].get("key_set"), r["workload"], r["engine"])].append(r)
    out = {}
    for k, rs in groups.items():
        rs = sorted(rs, key=lambda r: r["ops_per_sec"])
        m = dict(rs[(len(rs) - 1) // 2])
        m["ops_range"] = (rs[0]["ops_per_sec"], rs[-1]["ops_per_sec"])
        m["repeats"] = len(rs)
        out[k] = m
    return out


def learn_ms(ix: dict, ks: str, engine: str) -> float:
    """Learning time of the setup phases (background learning after load and compaction
    counts too: a model learned there is persisted and only loaded by `learn`)."""
    return (
        sum(
            ((ix.get((ks, w, engine)) or {}).get("engine_stats") or {}).get("learn_ns_total", 0)
            for w in ("load", "compact", "learn")
        )
        / 1e6
    )


def cpu_rate(r: dict | None) -> float | None:
    """Operations per CPU second of the engine's process (open and close included): on a
    shared machine this does not count the time the process waited for a CPU."""
    if not r or not r.get("cpu_seconds"):
        return None
    return r["ops"] / r["cpu_seconds"]


def p50(r: dict | None) -> float | None:
    return r["latency_us"]["p50"] if r else None


def share(r: dict | None) -> str:
    st = (r or {}).get("engine_stats") or {}
    if not st.get("total_lookups"):
        return "-"
    return f"{st['learned_lookups'] / st['total_lookups']:.0%}"


def readonly(rows: list[dict]) -> None:
    ix = index(rows)
    keysets = list(dict.fromkeys(r["params"]["key_set"] for r in rows))
    dists = list(dict.fromkeys(r["workload"] for r in rows if r["workload"].startswith("c:")))
    print(
        "| key set | distribution | off | always | analyzer | RocksDB | LevelDB | always/off"
        " | analyzer/off | always/RocksDB | always/LevelDB | model share |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    per_ks_cpu: dict[str, list[float]] = defaultdict(list)
    per_ks_p50: dict[str, list[float]] = defaultdict(list)
    per_ks_an_cpu: dict[str, list[float]] = defaultdict(list)
    vs_rocks_cpu: list[float] = []
    per_ks: dict[str, list[float]] = defaultdict(list)
    per_ks_an: dict[str, list[float]] = defaultdict(list)
    vs_rocks: list[float] = []
    vs_level: list[float] = []
    for ks in keysets:
        for d in dists:
            v = {e: ix.get((ks, d, e), {}).get("ops_per_sec") for e in SHORT}
            if v[OFF] and v[ALWAYS]:
                per_ks[ks].append(v[ALWAYS] / v[OFF])
            if v[OFF] and v[ANALYZER]:
                per_ks_an[ks].append(v[ANALYZER] / v[OFF])
            rs = {e: ix.get((ks, d, e)) for e in SHORT}
            c = {e: cpu_rate(rs[e]) for e in SHORT}
            if c[OFF] and c[ALWAYS]:
                per_ks_cpu[ks].append(c[ALWAYS] / c[OFF])
                per_ks_p50[ks].append(p50(rs[OFF]) / p50(rs[ALWAYS]))
            if c[OFF] and c[ANALYZER]:
                per_ks_an_cpu[ks].append(c[ANALYZER] / c[OFF])
            if c["rocksdb"] and c[ALWAYS]:
                vs_rocks_cpu.append(c[ALWAYS] / c["rocksdb"])
            if v["rocksdb"] and v[ALWAYS]:
                vs_rocks.append(v[ALWAYS] / v["rocksdb"])
            if v["leveldb"] and v[ALWAYS]:
                vs_level.append(v[ALWAYS] / v["leveldb"])
            cells = [kops(v[e]) if v[e] else "-" for e in SHORT]
            print(
                f"| {ks} | {d[2:]} | " + " | ".join(cells) + f" | {ratio(v[ALWAYS], v[OFF])}"
                f" | {ratio(v[ANALYZER], v[OFF])} | {ratio(v[ALWAYS], v['rocksdb'])}"
                f" | {ratio(v[ALWAYS], v['leveldb'])} | {share(ix.get((ks, d, ALWAYS)))} |"
            )
    print()
    print(
        "| key set | always/off: wall | CPU | p50 | analyzer/off: wall | CPU |"
        " model bytes | model / data | learn (ms) |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for ks in keysets:
        learn = ix.get((ks, "learn", ALWAYS), {})
        st = learn.get("engine_stats") or {}
        mb = st.get("model_bytes", 0)
        data = learn.get("logical_bytes") or 0
        print(
            f"| {ks} | {gmean(per_ks[ks]):.2f} | {gmean(per_ks_cpu[ks]):.2f} |"
            f" {gmean(per_ks_p50[ks]):.2f} | {gmean(per_ks_an[ks]):.2f} |"
            f" {gmean(per_ks_an_cpu[ks]):.2f} | {mb:,} |"
            f" {mb / data:.4%} | {learn_ms(ix, ks, ALWAYS):.1f} |"
            if data
            else ""
        )
    allr = [x for xs in per_ks.values() for x in xs]
    print()
    print(
        f"Averaged over key sets (geometric mean of the per-key-set means): always/off "
        f"**{gmean([gmean(x) for x in per_ks.values()]):.2f}**, analyzer/off "
        f"**{gmean([gmean(x) for x in per_ks_an.values()]):.2f}**; arithmetic mean of all "
        f"{len(allr)} always/off ratios {sum(allr) / max(len(allr), 1):.2f};\nalways/RocksDB "
        f"geo. mean {gmean(vs_rocks):.2f}, always/LevelDB {gmean(vs_level):.2f}.\nPer CPU second:"
        f" always/off **{gmean([gmean(x) for x in per_ks_cpu.values()]):.2f}**, analyzer/off"
        f" **{gmean([gmean(x) for x in per_ks_an_cpu.values()]):.2f}**, always/RocksDB"
        f" {gmean(vs_rocks_cpu):.2f}; p50 latency off/always"
        f" **{gmean([gmean(x) for x in per_ks_p50.values()]):.2f}**."
    )
    print()
    print("| distribution | per CPU second: always/off | always/RocksDB | always/LevelDB |")
    print("|---|---|---|---|")
    for d in dists:
        rat: dict[str, list[float]] = defaultdict(list)
        for ks in keysets:
            c = {e: cpu_rate(ix.get((ks, d, e))) for e in SHORT}
            for peer in (OFF, "rocksdb", "leveldb"):
                if c[ALWAYS] and c[peer]:
                    rat[peer].append(c[ALWAYS] / c[peer])
        print(
            f"| {d[2:]} | {gmean(rat[OFF]):.2f} | {gmean(rat['rocksdb']):.2f} |"
            f" {gmean(rat['leveldb']):.2f} |"
        )
    print()
    print("Load (write) throughput, same runs:")
    print()
    print(
        "| key set | off | always | analyzer | always/off | analyzer/off |"
        " per CPU second: always/off | analyzer/off |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for ks in keysets:
        rs = {e: ix.get((ks, "load", e)) for e in (OFF, ALWAYS, ANALYZER)}
        v = {e: (r or {}).get("ops_per_sec") for e, r in rs.items()}
        c = {e: cpu_rate(r) for e, r in rs.items()}
        print(
            f"| {ks} | {kops(v[OFF])} | {kops(v[ALWAYS])} | {kops(v[ANALYZER])} |"
            f" {ratio(v[ALWAYS], v[OFF])} | {ratio(v[ANALYZER], v[OFF])} |"
            f" {ratio(c[ALWAYS], c[OFF])} | {ratio(c[ANALYZER], c[OFF])} |"
        )


def simple(rows: list[dict], workloads: list[str] | None = None) -> None:
    ix = index(rows)
    engines = list(dict.fromkeys(r["engine"] for r in rows))
    keysets = list(dict.fromkeys(r["params"]["key_set"] for r in rows))
    wls = workloads or list(dict.fromkeys(r["workload"] for r in rows))
    print(
        "| key set | phase | "
        + " | ".join(SHORT.get(e, e) for e in engines)
        + (
            " | always/off | always/RocksDB | per CPU-s: always/off | always/RocksDB |"
            if OFF in engines
            else " |"
        )
    )
    print("|---|---|" + "---|" * len(engines) + ("---|---|---|---|" if OFF in engines else ""))
    for ks in keysets:
        for w in wls:
            v = {e: ix.get((ks, w, e), {}).get("ops_per_sec") for e in engines}
            if not any(v.values()):
                continue
            cells = [kops(v[e]) if v[e] else "-" for e in engines]
            extra = ""
            if OFF in engines:
                c = {e: cpu_rate(ix.get((ks, w, e))) for e in engines}
                extra = (
                    f" {ratio(v.get(ALWAYS), v[OFF])} | {ratio(v.get(ALWAYS), v.get('rocksdb'))} |"
                    f" {ratio(c.get(ALWAYS), c[OFF])} | {ratio(c.get(ALWAYS), c.get('rocksdb'))} |"
                )
            print(f"| {ks} | {w} | " + " | ".join(cells) + " |" + extra)


def delta(rows: list[dict]) -> None:
    ix = index(rows)
    print(
        "| key set | engine | reads/s | reads/CPU-s | p50 µs | p99 µs | vs off (CPU)"
        " | model bytes | model / data"
        " | segments | model share |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for ks in dict.fromkeys(r["params"]["key_set"] for r in rows):
        off = cpu_rate(ix.get((ks, "c:uniform", OFF)))
        for e in dict.fromkeys(r["engine"] for r in rows):
            r = ix.get((ks, "c:uniform", e))
            if not r:
                continue
            learn = ix.get((ks, "learn", e), {})
            st = learn.get("engine_stats") or {}
            mb = st.get("model_bytes", 0)
            data = learn.get("logical_bytes") or 1
            name = e.replace("attune:learned_index=always;learned_delta=", "δ=")
            print(
                f"| {ks} | {SHORT.get(name, name)} | {kops(r['ops_per_sec'])} |"
                f" {kops(cpu_rate(r) or 0)} |"
                f" {r['latency_us']['p50']:.2f} | {r['latency_us']['p99']:.2f} |"
                f" {ratio(cpu_rate(r), off)} | {mb:,} | {mb / data:.4%} |"
                f" {st.get('model_segments', 0):,} | {share(r)} |"
            )


def mode_engine(engines: list[str], mode: str) -> str | None:
    """The engine of a run whose options say `learned_index=<mode>` (other options may follow)."""
    for e in engines:
        if f"learned_index={mode}" in e.split(";")[0] or f";learned_index={mode}" in e:
            return e
    return None


def fg_rate(r: dict | None) -> float | None:
    """Operations per CPU second of the client threads: the foreground work alone (the
    engine's flush, compaction and learning threads excluded), which a loaded machine does not
    inflate the way wall-clock time is."""
    if not r or not r.get("client_cpu_seconds"):
        return None
    return r["ops"] / r["client_cpu_seconds"]


def median(xs: list[float]) -> float | None:
    xs = sorted(x for x in xs if x is not None)
    if not xs:
        return None
    n = len(xs)
    return xs[n // 2] if n % 2 else (xs[n // 2 - 1] + xs[n // 2]) / 2


def writes(rows: list[dict]) -> None:
    """Write-percentage sweep (Bourbon §2.4.4): foreground throughput and learning time of
    offline / always / analyzer learning (both benefit estimates), per phase; every number
    the median over the repeats of that number."""
    engines = list(dict.fromkeys(r["engine"] for r in rows))
    lifetime = next((x for x in engines if "learned_benefit=lifetime" in x), None)
    # "calib": the default analyzer with `learned_calibrate=true`.
    calib = next((x for x in engines if "learned_calibrate=true" in x), None)
    e = {
        m: mode_engine([x for x in engines if x not in (lifetime, calib)], m)
        for m in ("off", "offline", "always", "analyzer")
    }
    e["lifetime"] = lifetime
    e["calib"] = calib
    if not (e["always"] and e["analyzer"]):
        return
    groups: dict[tuple, list[dict]] = defaultdict(list)
    for r in rows:
        groups[(r["workload"], r["engine"])].append(r)

    def med(w: str, m: str, f) -> float | None:
        return median([f(r) for r in groups.get((w, e[m]), [])]) if e[m] else None

    def paired(w: str, m: str, f) -> float | None:
        """The median over repeats of engine m's f against always-learn's in the same repeat:
        the repeats are interleaved, so pairing cancels the machine's drift between them."""
        by_rep = {r.get("repeat"): f(r) for r in groups.get((w, e["always"]), [])}
        return median(
            [
                f(r) / by_rep[r.get("repeat")]
                for r in groups.get((w, e[m]), [])
                if by_rep.get(r.get("repeat")) and f(r) is not None
            ]
        )

    def stat(key: str, scale: float = 1.0):
        return lambda r: (r.get("engine_stats") or {}).get(key, 0) / scale

    modes = [m for m in ("off", "offline", "always", "analyzer", "calib", "lifetime") if e[m]]
    learners = [m for m in ("always", "analyzer", "calib", "lifetime") if e[m]]
    guessers = [m for m in ("analyzer", "calib", "lifetime") if e[m]]
    print(
        "| phase | "
        + " | ".join(f"{m} fg ops/CPU-s" for m in modes)
        + " | analyzer/always fg: ratio of medians (paired; wall) | "
        + " | ".join(f"{m} learn CPU ms (files)" for m in learners)
        + " | analyzer/always learn | "
        + " | ".join(f"{m} saved ms" for m in learners)
        + " | "
        + " | ".join(f"{m} predicted → saved ms" for m in guessers)
        + " |"
    )
    print("|---" * (len(modes) + 2 * len(learners) + len(guessers) + 3) + "|")
    for w in dict.fromkeys(r["workload"] for r in rows):
        if not w.startswith("write"):
            continue
        fg = {m: med(w, m, fg_rate) for m in modes}
        wall = {m: med(w, m, lambda r: r["ops_per_sec"]) for m in modes}
        learn = {m: med(w, m, stat("learn_ns_total", 1e6)) for m in learners}
        files = {m: med(w, m, stat("files_learned")) for m in learners}
        saved = {m: med(w, m, stat("benefit_realized_ns", 1e6)) for m in learners}

        def pred(m: str, w: str = w) -> str:
            if not e[m] or m not in learners:
                return "-"
            p = med(w, m, stat("benefit_predicted_ns", 1e6))
            q = med(w, m, stat("benefit_predicted_realized_ns", 1e6))
            return f"{p:.1f} → {q:.1f}" if p else "-"

        cells = [kops(fg[m]) if fg[m] else "-" for m in modes]
        cells.append(
            f"{ratio(fg['analyzer'], fg['always'])} ({paired(w, 'analyzer', fg_rate) or 0:.2f};"
            f" {ratio(wall['analyzer'], wall['always'])})"
        )
        cells += [f"{learn[m]:.1f} ({files[m]:.0f})" for m in learners]
        cells.append(ratio(learn["analyzer"], learn["always"]))
        cells += [f"{saved[m]:.1f}" for m in learners]
        cells += [pred(m) for m in guessers]
        print(f"| {w} | " + " | ".join(cells) + " |")
    reps = max(len(v) for v in groups.values())
    print(
        f"\n(each number the median of its {reps} repeats; fg = operations per CPU second of the"
        " client thread; paired = the median over repeats of analyzer/always within a repeat;"
        " learning time is the learner thread's CPU time; saved = lookup time the"
        " models of the phase's retired files saved, by the analyzer's accounting)"
    )
    hindsight(groups, e)
    if e["calib"]:
        print(
            "\n(calib = the default analyzer with `learned_calibrate=true`: its benefit estimates"
            " scaled by what its earlier choices saved)"
        )


def oracle_learn_share(
    r: dict, keep: float = 0.95, real_per_accounted: float = 1.0
) -> float | None:
    """The least learning any analyzer could have done in this always-learn phase while keeping
    `keep` of its foreground throughput, as a share of what always-learn trained: from the
    phase's hindsight frontier (attune_learn::hindsight), with the lookup time the skipped
    models saved added to the client threads' CPU time."""
    st = r.get("engine_stats") or {}
    frontier, total = st.get("hindsight_frontier"), st.get("hindsight_learn_ns") or 0
    cpu = r.get("client_cpu_seconds")
    if not frontier or total <= 0 or not cpu:
        return None
    if real_per_accounted <= 0:
        return 0.0  # the models saved no measurable foreground time: learn nothing
    # The loss budget in the accounting's units: skipping models the accounting credits with L
    # loses real_per_accounted * L of client CPU time.
    budget = cpu * 1e9 * (1 / keep - 1) / real_per_accounted
    best = frontier[0][1]
    for (la, ca), (lb, cb) in itertools.pairwise(frontier):
        if lb <= budget:
            best = cb
            continue
        if la <= budget < lb:
            best = ca - (budget - la) / (lb - la) * (ca - cb)
        break
    return best / total


def hindsight(groups: dict[tuple, list[dict]], e: dict) -> None:
    """The oracle's bound next to the analyzers: for each write phase, the least learning that
    perfect foresight needs at >= 95 % of always-learn's foreground throughput, first by the
    analyzer's accounting of what each model saved, then with that accounting scaled to the
    foreground CPU that always-learn measurably saved over models off in the same run.
    `groups`: the rows by (workload, engine); `e`: the engines by mode."""
    # What always-learn's phase-time models really saved: its client CPU against offline
    # learning's (the same models loaded from the learn phase, none learned during the phase),
    # or against models off when the run has no offline engine (that difference also counts
    # the loaded models, which hindsight does not).
    always = e["always"]
    ref = "offline" if e.get("offline") else "off"
    off = e[ref]
    always_rows = [r for (_, x), rs in groups.items() if x == always for r in rs]
    if not any((r.get("engine_stats") or {}).get("hindsight_frontier") for r in always_rows):
        return
    others = [m for m in ("analyzer", "calib") if e.get(m)]
    print(
        "\n| phase | always: models (learn CPU ms) | saved by accounting ms | measured:"
        f" {ref} − always client CPU ms | measured / accounting | oracle at fg ≥ 95 %: by accounting | scaled to"
        " measured | " + " | ".join(f"{m} learn / always" for m in others) + " |"
    )
    print("|---" * (7 + len(others)) + "|")

    def per_op(rows: list[dict]) -> float | None:
        v = [r["client_cpu_seconds"] / r["ops"] for r in rows if r.get("client_cpu_seconds")]
        return median(v) if v else None

    for w in dict.fromkeys(w for (w, _) in groups):
        if not w.startswith("write"):
            continue
        a = groups.get((w, always), [])
        st = [r.get("engine_stats") or {} for r in a]
        if not any(s.get("hindsight_frontier") for s in st):
            continue
        learn = median([s.get("hindsight_learn_ns", 0) / 1e6 for s in st])
        files = median([s.get("hindsight_files", 0) for s in st])
        saved = median([s.get("hindsight_saved_ns", 0) / 1e6 for s in st])
        po, pa = per_op(groups.get((w, off), [])), per_op(a)
        measured = (po - pa) * median([r["ops"] for r in a]) * 1e3 if po and pa else None
        scale = measured / saved if measured is not None and saved > 0 else None
        o_acc = [x for x in (oracle_learn_share(r) for r in a) if x is not None]
        o_real = (
            [x for x in (oracle_learn_share(r, 0.95, scale) for r in a) if x is not None]
            if scale is not None
            else []
        )
        al = median([s.get("learn_ns_total", 0) for s in st])
        cells = [
            f"{files:.0f} ({learn:.1f})",
            f"{saved:.1f}",
            f"{measured:.1f}" if measured is not None else "-",
            f"{scale:.2f}" if scale is not None else "-",
            f"{median(o_acc):.2f}×" if o_acc else "-",
            f"{median(o_real):.2f}×" if o_real else "-",
        ]
        for m in others:
            an = median(
                [
                    (r.get("engine_stats") or {}).get("learn_ns_total", 0)
                    for r in groups.get((w, e[m]), [])
                ]
            )
            cells.append(ratio(an, al))
        print(f"| {w} | " + " | ".join(cells) + " |")
    print(
        "\n(oracle: skips the models that saved least per training nanosecond first, until the"
        " lookup time they saved would cut always-learn's foreground throughput per client CPU"
        " second below 95 %; \"by accounting\" takes each model's saving from the analyzer's"
        ' timed lookups (retired and still-live tables), "scaled to measured" scales those'
        " savings by what always-learn's client threads really saved over offline learning (or"
        " models off) in the"
        " same run; medians of the repeats)"
    )


def scale(rows: list[dict]) -> None:
    """Every engine against the first one of the run (models off)."""
    ix = index(rows)
    engines = list(dict.fromkeys(r["engine"] for r in rows))
    base = engines[0]
    print(
        "| phase | engine | reads/s | reads/CPU-s | p50 µs | vs first engine (CPU) | tables |"
        " model bytes | model / data | model share |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for w in dict.fromkeys(r["workload"] for r in rows):
        if not w.startswith("c:"):
            continue
        ks = rows[0]["params"]["key_set"]
        b = cpu_rate(ix.get((ks, w, base)))
        for e in engines:
            r = ix.get((ks, w, e))
            if not r:
                continue
            st = r.get("engine_stats") or {}
            tables = sum(st.get("level_files") or []) or "-"
            mb = st.get("model_bytes", 0)
            print(
                f"| {w[2:]} | {e} | {kops(r['ops_per_sec'])} | {kops(cpu_rate(r) or 0)} |"
                f" {r['latency_us']['p50']:.2f} | {ratio(cpu_rate(r), b)} | {tables} |"
                f" {mb:,} | {mb / (r['logical_bytes'] or 1):.4%} | {share(r)} |"
            )


def load_repeats(rows: list[dict]) -> None:
    """Per-repeat load throughput and the ratio of medians against models off."""
    per: dict[str, list[dict]] = defaultdict(list)
    for r in rows:
        per[r["engine"]].append(r)
    med = {}
    print("| engine | ops/s per repeat | median | ops/CPU-s per repeat | median | vs off (CPU) |")
    print("|---|---|---|---|---|---|")
    for e, rs in per.items():
        w = sorted(r["ops_per_sec"] for r in rs)
        c = sorted(cpu_rate(r) or 0 for r in rs)
        med[e] = (w[(len(w) - 1) // 2], c[(len(c) - 1) // 2])
        print(
            f"| {SHORT.get(e, e)} | {', '.join(kops(x) for x in w)} | {kops(med[e][0])} |"
            f" {', '.join(kops(x) for x in c)} | {kops(med[e][1])} |"
            f" {ratio(med[e][1], med.get(OFF, (0, 0))[1])} |"
        )


def memlimit(rows: list[dict]) -> None:
    print("| engine | phase | ops/s | p50 µs | p99 µs | peak RSS MiB | bytes read MiB |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        rss = (r.get("peak_rss_bytes") or 0) >> 20
        rd = (r.get("bytes_read") or 0) / 2**20
        print(
            f"| {SHORT.get(r['engine'], r['engine'])} | {r['workload']} |"
            f" {r['ops_per_sec']:,.0f} | {r['latency_us']['p50']:.1f} |"
            f" {r['latency_us']['p99']:.1f} | {rss} | {rd:.1f} |"
        )


def delta_keysets(rows: list[dict]) -> None:
    """Read-only lookups at δ = 2 and 4 against models off, per key set: geometric means over
    the request distributions of the median-of-repeats ratios (wall / per CPU s / p50)."""
    ix = index(rows)
    engines = list(dict.fromkeys(r["engine"] for r in rows))
    off = engines[0]
    others = engines[1:]
    names = [e.split("learned_delta=")[-1] if "learned_delta=" in e else e for e in others]
    print("| key set | " + " | ".join(f"δ = {n}" for n in names) + " |")
    print("|---|" + "---|" * len(others))
    sets = list(dict.fromkeys(r["params"].get("key_set") for r in rows))
    dists = [w for w in dict.fromkeys(r["workload"] for r in rows) if w.startswith("c:")]
    overall: dict[str, list[list[float]]] = {e: [[], [], []] for e in others}
    for ks in sets:
        cells = []
        for e in others:
            trip: list[list[float]] = [[], [], []]
            for d in dists:
                b, r = ix.get((ks, d, off)), ix.get((ks, d, e))
                if not (b and r):
                    continue
                trip[0].append(r["ops_per_sec"] / b["ops_per_sec"])
                trip[1].append((cpu_rate(r) or 0) / (cpu_rate(b) or 1))
                trip[2].append(p50(b) / p50(r))
            g = [gmean(t) for t in trip]
            for i in range(3):
                overall[e][i].append(g[i])
            cells.append(" / ".join(f"{x:.2f}" for x in g))
        print(f"| {ks} | " + " | ".join(cells) + " |")
    tail = " | ".join(" / ".join(f"{gmean(t):.2f}" for t in overall[e]) for e in others)
    print(f"| geometric mean | {tail} |")


def steps(rows: list[dict]) -> None:
    """Nanoseconds per lookup step, baseline against model path, per key set (the
    `attune-bench lookup-steps` rows; step timing adds about one clock read per step)."""
    names = [k for k in rows[0] if k.startswith("ns_") and k not in ("ns_total", "ns_wall")]
    print(
        "| key set | path | " + " | ".join(n[3:] for n in names) + " | total ns | model/baseline |"
    )
    print("|---|---|" + "---|" * len(names) + "---|---|")
    by = {(r["key_set"], r["path"]): r for r in rows}
    for (ks, path), r in by.items():
        base = by.get((ks, "baseline"))
        rel = ratio(r["ns_total"], base["ns_total"]) if base and path == "model" else ""
        cells = " | ".join(f"{r[n]:.0f}" for n in names)
        print(f"| {ks} | {path} | {cells} | {r['ns_total']:.0f} | {rel} |")


def main() -> None:
    d = Path(sys.argv[1] if len(sys.argv) > 1 else "benches/results")
    sections = [
        ("Read-only lookups (sequential load)", "learned-readonly", readonly),
        ("Error bound over all key sets", "learned-delta-keysets", delta_keysets),
        ("Random load order", "learned-randomload", lambda r: simple(r, ["load", "c:uniform"])),
        ("Range queries", "learned-range", lambda r: simple(r, ["scan1", "scan10", "scan100"])),
        ("Error bound sweep", "learned-delta", delta),
        ("YCSB", "learned-ycsb", simple),
        ("Write-percentage sweep", "learned-writes", writes),
        ("Write-percentage sweep, 1M records", "learned-writes-1m", writes),
        (
            "Write-percentage sweep, 1M records, the analyzer, more repeats",
            "learned-writes-1m-analyzer",
            writes,
        ),
        (
            "Write-percentage sweep, 1M records, LevelDB's level sizes",
            "learned-writes-1m-leveldb",
            writes,
        ),
        (
            "The same, a 1,000,000-operation phase at 50 % writes",
            "learned-writes-1m-leveldb-long",
            writes,
        ),
        (
            "The same, before learnability (commit 7a2769c)",
            "learned-writes-1m-leveldb-long-7a2769c",
            writes,
        ),
        ("Limited memory", "learned-memlimit", memlimit),
        ("Larger scale, many tables", "learned-scale", scale),
        ("Load phase repeated", "learned-load", load_repeats),
        ("Latency per lookup step", "learned-steps", steps),
    ]
    for title, stem, fn in sections:
        rows = load(d / f"{stem}.jsonl")
        if not rows:
            continue
        loads = [r["machine"]["loadavg_1m"] for r in rows if "loadavg_1m" in r["machine"]]
        print(f"### {title} (`{stem}.jsonl`, {len(rows)} rows)\n")
        reps = max((r.get("repeat") or 0) + 1 for r in rows)
        if reps > 1:
            print(f"Median of {reps} interleaved repeats.\n")
        if loads:
            print(
                f"1-minute load average while the rows were written: {min(loads):.1f} to"
                f" {max(loads):.1f} (2 CPUs).\n"
            )
        fn(rows)
        print()


if __name__ == "__main__":
    main()

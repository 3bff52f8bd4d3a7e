"""Heimdall's training pipeline in numpy: period labelling, the three noise filters, features,
the 11→128→16→1 network, and export to a checksummed weight file (never pickle).

The data is a *replay*: a trace served by one simulated SSD (:func:`attune.io.replay`), which gives
every read its latency and the features the device showed at submission. The pipeline, with the
choices the chapter leaves open (design note: ``docs/heimdall.md``):

* **Labelling** (:func:`label_periods`). A read *starts* a busy period when its latency is above
  ``lat_factor`` × the median read latency, its throughput (bytes/µs) below the median throughput /
  ``thpt_factor``, and its throughput dropped by at least ``drop_factor`` from the previous read's;
  the period then extends over the following reads while their throughput stays below the median.
  The thresholds are multiples of medians (defaults 2, 2, 2) instead of the chapter's
  gradient-descent search: reproducible, and a parameter each. :func:`label_cutoff` is LinnOS's
  per-I/O cutoff (latency above its ``quantile``, p90), for the accuracy ladder.
* **Noise filters** (:func:`noise_filter`, training data only): (1) in a slow period, drop reads
  faster and of higher throughput than the period's medians; (2) in a fast period, drop reads
  slower than ``lat_factor`` × and of lower throughput than 1/``thpt_factor`` × the period's
  medians; (3) drop slow periods of ``burst_max`` (3) reads or fewer.
* **Features**: size, queue length, and the last 3 completed I/Os' queue lengths, latencies and
  throughputs (11), min-max scaled with the training set's ranges, clipped to [0, 1]. For joint
  inference of P reads: the P sizes, then the first read's other 10 (``10 + P`` inputs); the group
  is slow when any of its reads is. ``features="live"`` (not in the chapter) appends what the
  device shows about the reads still in flight at the decision (:data:`LIVE_NAMES`: the oldest
  in-flight read's age, the time since the newest read completion, the reads in flight): a
  history of completions goes stale exactly when a busy period holds the reads back.
* **Model**: 11→128→16→1, ReLU, sigmoid, binary cross-entropy, Adam (lr 1e-3, 20 epochs,
  batches of 256, He initialisation, seeded). The decision threshold is the one that maximises F1
  on the training set.

The weight file's layout is ``docs/formats/io-model.md``; the Rust side (``attune-io``'s
``model`` module) checks it and runs it quantised (×1024).
"""

from __future__ import annotations

import itertools
import os
import struct
from dataclasses import dataclass, field

import numpy as np

from attune import _native
from attune.errors import Error, InvalidArgumentError, StorageIOError
from attune.io.trace import check_path, check_trace

MAGIC = b"ATIOMLP1"
VERSION = 1
KIND_HEIMDALL = 1
KIND_LINNOS = 2
#: Heimdall's features followed by the 3 live (in-flight) ones: the reads outstanding on the
#: device at the decision (``features="live"``).
KIND_HEIMDALL_LIVE = 4
#: TinFetch's prefetching network (``attune.io.prefetch``): the same file format, another model.
KIND_TINFETCH = 3
#: Name and kind number of every model kind the weight file holds.
KIND_NAMES = {
    KIND_HEIMDALL: "Heimdall",
    KIND_LINNOS: "LinnOS",
    KIND_TINFETCH: "TinFetch",
    KIND_HEIMDALL_LIVE: "HeimdallLive",
}
#: The kinds :func:`load_model` accepts: admission models (Heimdall's, the live one, LinnOS).
ADMISSION_KINDS = (KIND_HEIMDALL, KIND_LINNOS, KIND_HEIMDALL_LIVE)
#: Largest number of training epochs a :class:`Pipeline` takes.
EPOCHS_MAX = 10_000
#: Names of the live features (a replay's ``live`` columns).
#: Ages are ``ln(1 + µs)``, capped at 100 ms (``crates/attune-io/src/features.rs``).
LIVE_NAMES = ("ln_oldest_inflight_us", "ln_since_done_us", "inflight_reads")
#: Index of each raw feature in a replay's 11 columns.
SIZE, QLEN, HQ, HL, HT = 0, 1, slice(2, 5), slice(5, 8), slice(8, 11)


# ---------------------------------------------------------------- CRC32C (the format's checksum)
def _crc32c_table() -> list[int]:
    table = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        table.append(c)
    return table


_CRC_TABLE = _crc32c_table()


def crc32c(data: bytes) -> int:
    """CRC-32C (Castagnoli), as the Rust ``crc32c`` crate computes it."""
    c = 0xFFFFFFFF
    t = _CRC_TABLE
    for b in data:
        c = t[(c ^ b) & 0xFF] ^ (c >> 8)
    return c ^ 0xFFFFFFFF


# ---------------------------------------------------------------- labelling and filtering
@dataclass(frozen=True)
class LabelRule:
    """Thresholds of the period labelling and noise filters (see the module docstring)."""

    lat_factor: float = 2.0
    thpt_factor: float = 2.0
    drop_factor: float = 2.0
    burst_max: int = 3

    def check(self) -> None:
        for name in ("lat_factor", "thpt_factor", "drop_factor"):
            v = getattr(self, name)
            if not (v >= 1.0 and np.isfinite(v)):
                raise InvalidArgumentError(f"{name} must be a number >= 1, got {v}")
        if self.burst_max < 0:
            raise InvalidArgumentError(f"burst_max must be >= 0, got {self.burst_max}")


def throughput(size: np.ndarray, latency_ns: np.ndarray) -> np.ndarray:
    """Bytes per microsecond."""
    return size.astype(np.float64) / np.maximum(latency_ns.astype(np.float64) / 1e3, 1e-3)


def label_medians(size: np.ndarray, latency_ns: np.ndarray) -> tuple[float, float]:
    """(median latency in ns, median throughput) of reads: the labelling's reference."""
    if len(size) == 0:
        return 0.0, 0.0
    return float(np.median(latency_ns)), float(np.median(throughput(size, latency_ns)))


def label_periods(
    size: np.ndarray,
    latency_ns: np.ndarray,
    rule: LabelRule = LabelRule(),
    reference: tuple[float, float] | None = None,
) -> np.ndarray:
    """Period labels (1 = slow, decline) of reads in arrival order. ``reference`` = (median
    latency, median throughput) to measure against (the training data's, when labelling held-out
    data); by default the reads' own. ``size`` and ``latency_ns`` are 1-D of the same length
    (else :class:`attune.InvalidArgumentError`)."""
    rule.check()
    size, latency_ns = _same_length("label_periods", size=size, latency_ns=latency_ns)
    n = len(size)
    labels = np.zeros(n, dtype=np.int8)
    if n == 0:
        return labels
    lat = latency_ns.astype(np.float64)
    thpt = throughput(size, latency_ns)
    lat_median, thpt_median = reference or label_medians(size, latency_ns)
    high_lat = rule.lat_factor * lat_median
    low_thpt = thpt_median / rule.thpt_factor
    prev = np.concatenate(([thpt[0]], thpt[:-1]))
    start = (lat > high_lat) & (thpt < low_thpt) & (thpt * rule.drop_factor <= prev)
    in_zone = False
    for i in range(n):
        if start[i]:
            in_zone = True
        elif in_zone and not thpt[i] < thpt_median:
            in_zone = False
        labels[i] = 1 if in_zone else 0
    return labels


def _same_length(where: str, **arrays) -> list[np.ndarray]:
    """The arrays as 1-D numeric ndarrays if they all are and have one length, else
    :class:`attune.InvalidArgumentError` naming them and their shapes."""
    out = []
    for name, a in arrays.items():
        try:
            v = np.asarray(a, dtype=np.float64)
        except (TypeError, ValueError):
            raise InvalidArgumentError(f"{where}: {name} must be numbers, got {a!r:.60}") from None
        out.append(v)
    shapes = [v.shape for v in out]
    if any(len(sh) != 1 for sh in shapes) or len({sh[0] for sh in shapes}) > 1:
        named = ", ".join(f"{n} {sh}" for n, sh in zip(arrays, shapes))
        raise InvalidArgumentError(f"{where}: arrays must be 1-D of one length, got {named}")
    return out


def label_cutoff(latency_ns: np.ndarray, quantile: float = 0.9) -> np.ndarray:
    """LinnOS-style labels: 1 when the latency is above the ``quantile`` of all latencies."""
    if not 0 < quantile < 1:
        raise InvalidArgumentError(f"quantile must be in (0, 1), got {quantile}")
    if len(latency_ns) == 0:
        return np.zeros(0, dtype=np.int8)
    return (latency_ns > np.quantile(latency_ns, quantile)).astype(np.int8)


def _runs(labels: np.ndarray):
    """(start, stop, value) of each run of equal labels."""
    n = len(labels)
    i = 0
    while i < n:
        j = i
        while j < n and labels[j] == labels[i]:
            j += 1
        yield i, j, int(labels[i])
        i = j


def noise_filter(
    size: np.ndarray,
    latency_ns: np.ndarray,
    labels: np.ndarray,
    rule: LabelRule = LabelRule(),
    stages: tuple[int, ...] = (1, 2, 3),
) -> np.ndarray:
    """A keep-mask after the three noise filters (``stages`` picks which run)."""
    rule.check()
    keep = np.ones(len(labels), dtype=bool)
    lat = latency_ns.astype(np.float64)
    thpt = throughput(size, latency_ns)
    for a, b, v in _runs(labels):
        seg_lat, seg_thpt = lat[a:b], thpt[a:b]
        ml, mt = np.median(seg_lat), np.median(seg_thpt)
        if v == 1:
            if 1 in stages:
                keep[a:b] &= ~((seg_lat < ml) & (seg_thpt > mt))
            if 3 in stages and b - a <= rule.burst_max:
                keep[a:b] = False
        elif 2 in stages:
            keep[a:b] &= ~((seg_lat > rule.lat_factor * ml) & (seg_thpt < mt / rule.thpt_factor))
    return keep


# ---------------------------------------------------------------- features
def joint_features(
    feats: np.ndarray, labels: np.ndarray, joint: int
) -> tuple[np.ndarray, np.ndarray]:
    """Groups consecutive rows by ``joint``: ``[size_1..size_P, the first row's other 10]`` and
    the group label (slow if any row is)."""
    if not 1 <= joint <= 9:
        raise InvalidArgumentError(f"joint must be in 1..9, got {joint}")
    if joint == 1:
        return feats, labels
    g = len(feats) // joint
    f = feats[: g * joint].reshape(g, joint, feats.shape[1])
    x = np.concatenate([f[:, :, SIZE], f[:, 0, 1:]], axis=1)
    y = labels[: g * joint].reshape(g, joint).max(axis=1)
    return x, y


def basic_features(feats: np.ndarray) -> np.ndarray:
    """LinnOS's raw inputs without digitisation: queue length, last 3 queue lengths and latencies
    (the ladder's "before feature extraction" stage; sizes and throughputs zeroed)."""
    x = feats.copy()
    x[:, SIZE] = 0
    x[:, HT] = 0
    return x


def linnos_digits(feats: np.ndarray, qlen4: np.ndarray | None = None) -> np.ndarray:
    """LinnOS's 31 digitised inputs from the replay's history (3 digits of the queue length and of
    each past queue length, 4 of each past latency in µs). The replay keeps 3 past I/Os; the 4th
    slot repeats the 3rd. The Rust router builds the same from 4 real past I/Os."""
    n = len(feats)
    out = np.zeros((n, 31), dtype=np.float32)

    def put(col: int, v: np.ndarray, k: int) -> None:
        v = np.minimum(np.floor(v).astype(np.int64), 10**k - 1)
        for d in range(k - 1, -1, -1):
            out[:, col + d] = v % 10
            v = v // 10

    put(0, feats[:, QLEN], 3)
    hq = feats[:, HQ]
    hl = feats[:, HL]
    for i in range(4):
        j = min(i, 2)
        put(3 + 3 * i, hq[:, j], 3)
        put(15 + 4 * i, hl[:, j], 4)
    return out


# ---------------------------------------------------------------- the network
@dataclass
class Mlp:
    """A small ReLU network with a sigmoid (1 output) or softmax-pair (2 outputs) head."""

    weights: list[np.ndarray]
    biases: list[np.ndarray]
    scale_min: np.ndarray
    scale_max: np.ndarray
    kind: int = KIND_HEIMDALL
    joint: int = 1
    threshold: float = 0.5
    history: list[float] = field(default_factory=list)

    @property
    def dims(self) -> list[int]:
        return [self.weights[0].shape[1]] + [w.shape[0] for w in self.weights]

    def __repr__(self) -> str:
        shape = "x".join(map(str, self.dims)) if self.weights else "untrained"
        joint = f", joint={self.joint}" if self.joint != 1 else ""
        return f"Mlp({shape}, kind={self.kind}{joint}, threshold={self.threshold:.3f})"

    def scale(self, x: np.ndarray) -> np.ndarray:
        rng = self.scale_max - self.scale_min
        inv = np.where(rng > 0, 1.0 / np.where(rng > 0, rng, 1.0), 0.0)
        return np.clip((x - self.scale_min) * inv, 0.0, 1.0).astype(np.float32)

    def logits(self, x: np.ndarray) -> np.ndarray:
        h = self.scale(x)
        for i, (w, b) in enumerate(zip(self.weights, self.biases)):
            h = h @ w.T + b
            if i + 1 < len(self.weights):
                h = np.maximum(h, 0)
        return h[:, 1] - h[:, 0] if h.shape[1] == 2 else h[:, 0]

    def predict_proba(self, x: np.ndarray) -> np.ndarray:
        """Probability that the device is slow for each row of raw features."""
        return 1.0 / (1.0 + np.exp(-np.clip(self.logits(x), -60, 60)))

    def to_bytes(self) -> bytes:
        """The weight file (``docs/formats/io-model.md``)."""
        dims = self.dims
        out = bytearray(MAGIC)
        out += struct.pack("<HHHH", VERSION, self.kind, self.joint, len(self.weights))
        out += struct.pack(f"<{len(dims)}I", *dims)
        sc = np.stack([self.scale_min, self.scale_max], axis=1).astype("<f4")
        out += sc.tobytes()
        for w, b in zip(self.weights, self.biases):
            out += np.asarray(w, dtype="<f4").tobytes() + np.asarray(b, dtype="<f4").tobytes()
        out += struct.pack("<f", self.threshold)
        out += struct.pack("<I", crc32c(bytes(out)))
        return bytes(out)

    def save(self, path: str | bytes | os.PathLike) -> None:
        """Writes the weight file (atomically: a temporary file, then a rename); ``path`` is a
        ``str``, ``bytes`` or ``os.PathLike``."""
        p = check_path(path, "a model path")
        tmp = p.with_name(p.name + ".tmp")
        try:
            tmp.write_bytes(self.to_bytes())
            tmp.replace(p)
        except OSError as e:
            where = e.filename or p
            raise StorageIOError(
                f"cannot write model {p} ({where}: {e.strerror or e}; the model is written to a "
                "temporary file beside it, then renamed over it)",
                str(p),
            ) from e


def load_model(path: str | bytes | os.PathLike) -> Mlp:
    """Reads and checks an admission model's weight file (Heimdall's, kind 1 or 4, or LinnOS's,
    kind 2). A damaged or truncated one raises :class:`attune.CorruptionError` naming the file
    and the byte; a model of another kind (TinFetch's, kind 3: load it with
    :func:`attune.io.prefetch.load_model`) :class:`attune.InvalidArgumentError`."""
    p = check_path(path, "a model path")
    try:
        data = p.read_bytes()
    except OSError as e:
        raise StorageIOError(f"cannot read model {p}: {e.strerror or e}", str(p)) from e
    try:
        m = model_from_bytes(data)
    except Error as e:
        raise type(e)(f"{p}: {e}", str(p), e.offset) from e
    if m.kind not in ADMISSION_KINDS:
        raise InvalidArgumentError(
            f"{p} is a {KIND_NAMES.get(m.kind, 'unknown')} model (kind {m.kind}), not an "
            f"admission model (Heimdall kind {KIND_HEIMDALL} or {KIND_HEIMDALL_LIVE}, LinnOS "
            f"kind {KIND_LINNOS})",
            str(p),
        )
    return m


def model_from_bytes(data: bytes) -> Mlp:
    """Decodes a weight file after the Rust decoder checked it (magic, version, sizes, CRC)."""
    info = _native.io_model_info(data)
    dims = list(info["dims"])
    pos = 16 + 4 * len(dims)
    sc = np.frombuffer(data, dtype="<f4", count=2 * dims[0], offset=pos).reshape(-1, 2)
    pos += 8 * dims[0]
    weights, biases = [], []
    for i, o in itertools.pairwise(dims):
        weights.append(np.frombuffer(data, "<f4", i * o, pos).reshape(o, i).astype(np.float32))
        pos += 4 * i * o
        biases.append(np.frombuffer(data, "<f4", o, pos).astype(np.float32))
        pos += 4 * o
    kind = {
        "heimdall": KIND_HEIMDALL,
        "heimdall-live": KIND_HEIMDALL_LIVE,
        "linnos": KIND_LINNOS,
        "tinfetch": KIND_TINFETCH,
    }[info["kind"]]
    return Mlp(
        weights,
        biases,
        sc[:, 0].copy(),
        sc[:, 1].copy(),
        kind,
        int(info["joint"]),
        float(info["threshold"]),
    )


def _adam_train(
    x: np.ndarray,
    y: np.ndarray,
    dims: list[int],
    *,
    epochs: int,
    lr: float,
    batch: int,
    seed: int,
    two_outputs: bool,
) -> tuple[list, list, list[float]]:
    rng = np.random.default_rng(seed)
    ws = [
        rng.normal(0, np.sqrt(2.0 / i), (o, i)).astype(np.float32)
        for i, o in itertools.pairwise(dims)
    ]
    bs = [np.zeros(o, dtype=np.float32) for o in dims[1:]]
    m = [np.zeros_like(p) for p in ws + bs]
    v = [np.zeros_like(p) for p in ws + bs]
    b1, b2, eps, step = 0.9, 0.999, 1e-8, 0
    n = len(x)
    losses = []
    for _ in range(epochs):
        order = rng.permutation(n)
        total = 0.0
        for k in range(0, n, batch):
            idx = order[k : k + batch]
            xb, yb = x[idx], y[idx].astype(np.float32)
            acts = [xb]
            h = xb
            for i, (w, b) in enumerate(zip(ws, bs)):
                h = h @ w.T + b
                if i + 1 < len(ws):
                    h = np.maximum(h, 0)
                acts.append(h)
            if two_outputs:
                z = h - h.max(axis=1, keepdims=True)
                p = np.exp(z) / np.exp(z).sum(axis=1, keepdims=True)
                onehot = np.stack([1 - yb, yb], axis=1)
                total += float(-(onehot * np.log(p + 1e-9)).sum())
                grad = (p - onehot) / len(idx)
            else:
                p = 1 / (1 + np.exp(-np.clip(h[:, 0], -60, 60)))
                total += float(-(yb * np.log(p + 1e-9) + (1 - yb) * np.log(1 - p + 1e-9)).sum())
                grad = ((p - yb) / len(idx))[:, None]
            gws, gbs = [None] * len(ws), [None] * len(ws)
            for i in range(len(ws) - 1, -1, -1):
                gws[i] = grad.T @ acts[i]
                gbs[i] = grad.sum(axis=0)
                if i > 0:
                    grad = (grad @ ws[i]) * (acts[i] > 0)
            step += 1
            for j, (p_, g) in enumerate(zip(ws + bs, gws + gbs)):
                m[j] = b1 * m[j] + (1 - b1) * g
                v[j] = b2 * v[j] + (1 - b2) * g * g
                mh = m[j] / (1 - b1**step)
                vh = v[j] / (1 - b2**step)
                p_ -= (lr * mh / (np.sqrt(vh) + eps)).astype(np.float32)
        losses.append(total / max(n, 1))
    return ws, bs, losses


def best_f1_threshold(p: np.ndarray, y: np.ndarray) -> float:
    """The probability threshold with the highest F1 on (p, y); 0.5 without positives."""
    if y.sum() == 0 or len(y) == 0:
        return 0.5
    best = (0.0, 0.5)
    for t in np.unique(np.round(np.quantile(p, np.linspace(0.5, 0.995, 60)), 6)):
        pred = p > t
        tp = float((pred & (y == 1)).sum())
        fp = float((pred & (y == 0)).sum())
        fn = float((~pred & (y == 1)).sum())
        f1 = 2 * tp / max(2 * tp + fp + fn, 1.0)
        if f1 > best[0]:
            best = (f1, float(t))
    return float(np.clip(best[1], 1e-4, 1 - 1e-4))


def train_mlp(
    x: np.ndarray,
    y: np.ndarray,
    *,
    hidden: tuple[int, ...] = (128, 16),
    kind: int = KIND_HEIMDALL,
    joint: int = 1,
    epochs: int = 20,
    lr: float = 1e-3,
    batch: int = 256,
    seed: int = 0,
    two_outputs: bool = False,
    scale_range: tuple[np.ndarray, np.ndarray] | None = None,
) -> Mlp:
    """Trains a network on raw features ``x`` (min-max scaled internally) and labels ``y``."""
    if len(x) == 0:
        raise InvalidArgumentError("no training rows (the trace has no reads?)")
    x = np.asarray(x, dtype=np.float32)
    lo, hi = scale_range if scale_range is not None else (x.min(axis=0), x.max(axis=0))
    model = Mlp([], [], lo.astype(np.float32), hi.astype(np.float32), kind, joint)
    xs = model.scale(x)
    dims = [x.shape[1], *hidden, 2 if two_outputs else 1]
    ws, bs, losses = _adam_train(
        xs,
        np.asarray(y),
        dims,
        epochs=epochs,
        lr=lr,
        batch=batch,
        seed=seed,
        two_outputs=two_outputs,
    )
    model.weights, model.biases, model.history = ws, bs, losses
    model.threshold = best_f1_threshold(model.predict_proba(x), np.asarray(y))
    return model


# ---------------------------------------------------------------- the whole pipeline
@dataclass(frozen=True)
class Pipeline:
    """Which stages run (every adaptive part can be switched off, for the accuracy ladder)."""

    labelling: str = "period"  # "period" | "cutoff"
    features: str = "full"  # "full" | "basic" | "live"
    noise_filter: bool = True
    joint: int = 1
    rule: LabelRule = field(default_factory=LabelRule)
    epochs: int = 20
    seed: int = 0

    def __post_init__(self) -> None:
        if self.labelling not in ("period", "cutoff"):
            raise InvalidArgumentError(
                f"labelling must be 'period' or 'cutoff', not {self.labelling!r}"
            )
        if self.features not in ("full", "basic", "live"):
            raise InvalidArgumentError(
                f"features must be 'full', 'basic' or 'live', not {self.features!r}"
            )
        for name, lo, hi in (("joint", 1, 9), ("epochs", 1, EPOCHS_MAX), ("seed", 0, 2**64 - 1)):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or not lo <= v <= hi:
                raise InvalidArgumentError(f"{name} must be an integer in {lo}..{hi}, got {v!r}")
        self.rule.check()


#: The pipeline with every stage on.
DEFAULT_PIPELINE = Pipeline()


def read_rows(replay: dict, trace) -> dict:
    """The read rows of a replay: raw features, latency, size, ground-truth busy flag.
    ``replay`` is :func:`attune.io.replay`'s result for ``trace`` (another trace, or a dict
    that is not a replay: :class:`attune.InvalidArgumentError`)."""
    trace = check_trace(trace)
    keys = ("features", "live", "latency_ns", "gc_pages")
    missing = [k for k in keys if k not in replay] if isinstance(replay, dict) else []
    if not isinstance(replay, dict) or missing:
        raise InvalidArgumentError(
            "read_rows: replay must be attune.io.replay()'s result "
            f"(missing {', '.join(missing) or 'everything'})"
        )
    if len(replay["latency_ns"]) != len(trace):
        raise InvalidArgumentError(
            f"read_rows: the replay served {len(replay['latency_ns'])} I/Os but trace "
            f"{trace.name!r} holds {len(trace)}: pass the trace that was replayed"
        )
    feats = np.frombuffer(replay["features"], dtype="<f4").reshape(-1, 11)
    live = np.frombuffer(replay["live"], dtype="<f4").reshape(-1, len(LIVE_NAMES))
    reads = np.asarray(trace.is_read, dtype=bool)
    return {
        "features": feats[reads].astype(np.float32),
        "live": live[reads].astype(np.float32),
        "latency_ns": np.asarray(replay["latency_ns"], dtype=np.float64)[reads],
        "size": np.asarray(trace.size, dtype=np.float64)[reads],
        "busy": (np.asarray(replay["gc_pages"]) > 0)[reads].astype(np.int8),
    }


#: The columns of :func:`read_rows`.
ROW_KEYS = ("features", "live", "latency_ns", "size", "busy")


def check_rows(rows: object) -> dict:
    """``rows`` if it is :func:`read_rows`'s result (a dict of its columns, one length), else
    :class:`attune.InvalidArgumentError` naming what is missing."""
    if not isinstance(rows, dict):
        raise InvalidArgumentError(
            f"rows must be read_rows()'s dict of columns, not {type(rows).__name__}"
        )
    missing = [k for k in ROW_KEYS if k not in rows]
    if missing:
        raise InvalidArgumentError(
            f"rows lack {', '.join(missing)}: pass read_rows(replay(trace), trace)"
        )
    lengths = {k: len(rows[k]) for k in ROW_KEYS}
    if len(set(lengths.values())) > 1:
        raise InvalidArgumentError(f"rows' columns differ in length: {lengths}")
    return rows


def make_labels(rows: dict, p: Pipeline) -> np.ndarray:
    if p.labelling == "period":
        return label_periods(rows["size"], rows["latency_ns"], p.rule)
    if p.labelling == "cutoff":
        return label_cutoff(rows["latency_ns"])
    raise InvalidArgumentError(f"labelling must be 'period' or 'cutoff', not {p.labelling!r}")


def check_two_classes(labels: np.ndarray, where: str = "the training reads") -> None:
    """Raises :class:`attune.InvalidArgumentError` when ``labels`` are all one class: a model
    trained on them can only say one thing, so a user asking for one gets told why and what
    to do instead."""
    y = np.asarray(labels)
    if len(y) and y.min() != y.max():
        return
    if len(y) == 0:
        raise InvalidArgumentError(f"no training rows: {where} hold no reads")
    what = "slow" if y[0] else "fast"
    raise InvalidArgumentError(
        f"the labels of {where} are one class (all {len(y)} {what}): there is nothing to learn. "
        "Train on a device with garbage collection busy periods (e.g. --device device-gc, or "
        "more writes), on windows with busy reads (--min-busy 0.02 on eval), or on a longer "
        "trace"
    )


def train(
    rows: dict,
    p: Pipeline = DEFAULT_PIPELINE,
    labels: np.ndarray | None = None,
    *,
    allow_one_class: bool = False,
) -> Mlp:
    """Labels, filters and trains on the read rows of a replay (``labels``, when given, replace
    the pipeline's labelling: e.g. per-window labels of pooled rows). Labels that are all one
    class after the noise filters (a trace with no slow period) raise
    :class:`attune.InvalidArgumentError` (:func:`check_two_classes`), unless
    ``allow_one_class``: the evaluation's per-window models, where a window without busy
    periods gets a model that admits every read (threshold 0.5)."""
    check_rows(rows)
    labels = make_labels(rows, p) if labels is None else np.asarray(labels, dtype=np.int8)
    feats = rows["features"]
    kind = KIND_HEIMDALL
    if p.features == "basic":
        feats = basic_features(feats)
    elif p.features == "live":
        feats = live_features(rows)
        kind = KIND_HEIMDALL_LIVE
    elif p.features != "full":
        raise InvalidArgumentError(
            f"features must be 'full', 'basic' or 'live', not {p.features!r}"
        )
    if p.noise_filter:
        keep = noise_filter(rows["size"], rows["latency_ns"], labels, p.rule)
        feats, labels = feats[keep], labels[keep]
    x, y = joint_features(feats, labels, p.joint)
    if not allow_one_class:
        check_two_classes(y, "the training reads (after the noise filters)")
    return train_mlp(x, y, kind=kind, joint=p.joint, epochs=p.epochs, seed=p.seed)


def live_features(rows: dict) -> np.ndarray:
    """Heimdall's 11 features followed by the 3 live ones (a ``HeimdallLive`` model's inputs)."""
    if "live" not in rows:
        raise InvalidArgumentError("these read rows have no live features (an old replay?)")
    return np.concatenate([rows["features"], rows["live"]], axis=1).astype(np.float32)


def train_linnos(
    rows: dict, *, epochs: int = 20, seed: int = 0, allow_one_class: bool = False
) -> Mlp:
    """LinnOS: cutoff labels, 31 digitised inputs, 31→256→2 (one-class labels: as
    :func:`train`)."""
    Pipeline(epochs=epochs, seed=seed)  # the same range checks
    y = label_cutoff(rows["latency_ns"])
    if not allow_one_class:
        check_two_classes(y, "the training reads (LinnOS's p90 cutoff)")
    x = linnos_digits(rows["features"])
    lo = np.zeros(31, dtype=np.float32)
    hi = np.full(31, 9.0, dtype=np.float32)
    return train_mlp(
        x,
        y,
        hidden=(256,),
        kind=KIND_LINNOS,
        epochs=epochs,
        seed=seed,
        two_outputs=True,
        scale_range=(lo, hi),
    )


#: The labelling rules :func:`choose_rule` tries: latency × thresholds of the median.
RULE_GRID = tuple(
    LabelRule(lat_factor=lf, thpt_factor=tf, drop_factor=1.5)
    for lf in (1.25, 1.5, 2.0, 3.0)
    for tf in (1.25, 1.5, 2.0)
)
#: Share of the slow label :func:`choose_rule` accepts (a rule labelling almost nothing or
#: almost everything slow is degenerate).
RULE_SLOW_RANGE = (0.02, 0.5)


def choose_rule(
    rows: dict,
    grid: tuple[LabelRule, ...] = RULE_GRID,
    *,
    epochs: int = 10,
    seed: int = 0,
) -> tuple[LabelRule, float]:
    """The labelling rule whose labels the model predicts best, chosen on training data only.

    The training rows are split by time 2:1; for each rule the first part is labelled, filtered
    and trained on, the second part is labelled against the first part's medians, and the rule
    scores the ROC-AUC of the model on it. Rules whose slow share on the first part falls outside
    :data:`RULE_SLOW_RANGE` are skipped. Returns (rule, validation AUC); the default rule and NaN
    when no rule qualifies. This replaces the chapter's unspecified gradient search with a grid
    search that is reproducible and never sees held-out data.
    """
    n = len(rows["size"])
    cut = (2 * n) // 3
    fit = {k: v[:cut] for k, v in rows.items()}
    val = {k: v[cut:] for k, v in rows.items()}
    ref = label_medians(fit["size"], fit["latency_ns"])
    best: tuple[float, LabelRule] = (float("nan"), LabelRule())
    for rule in grid:
        y = label_periods(fit["size"], fit["latency_ns"], rule)
        if not RULE_SLOW_RANGE[0] <= y.mean() <= RULE_SLOW_RANGE[1]:
            continue
        yv = label_periods(val["size"], val["latency_ns"], rule, reference=ref)
        if yv.min() == yv.max():
            continue
        m = train(fit, Pipeline(rule=rule, epochs=epochs, seed=seed), allow_one_class=True)
        auc = roc_auc(yv, m.predict_proba(val["features"]))
        if not np.isnan(auc) and (np.isnan(best[0]) or auc > best[0]):
            best = (auc, rule)
    return best[1], best[0]


def concat_rows(parts: list[dict]) -> dict:
    """Read rows of several replays on the same kind of device, one after the other (a device
    model trained on many windows). Labels are computed per part, so the parts' time order
    matters only within each part."""
    return {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}


def model_inputs(model: Mlp, rows: dict, basic: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """(raw inputs, joint-grouping index) a model takes for the read rows."""
    feats = rows["features"]
    if model.kind == KIND_LINNOS:
        return linnos_digits(feats), np.arange(len(feats))
    if model.kind == KIND_HEIMDALL_LIVE:
        feats = live_features(rows)
    elif basic:
        feats = basic_features(feats)
    x, _ = joint_features(feats, np.zeros(len(feats), dtype=np.int8), model.joint)
    return x, np.arange(len(x))


def roc_auc(y: np.ndarray, score: np.ndarray) -> float:
    """ROC-AUC by the rank statistic (ties averaged) of labels ``y`` (0/1) and scores of the
    same length (else :class:`attune.InvalidArgumentError`). When ``y`` holds one class only
    (or nothing) the AUC is undefined and the result is NaN, not an error: an evaluation window
    without a slow read has no AUC, and medians over windows skip it."""
    if np.ndim(y) != 1 or np.ndim(score) != 1 or len(y) != len(score):
        raise InvalidArgumentError(
            f"roc_auc: labels and scores must be 1-D of the same length, got shapes "
            f"{np.shape(y)} and {np.shape(score)}"
        )
    try:
        yv = np.asarray(y, dtype=np.float64)
        score = np.asarray(score, dtype=np.float64)
    except (TypeError, ValueError):
        raise InvalidArgumentError("roc_auc: labels and scores must be numbers") from None
    bad = ~np.isin(yv, (0.0, 1.0))
    if bad.any():
        i = int(np.argmax(bad))
        raise InvalidArgumentError(f"roc_auc: labels must be 0 or 1, got {y[i]!r} at index {i}")
    if np.isnan(score).any():
        i = int(np.argmax(np.isnan(score)))
        raise InvalidArgumentError(f"roc_auc: scores must not be NaN (index {i})")
    y = yv.astype(bool)
    pos, neg = int(y.sum()), int((~y).sum())
    if pos == 0 or neg == 0:
        return float("nan")
    order = np.argsort(score, kind="mergesort")
    s = np.asarray(score)[order]
    ranks = np.empty(len(s), dtype=np.float64)
    i = 0
    while i < len(s):
        j = i
        while j + 1 < len(s) and s[j + 1] == s[i]:
            j += 1
        ranks[order[i : j + 1]] = (i + j) / 2 + 1
        i = j + 1
    return float((ranks[y].sum() - pos * (pos + 1) / 2) / (pos * neg))


def quantised_scores(model_bytes: bytes, x: np.ndarray) -> np.ndarray:
    """The Rust quantised model's slow probabilities for raw inputs ``x`` (a 2-D array of
    finite numbers, one row per decision, as many columns as the model has inputs: e.g.
    :func:`model_inputs` or :func:`read_rows`' ``features``). ``model_bytes`` is an admission
    model's weight file (:meth:`Mlp.to_bytes`). Anything else raises
    :class:`attune.InvalidArgumentError` (a damaged file :class:`attune.CorruptionError`)."""
    if not isinstance(model_bytes, (bytes, bytearray, memoryview)):
        raise InvalidArgumentError(
            f"model_bytes must be a weight file's bytes (Mlp.to_bytes()), not "
            f"{type(model_bytes).__name__}"
        )
    info = _native.io_model_info(bytes(model_bytes))
    if info["kind"] == "tinfetch":
        raise InvalidArgumentError(
            "model_bytes is a TinFetch model (kind 3), not an admission model (Heimdall or LinnOS)"
        )
    inputs = int(info["dims"][0])
    if isinstance(x, (bytes, bytearray, memoryview, str)):
        raise InvalidArgumentError(
            "x must be a 2-D array of numbers, not bytes (replay()'s features are bytes: "
            "use read_rows(replay, trace)['features'])"
        )
    try:
        x = np.ascontiguousarray(x, dtype="<f4")
    except (TypeError, ValueError):
        raise InvalidArgumentError("x must be a 2-D array of numbers") from None
    if x.ndim != 2 or x.shape[1] != inputs:
        raise InvalidArgumentError(
            f"x must have shape (rows, {inputs}) for this model, got {x.shape}"
        )
    if not np.isfinite(x).all():
        i = int(np.argmax(~np.isfinite(x).all(axis=1)))
        raise InvalidArgumentError(f"x holds a value that is not finite (row {i})")
    return np.asarray(_native.io_model_scores(model_bytes, x.tobytes(), len(x)))


# ---------------------------------------------------------------- the write clock
#: The grid :func:`fit_write_clock` searches: the flush size (bytes written that make the device
#: flush), the number of flushes between garbage collections, the delay from the write that
#: completes the count to the busy period (µs) and the busy period's length (µs).
CLOCK_FLUSH_BYTES = tuple(m << 20 for m in (1, 2, 4, 8))
CLOCK_FLUSHES_PER_GC = tuple(range(1, 9))
CLOCK_DELAY_US = (0.0, 2500.0, 5000.0, 10000.0)
CLOCK_BUSY_US = (25_000.0, 50_000.0, 100_000.0, 200_000.0)


def _f1(flags: np.ndarray, labels: np.ndarray) -> float:
    tp = float(np.sum(flags & labels))
    fp = float(np.sum(flags & ~labels))
    fn = float(np.sum(~flags & labels))
    return 2 * tp / (2 * tp + fp + fn) if tp > 0 else 0.0


def fit_write_clock(
    halves: list, labels: list[np.ndarray]
) -> tuple[tuple[int, int, float, float] | None, float]:
    """The write clock ``(flush_bytes, gc_every_bytes, delay_us, busy_us)`` that best predicts
    the slow periods of training data, and its F1.

    ``halves`` are traces each served alone by a fresh device of the kind (the training halves)
    and ``labels`` the period labels of their reads (:func:`label_periods`). Only what a host
    sees is used: the writes it sent (times and sizes) and the labels of the reads' latencies.
    Every point of the grid (:data:`CLOCK_FLUSH_BYTES` × :data:`CLOCK_FLUSHES_PER_GC` ×
    :data:`CLOCK_DELAY_US` × :data:`CLOCK_BUSY_US`, 512 clocks) predicts busy or not for every
    read (``attune_io::clock``, the code the router runs); the highest F1 over the pooled reads
    wins (ties: the first in grid order). ``(None, 0.0)`` when no clock predicts a single slow
    read (no writes, or no slow periods)."""
    if len(halves) != len(labels):
        raise InvalidArgumentError(
            f"fit_write_clock: {len(halves)} traces but {len(labels)} label arrays"
        )
    cols = [h.columns() for h in halves]
    reads = [np.asarray(h.is_read, dtype=bool) for h in halves]
    for i, (r, y) in enumerate(zip(reads, labels)):
        if int(r.sum()) != len(y):
            raise InvalidArgumentError(
                f"fit_write_clock: trace {i} has {int(r.sum())} reads but {len(y)} labels"
            )
    y_all = np.concatenate([np.asarray(y, dtype=bool) for y in labels]) if labels else None
    best: tuple[tuple[int, int, float, float] | None, float] = (None, 0.0)
    if y_all is None or not y_all.any():
        return best
    for flush, k, delay, busy in itertools.product(
        CLOCK_FLUSH_BYTES, CLOCK_FLUSHES_PER_GC, CLOCK_DELAY_US, CLOCK_BUSY_US
    ):
        clock = (flush, flush * k, delay, busy)
        flags = np.concatenate(
            [
                np.asarray(_native.io_write_clock_flags(c, clock), dtype=bool)[r]
                for c, r in zip(cols, reads)
            ]
        )
        f = _f1(flags, y_all)
        if f > best[1]:
            best = (clock, f)
    return best

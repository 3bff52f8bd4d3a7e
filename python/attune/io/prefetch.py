"""TinFetch: training its tiny suffix network, the LSTM delta baseline, and evaluation.

* :func:`evaluate`: every method's metrics on one trace (the Rust evaluator of
  ``attune_io::prefetch``: unlimited cache of prefetched 4 KiB blocks, a 20 ms pending queue).
* :func:`samples`: TinFetch's training rows (10 inputs from a stream's last suffixes → the step
  to its next suffix), computed by the same Rust stream table the prefetcher uses.
* :func:`synthetic_sequences`: noisy synthetic suffix sequences (strides, alternating deltas,
  backwards runs, jitter and outliers), the chapter's synthetic training data.
* :func:`train`: the 10→128→16→1 ReLU network, normal initialisation, Adam, mean absolute error,
  in numpy; saved as an ``ATIOMLP1`` weight file of input kind 3 (``docs/formats/io-model.md``).
* :class:`DeltaLstm`: the learned sequence baseline (a small LSTM over the most frequent block
  deltas, like Delta-LSTM/SGDP's delta vocabulary), trained on the first half of a trace and
  predicting the second.

Design note: ``docs/tinfetch.md``.
"""

from __future__ import annotations

import itertools
import math
import numbers
import os
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from attune import _native
from attune.errors import Error, InvalidArgumentError, StorageIOError
from attune.io.heimdall import Mlp
from attune.io.trace import Trace

#: Weight-file input kind of a TinFetch model.
KIND_TINFETCH = 3
#: Suffixes per 8 MiB prefix (1 KiB units).
SUFFIXES = 8192
#: Network inputs (from the stream's last suffixes).
HISTORY = 10
#: Reach of the relative inputs and of the predicted step (suffix units, ±1 MiB).
DELTA_RANGE = 1024.0
#: Heuristic methods and TinFetch's ablations the evaluator knows.
HEURISTICS = ("none", "readahead", "stride", "markov", "leap")
#: The longest synthetic trace :func:`synthetic_trace` makes (``attune_io``'s ``MAX_IOS``).
MAX_SYNTHETIC_IOS = 1 << 27


def _count(name: str, value, lo: int = 0, hi: int | None = None) -> int:
    """``value`` as an int in ``lo..=hi``, or an :class:`InvalidArgumentError` naming ``name``."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise InvalidArgumentError(f"{name} = {value!r}: must be an integer")
    v = int(value)
    if v < lo or (hi is not None and v > hi):
        what = f"in {lo}..={hi}" if hi is not None else f"at least {lo}"
        if lo == 0 and hi is None:
            what = "non-negative"
        raise InvalidArgumentError(f"{name} = {v}: must be {what}")
    return v


def _seed(value) -> int:
    return _count("seed", value, 0, 2**64 - 1)


TINFETCH_VARIANTS = (
    "tinfetch",
    "tinfetch-no-network",
    "tinfetch-no-readahead",
    "tinfetch-static",
    "tinfetch-zero-pad",
    "tinfetch-centered",
    "tinfetch-one-stream",
    "tinfetch-global-depth",
    "tinfetch-depth-4",
    "tinfetch-shared-yield",
)


def evaluate(
    trace: Trace,
    methods: list[str] | tuple[str, ...],
    model: bytes | str | os.PathLike | TrainResult | None = None,
    *,
    measure_from: int = 0,
    delay_ms: float = 20.0,
    reads_only: bool = False,
    predictions: np.ndarray | None = None,
    predictions_name: str = "lstm",
) -> list[dict]:
    """One metrics dict per method (``hit_rate``, ``accuracy``, ``timeliness``,
    ``bandwidth_load``, ``score`` and the block counts), measured from access ``measure_from``.
    ``timeliness`` is ``None`` (not applicable) when no prefetched block was used.

    ``model`` is a TinFetch weight file: its bytes, its path (read with :func:`load_model`) or a
    :class:`TrainResult`. Method names are case-insensitive, as the engine's ``prefetcher``
    option is. ``predictions`` (one byte offset per access, negative = none) adds a predicted
    method. Warm-up prefetches (issued before ``measure_from``) never count as measured hits."""
    if not isinstance(trace, Trace):
        raise InvalidArgumentError(
            f"trace = {type(trace).__name__}: pass an attune.io.Trace (load_trace or parse_trace)"
        )
    if len(trace) == 0:
        raise InvalidArgumentError(f"trace {trace.name or ''} holds no I/Os: nothing to evaluate")
    if isinstance(methods, str) or not all(isinstance(m, str) for m in methods):
        raise InvalidArgumentError(f"methods = {methods!r}: pass a list of method names")
    names = [m.lower() for m in methods]
    data = _model_bytes(model)
    start = _count("measure_from", measure_from)
    preds = None if predictions is None else np.asarray(predictions, dtype=np.int64).tolist()
    return list(
        _native.io_prefetch_eval(
            trace.columns(),
            names,
            data,
            start,
            delay_ms,
            reads_only,
            preds,
            predictions_name,
        )
    )


def samples(trace: Trace, padding: str = "repeat") -> tuple[np.ndarray, np.ndarray]:
    """TinFetch's training rows from ``trace``: inputs ``n × 10`` (:func:`inputs_of`) and the
    steps to the stream's next suffix ``n`` (1 KiB units)."""
    xb, yb = _native.io_prefetch_samples(trace.offset.tolist(), trace.size.tolist(), padding)
    x = np.frombuffer(xb, dtype="<f4").reshape(-1, HISTORY).astype(np.float32)
    y = np.frombuffer(yb, dtype="<f4").astype(np.float32)
    return x, y


def synthetic_trace(kind: str, n: int, jobs: int = 8, seed: int = 0) -> Trace:
    """A synthetic block trace (``seq``, ``stride``, ``random``, ``mixed``; see
    ``attune_io::prefetch::synth``) of ``n`` I/Os (at most :data:`MAX_SYNTHETIC_IOS`)."""
    n = _count("n", n, 0, MAX_SYNTHETIC_IOS)
    jobs = _count("jobs", jobs, 1, 256)
    ts, off, size, read = _native.io_prefetch_synth(kind, n, jobs, _seed(seed))
    return Trace(
        np.asarray(ts, dtype=np.uint64),
        np.asarray(off, dtype=np.uint64),
        np.asarray(size, dtype=np.uint32),
        np.asarray(read, dtype=bool),
        f"synthetic-{kind}-{seed}",
    )


def inputs_of(history: np.ndarray) -> np.ndarray:
    """Network inputs of padded histories (n × 10 suffixes, oldest first): the 9 older
    suffixes relative to the newest, then the newest (as ``attune_io::prefetch::tinfetch``)."""
    h = np.asarray(history, dtype=np.float32)
    out = h - h[:, -1:]
    out[:, -1] = h[:, -1]
    return out


def synthetic_sequences(n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """``n`` noisy synthetic suffix sequences: 10 inputs (:func:`inputs_of`) and the step to the
    next suffix each.

    Patterns: a constant stride (±1..512 units), two alternating deltas, and a stride with a
    repeated element; a quarter of the sequences have every element jittered by up to ±8
    units, and 10 % of the elements are replaced by a random outlier (noise the network must
    ignore); 30 % are short histories (4–9 suffixes) padded by repeating the oldest, as the
    prefetcher pads them. Sequences start anywhere in 0..8192 and are clipped to it."""
    n = _count("n", n, 0, MAX_SYNTHETIC_IOS)
    rng = np.random.default_rng(_seed(seed))
    k = HISTORY + 1
    start = rng.integers(0, SUFFIXES, n)
    d1 = rng.choice([1, 2, 4, 8, 16, 32, 64, 128, 256, 512], n) * rng.choice([1, 1, 1, -1], n)
    kind = rng.integers(0, 3, n)
    d2 = np.where(kind == 1, rng.integers(-64, 65, n), d1)
    steps = np.where(np.arange(k)[None, :] % 2 == 0, d1[:, None], d2[:, None])
    steps[:, 0] = 0
    seq = start[:, None] + np.cumsum(steps, axis=1)
    rep = kind == 2
    seq[rep, 5:] = seq[rep, 4:-1]
    jitter = rng.random(n) < 0.25
    seq[jitter] += rng.integers(-8, 9, (int(jitter.sum()), k))
    outlier = rng.random((n, k - 1)) < 0.1
    seq[:, :-1] = np.where(outlier, rng.integers(0, SUFFIXES, (n, k - 1)), seq[:, :-1])
    seq = np.clip(seq, 0, SUFFIXES - 1).astype(np.float32)
    short = np.flatnonzero(rng.random(n) < 0.3)
    for r, keep in zip(short, rng.integers(4, HISTORY, len(short))):
        seq[r, : HISTORY - keep] = seq[r, HISTORY - keep]
    return inputs_of(seq[:, :HISTORY]), seq[:, HISTORY] - seq[:, HISTORY - 1]


@dataclass
class TrainResult:
    """A trained TinFetch network and its training record."""

    model: Mlp
    rows: int
    loss: list[float] = field(default_factory=list)
    mae_units: float = 0.0

    def to_bytes(self) -> bytes:
        return self.model.to_bytes()

    def save(self, path: str | Path) -> None:
        self.model.save(path)


def train(
    x: np.ndarray,
    y: np.ndarray,
    *,
    epochs: int = 8,
    lr: float = 1e-3,
    batch: int = 256,
    seed: int = 0,
    hidden: tuple[int, int] = (128, 16),
) -> TrainResult:
    """Trains the 10→128→16→1 network on rows of :func:`inputs_of` and steps (1 KiB units) with
    Adam and the mean absolute error; the output is the step ÷ 1024 (clipped to ±1)."""
    epochs = _count("epochs", epochs, 1)
    batch = _count("batch", batch, 1)
    seed = _seed(seed)
    if not (isinstance(lr, numbers.Real) and math.isfinite(lr) and lr > 0):
        raise InvalidArgumentError(f"lr = {lr!r}: must be a positive finite number")
    try:
        x = np.asarray(x, dtype=np.float32)
        y = np.asarray(y, dtype=np.float32)
    except (TypeError, ValueError) as e:
        raise InvalidArgumentError(f"x and y must be numeric arrays: {e}") from e
    if x.ndim != 2 or x.shape[1] != HISTORY or len(x) != len(y) or len(x) == 0:
        raise InvalidArgumentError(f"need n × {HISTORY} inputs and n targets, n > 0")
    for name, a in (("x", x), ("y", y)):
        bad = ~np.isfinite(a)
        if bad.any():
            row = int(np.flatnonzero(bad.reshape(len(a), -1).any(axis=1))[0])
            raise InvalidArgumentError(
                f"{name} holds {int(bad.sum())} non-finite values (NaN or infinity; the first "
                f"in row {row}): training data must be finite"
            )
    lo = np.full(HISTORY, -DELTA_RANGE, dtype=np.float32)
    hi = np.full(HISTORY, DELTA_RANGE, dtype=np.float32)
    lo[-1], hi[-1] = 0.0, SUFFIXES
    model = Mlp([], [], lo, hi, KIND_TINFETCH, 1, 0.5)
    xs = model.scale(x)
    ys = np.clip(y / DELTA_RANGE, -1, 1).astype(np.float32)
    rng = np.random.default_rng(seed)
    dims = [HISTORY, *hidden, 1]
    ws = [
        rng.normal(0, np.sqrt(2.0 / i), (o, i)).astype(np.float32)
        for i, o in itertools.pairwise(dims)
    ]
    bs = [np.zeros(o, dtype=np.float32) for o in dims[1:]]
    params = ws + bs
    m = [np.zeros_like(p) for p in params]
    v = [np.zeros_like(p) for p in params]
    b1, b2, eps, step = 0.9, 0.999, 1e-8, 0
    losses = []
    n = len(xs)
    for _ in range(epochs):
        order = rng.permutation(n)
        total = 0.0
        for k in range(0, n, batch):
            idx = order[k : k + batch]
            acts = [xs[idx]]
            h = acts[0]
            for i, (w, b) in enumerate(zip(ws, bs)):
                h = h @ w.T + b
                if i + 1 < len(ws):
                    h = np.maximum(h, 0)
                acts.append(h)
            err = h[:, 0] - ys[idx]
            total += float(np.abs(err).sum())
            grad = (np.sign(err) / len(idx))[:, None].astype(np.float32)
            gws: list = [None] * len(ws)
            gbs: list = [None] * len(ws)
            for i in range(len(ws) - 1, -1, -1):
                gws[i] = grad.T @ acts[i]
                gbs[i] = grad.sum(axis=0)
                if i > 0:
                    grad = (grad @ ws[i]) * (acts[i] > 0)
            step += 1
            for j, (p_, g) in enumerate(zip(params, gws + gbs)):
                m[j] = b1 * m[j] + (1 - b1) * g
                v[j] = b2 * v[j] + (1 - b2) * g * g
                mh = m[j] / (1 - b1**step)
                vh = v[j] / (1 - b2**step)
                p_ -= (lr * mh / (np.sqrt(vh) + eps)).astype(np.float32)
        losses.append(total / n * DELTA_RANGE)
    if not all(np.isfinite(p).all() for p in params) or not np.isfinite(losses).all():
        raise InvalidArgumentError(
            f"training diverged (non-finite weights) with lr = {lr}: lower lr; nothing to save"
        )
    model.weights, model.biases, model.history = ws, bs, losses
    mae = float(np.abs(model.logits(x) * DELTA_RANGE - y).mean())
    return TrainResult(model, n, losses, mae)


def training_set(
    traces: list[Trace], synthetic: int = 100_000, seed: int = 0, padding: str = "repeat"
) -> tuple[np.ndarray, np.ndarray]:
    """Rows from ``traces`` (all of each: pass the training halves) plus ``synthetic`` noisy
    synthetic rows."""
    synthetic = _count("synthetic", synthetic)
    seed = _seed(seed)
    xs, ys = [], []
    for t in traces:
        x, y = samples(t, padding)
        xs.append(x)
        ys.append(y)
    if synthetic > 0:
        x, y = synthetic_sequences(synthetic, seed)
        xs.append(x)
        ys.append(y)
    if not xs:
        raise InvalidArgumentError("no training data: give traces or synthetic rows")
    return np.concatenate(xs), np.concatenate(ys)


def predict(model: bytes, x: np.ndarray) -> np.ndarray:
    """The Rust integer inference's predicted suffixes for rows ``x`` (n × 10)."""
    x = np.ascontiguousarray(x, dtype="<f4")
    return np.asarray(_native.io_prefetch_predict(model, x.tobytes(), len(x)), dtype=np.int64)


def load_model(path: str | Path) -> bytes:
    """Reads and checks a TinFetch weight file. Every error names the path, as
    ``attune.DB(prefetch_model=...)`` reports it: a missing file raises
    :class:`attune.InvalidArgumentError` (the caller named it), an existing one that cannot be
    read :class:`attune.StorageIOError`, a damaged one :class:`attune.CorruptionError` (with the
    byte offset), a newer version :class:`attune.UnsupportedVersionError`, another kind of model
    (Heimdall's) :class:`attune.InvalidArgumentError`."""
    p = Path(path)
    try:
        data = p.read_bytes()
    except FileNotFoundError as e:
        raise InvalidArgumentError(f"model {p}: no such file", str(p)) from e
    except OSError as e:
        raise StorageIOError(f"cannot read model {p}: {e.strerror or e}", str(p)) from e
    try:
        info = _native.io_model_info(data)
    except Error as e:
        raise type(e)(f"{p}: {e}", str(p), e.offset) from e
    if info["kind"] != "tinfetch":
        raise InvalidArgumentError(
            f"{p} is a {info['kind']} model, not a TinFetch one (input kind {KIND_TINFETCH})",
            str(p),
        )
    return data


def _model_bytes(model) -> bytes | None:
    """What :func:`evaluate` takes as ``model``, as weight-file bytes."""
    if model is None or isinstance(model, bytes):
        return model
    if isinstance(model, (bytearray, memoryview)):
        return bytes(model)
    if isinstance(model, TrainResult):
        return model.to_bytes()
    if isinstance(model, (str, os.PathLike)):
        return load_model(model)
    raise InvalidArgumentError(
        f"model = {type(model).__name__}: pass a weight file's path, its bytes or a TrainResult"
    )


# ---------------------------------------------------------------- the LSTM delta baseline
class DeltaLstm:
    """A small LSTM over block deltas (classes: the ``vocab - 1`` most frequent deltas of the
    training half, plus "other"), trained by truncated backpropagation through ``seq`` steps.
    After each access it predicts the most likely known delta (as Delta-LSTM, it always
    predicts); the prefetch goes 128 KB from the predicted block."""

    def __init__(self, vocab: int = 64, hidden: int = 32, seq: int = 8, seed: int = 0):
        if not (2 <= vocab <= 4096 and 1 <= hidden <= 512 and 1 <= seq <= 64):
            raise InvalidArgumentError("vocab 2..4096, hidden 1..512, seq 1..64")
        self.vocab, self.hidden, self.seq = vocab, hidden, seq
        rng = np.random.default_rng(seed)
        self.rng = rng
        h, v = hidden, vocab
        self.emb = rng.normal(0, 0.1, (v, h)).astype(np.float32)
        self.w = rng.normal(0, 1 / np.sqrt(2 * h), (2 * h, 4 * h)).astype(np.float32)
        self.b = np.zeros(4 * h, dtype=np.float32)
        self.b[h : 2 * h] = 1.0  # forget-gate bias
        self.wo = rng.normal(0, 1 / np.sqrt(h), (h, v)).astype(np.float32)
        self.bo = np.zeros(v, dtype=np.float32)
        self.deltas = np.zeros(0, dtype=np.int64)

    def _classes(self, d: np.ndarray) -> np.ndarray:
        lut = {int(x): i for i, x in enumerate(self.deltas)}
        other = self.vocab - 1
        return np.array([lut.get(int(x), other) for x in d], dtype=np.int64)

    def _step(self, x, h, c):
        z = np.concatenate([x, h], axis=1) @ self.w + self.b
        n = self.hidden
        i = 1 / (1 + np.exp(-z[:, :n]))
        f = 1 / (1 + np.exp(-z[:, n : 2 * n]))
        o = 1 / (1 + np.exp(-z[:, 2 * n : 3 * n]))
        g = np.tanh(z[:, 3 * n :])
        c2 = f * c + i * g
        h2 = o * np.tanh(c2)
        return h2, c2, (x, h, c, i, f, o, g, c2)

    def fit(self, blocks: np.ndarray, epochs: int = 3, lr: float = 5e-3, batch: int = 64):
        """Trains on a block sequence (start blocks of the training half)."""
        d = np.diff(np.asarray(blocks, dtype=np.int64))
        if len(d) <= self.seq:
            raise InvalidArgumentError("training half too short for the LSTM")
        vals, counts = np.unique(d, return_counts=True)
        self.deltas = vals[np.argsort(-counts, kind="stable")][: self.vocab - 1]
        cls = self._classes(d)
        s = self.seq
        starts = np.arange(0, len(cls) - s - 1)
        params = [self.emb, self.w, self.b, self.wo, self.bo]
        m = [np.zeros_like(p) for p in params]
        v = [np.zeros_like(p) for p in params]
        step = 0
        n = self.hidden
        for _ in range(epochs):
            order = self.rng.permutation(starts)[:8_000]
            for k in range(0, len(order), batch):
                idx = order[k : k + batch]
                bsz = len(idx)
                h = np.zeros((bsz, n), np.float32)
                c = np.zeros((bsz, n), np.float32)
                caches = []
                for t in range(s):
                    x = self.emb[cls[idx + t]]
                    h, c, cache = self._step(x, h, c)
                    caches.append(cache)
                logits = h @ self.wo + self.bo
                p = np.exp(logits - logits.max(axis=1, keepdims=True))
                p /= p.sum(axis=1, keepdims=True)
                target = cls[idx + s]
                dlog = p
                dlog[np.arange(bsz), target] -= 1
                dlog /= bsz
                g_wo = h.T @ dlog
                g_bo = dlog.sum(axis=0)
                dh = dlog @ self.wo.T
                dc = np.zeros_like(dh)
                g_w = np.zeros_like(self.w)
                g_b = np.zeros_like(self.b)
                g_emb = np.zeros_like(self.emb)
                for t in range(s - 1, -1, -1):
                    x, hp, cp, i, f, o, g, c2 = caches[t]
                    tc = np.tanh(c2)
                    do = dh * tc
                    dc = dc + dh * o * (1 - tc * tc)
                    di, df, dg = dc * g, dc * cp, dc * i
                    dz = np.concatenate(
                        [di * i * (1 - i), df * f * (1 - f), do * o * (1 - o), dg * (1 - g * g)],
                        axis=1,
                    )
                    xin = np.concatenate([x, hp], axis=1)
                    g_w += xin.T @ dz
                    g_b += dz.sum(axis=0)
                    dx = dz @ self.w.T
                    np.add.at(g_emb, cls[idx + t], dx[:, : x.shape[1]])
                    dh = dx[:, x.shape[1] :]
                    dc = dc * f
                step += 1
                for j, (p_, gr) in enumerate(zip(params, [g_emb, g_w, g_b, g_wo, g_bo])):
                    gr = np.clip(gr, -1, 1)
                    m[j] = 0.9 * m[j] + 0.1 * gr
                    v[j] = 0.999 * v[j] + 0.001 * gr * gr
                    p_ -= (
                        lr * (m[j] / (1 - 0.9**step)) / (np.sqrt(v[j] / (1 - 0.999**step)) + 1e-8)
                    ).astype(np.float32)
        return self

    def predict_next(self, blocks: np.ndarray) -> np.ndarray:
        """For every access ``i`` the predicted next start block (−1: no prediction); runs the
        LSTM over the whole sequence (state carried from the start)."""
        blocks = np.asarray(blocks, dtype=np.int64)
        out = np.full(len(blocks), -1, dtype=np.int64)
        if len(blocks) < 2:
            return out
        cls = self._classes(np.diff(blocks))
        h = np.zeros((1, self.hidden), np.float32)
        c = np.zeros((1, self.hidden), np.float32)
        other = self.vocab - 1
        for t, k in enumerate(cls):
            h, c, _ = self._step(self.emb[k][None, :], h, c)
            logits = (h @ self.wo + self.bo)[0, : len(self.deltas)]
            best = int(np.argmax(logits)) if len(logits) else other
            if best != other and best < len(self.deltas):
                nxt = blocks[t + 1] + int(self.deltas[best])
                if nxt >= 0:
                    out[t + 1] = nxt
        return out


def lstm_predictions(trace: Trace, *, seed: int = 0, epochs: int = 2) -> np.ndarray:
    """The LSTM baseline's prefetch offsets (bytes, −1 = none) for every access of ``trace``,
    trained on its first half (the 50:50 split: measure from ``len(trace) // 2``)."""
    epochs = _count("epochs", epochs, 1)
    blocks = (trace.offset // 4096).astype(np.int64)
    half = len(blocks) // 2
    if half <= 8 + 1:
        raise InvalidArgumentError(
            f"trace {trace.name or ''} has {len(blocks)} I/Os: the LSTM baseline needs at least "
            f"20 (it trains on the first half)"
        )
    net = DeltaLstm(seed=_seed(seed)).fit(blocks[:half], epochs=epochs)
    nxt = net.predict_next(blocks)
    return np.where(nxt >= 0, nxt * 4096, -1)

"""A small DLRM-style click model in numpy, to measure what approximate or quantised embeddings
cost in accuracy (PR-AUC).

Architecture (Naumov et al.'s DLRM, scaled down): a bottom MLP maps the 13 dense features
(``log1p``) to one vector of the embedding dimension; the N embedding vectors of a request and
that vector interact by pairwise dot products (``F·(F−1)/2`` of them for ``F = N + 1``); a top MLP
takes the bottom vector and the dot products to one logit. ReLU everywhere but the output.

Training: binary cross-entropy, Adam on the MLPs, row-wise Adagrad on the embedding rows (one
accumulator per row, as DLRM/FBGEMM do for sparse rows), rows clipped to [−1, 1] after each step
(the value range EVMix's codecs assume). Deterministic by ``seed``. No torch: this is a
measurement instrument for the store, not a training framework.

Thread-safety: a model is not shared between threads while training.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from attune.errors import InvalidArgumentError


def pr_auc(labels: Any, scores: Any) -> float:
    """Area under the precision-recall curve as average precision (the mean of the precision at
    each positive's rank, ties broken by order), the standard estimator."""
    y = np.asarray(labels, dtype=bool)
    s = np.asarray(scores, dtype=np.float64)
    if y.shape != s.shape or y.ndim != 1:
        raise InvalidArgumentError(f"labels {y.shape} and scores {s.shape} must be equal 1-D")
    pos = int(y.sum())
    if pos == 0:
        raise InvalidArgumentError("PR-AUC needs at least one positive label")
    order = np.argsort(-s, kind="stable")
    hits = np.cumsum(y[order])
    ranks = np.arange(1, len(y) + 1)
    return float(np.sum((hits / ranks)[y[order]]) / pos)


class DLRM:
    """The model: ``cardinalities`` rows per table, embeddings of ``dim`` values."""

    def __init__(
        self,
        cardinalities: Sequence[int],
        *,
        dim: int = 36,
        dense: int = 13,
        bottom: int = 64,
        top: int = 64,
        seed: int = 0,
    ) -> None:
        if dim < 1 or dense < 1 or bottom < 1 or top < 1 or not cardinalities:
            raise InvalidArgumentError("DLRM needs tables and positive layer sizes")
        rng = np.random.default_rng(seed)
        self.dim = dim
        self.tables = len(cardinalities)
        f = self.tables + 1
        self._iu = np.triu_indices(f, k=1)
        pairs = len(self._iu[0])

        def dense_layer(i: int, o: int) -> list[np.ndarray]:
            return [
                (rng.standard_normal((i, o)) * np.sqrt(2.0 / i)).astype(np.float32),
                np.zeros(o, dtype=np.float32),
            ]

        #: MLP weights: bottom (dense → bottom → dim), top (dim + pairs → top → 1).
        self.mlp: list[np.ndarray] = (
            dense_layer(dense, bottom)
            + dense_layer(bottom, dim)
            + dense_layer(dim + pairs, top)
            + dense_layer(top, 1)
        )
        #: Embedding tables, float32 ``[rows, dim]`` in [−1, 1].
        self.embeddings: list[np.ndarray] = [
            rng.uniform(-0.05, 0.05, (int(n), dim)).astype(np.float32) for n in cardinalities
        ]
        self._m = [np.zeros_like(w) for w in self.mlp]
        self._v = [np.zeros_like(w) for w in self.mlp]
        self._acc = [np.zeros(len(e), dtype=np.float32) for e in self.embeddings]
        self._step = 0

    def lookup(self, keys: Any) -> np.ndarray:
        """The exact embeddings of ``keys`` ``[batch, N]``: float32 ``[batch, N, dim]``."""
        k = np.asarray(keys)
        return np.stack([self.embeddings[t][k[:, t]] for t in range(self.tables)], axis=1)

    def _forward(self, dense: np.ndarray, emb: np.ndarray):
        w1, b1, w2, b2, u1, c1, u2, c2 = self.mlp
        x0 = np.log1p(dense.astype(np.float32))
        h1 = np.maximum(x0 @ w1 + b1, 0)
        bo = np.maximum(h1 @ w2 + b2, 0)
        z = np.concatenate([bo[:, None, :], emb.astype(np.float32)], axis=1)
        p = z @ z.transpose(0, 2, 1)
        feats = p[:, self._iu[0], self._iu[1]]
        t_in = np.concatenate([bo, feats], axis=1)
        g1 = np.maximum(t_in @ u1 + c1, 0)
        logit = (g1 @ u2 + c2)[:, 0]
        return logit, (x0, h1, bo, z, t_in, g1)

    def predict(self, dense: Any, emb: Any, batch: int = 4096) -> np.ndarray:
        """Click probabilities for ``dense`` ``[B, 13]`` and embeddings ``emb`` ``[B, N, dim]``
        (from :meth:`lookup` or from an embedding store)."""
        d = np.asarray(dense)
        e = np.asarray(emb)
        if e.ndim != 3 or e.shape[1:] != (self.tables, self.dim) or len(d) != len(e):
            raise InvalidArgumentError(
                f"embeddings must be [batch, {self.tables}, {self.dim}] beside dense "
                f"[batch, 13], got {list(e.shape)} and {list(d.shape)}"
            )
        out = np.empty(len(d), dtype=np.float64)
        for lo in range(0, len(d), batch):
            logit, _ = self._forward(d[lo : lo + batch], e[lo : lo + batch])
            out[lo : lo + batch] = 1.0 / (1.0 + np.exp(-logit.astype(np.float64)))
        return out

    def train(
        self,
        keys: Any,
        dense: Any,
        clicks: Any,
        *,
        epochs: int = 1,
        batch: int = 256,
        lr: float = 1e-3,
        lr_embedding: float = 0.05,
    ) -> list[float]:
        """Trains on ``keys`` ``[S, N]``, ``dense`` ``[S, 13]``, ``clicks`` ``[S]`` in order
        (the stream is already shuffled by its generator); returns the mean loss per epoch."""
        k = np.asarray(keys)
        d = np.asarray(dense)
        y = np.asarray(clicks, dtype=np.float32)
        if k.ndim != 2 or k.shape[1] != self.tables or len(d) != len(k) or len(y) != len(k):
            raise InvalidArgumentError("keys [S, N], dense [S, 13] and clicks [S] must agree")
        losses = []
        for _ in range(epochs):
            total = 0.0
            for lo in range(0, len(k), batch):
                total += self._step_batch(
                    k[lo : lo + batch], d[lo : lo + batch], y[lo : lo + batch], lr, lr_embedding
                ) * len(k[lo : lo + batch])
            losses.append(total / max(1, len(k)))
        return losses

    def _step_batch(self, k, d, y, lr: float, lr_e: float) -> float:
        emb = self.lookup(k)
        logit, (x0, h1, bo, z, t_in, g1) = self._forward(d, emb)
        _, _, w2, _, u1, _, u2, _ = self.mlp
        p = 1.0 / (1.0 + np.exp(-logit))
        eps = 1e-7
        loss = float(-np.mean(y * np.log(p + eps) + (1 - y) * np.log(1 - p + eps)))
        n = len(y)
        dl = ((p - y) / n)[:, None].astype(np.float32)
        du2 = g1.T @ dl
        dc2 = dl.sum(0)
        dg1 = (dl @ u2.T) * (g1 > 0)
        du1 = t_in.T @ dg1
        dc1 = dg1.sum(0)
        dt = dg1 @ u1.T
        dbo = dt[:, : self.dim]
        g = np.zeros((n, self.tables + 1, self.tables + 1), dtype=np.float32)
        g[:, self._iu[0], self._iu[1]] = dt[:, self.dim :]
        dz = (g + g.transpose(0, 2, 1)) @ z
        dbo = (dbo + dz[:, 0, :]) * (bo > 0)
        dw2 = h1.T @ dbo
        db2 = dbo.sum(0)
        dh1 = (dbo @ w2.T) * (h1 > 0)
        dw1 = x0.T @ dh1
        db1 = dh1.sum(0)
        grads = [dw1, db1, dw2, db2, du1, dc1, du2, dc2]
        self._step += 1
        b1m, b2m = 0.9, 0.999
        for i, gr in enumerate(grads):
            self._m[i] = b1m * self._m[i] + (1 - b1m) * gr
            self._v[i] = b2m * self._v[i] + (1 - b2m) * gr * gr
            mh = self._m[i] / (1 - b1m**self._step)
            vh = self._v[i] / (1 - b2m**self._step)
            self.mlp[i] -= (lr * mh / (np.sqrt(vh) + 1e-8)).astype(np.float32)
        # Row-wise Adagrad on the rows this batch touched (duplicates summed first).
        de = dz[:, 1:, :]
        for t in range(self.tables):
            rows, inv = np.unique(k[:, t], return_inverse=True)
            gsum = np.zeros((len(rows), self.dim), dtype=np.float32)
            np.add.at(gsum, inv, de[:, t, :])
            acc = self._acc[t]
            acc[rows] += np.mean(gsum * gsum, axis=1)
            step = lr_e * gsum / np.sqrt(acc[rows] + 1e-8)[:, None]
            e = self.embeddings[t]
            e[rows] = np.clip(e[rows] - step, -1.0, 1.0)
        return loss


__all__ = ["DLRM", "pr_auc"]

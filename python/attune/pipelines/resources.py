"""The resource manager of a DAG run: admission, depth-first priority and eviction.

The source (Kelvin's resource manager) admits a node when free memory covers its need, runs the
deepest ready nodes first (finishing a branch frees its intermediates soonest), and when memory
runs out evicts finished outputs that are still needed, lowest priority first, in one of two
ways chosen per output: *rollback* (delete the output and run its node again when a consumer
needs it) or *limit-drop* (let the kernel page the output out by dropping its container's memory
limit, so it is swapped instead of recomputed).

Here, for one run (``DAG.run(memory_budget_bytes=...)``):

* **Need** of a node: its declared ``memory_bytes`` (``DAG.node(..., memory_bytes=)``), else the
  size of its inputs (what a node typically creates is of that order).
* **In use**: the tmpfs bytes of the run's shared files (measured after every node) plus the
  needs of the running nodes.
* **Admission**: the highest-priority ready node starts when in use + its need fits the budget.
  When it does not and nothing runs, outputs are evicted until it fits; when nothing more can be
  evicted it runs anyway (progress first; the kernel then copes, as the source's ``kswap``
  baseline does).
* **Priority**: depth (longest path from a source), deepest first, then definition order.
* **Eviction** candidates: finished outputs with consumers still to run, not inputs of the node
  being admitted and not requested outputs; lowest priority first (the shallowest next
  consumer). Each is evicted by:

  - *rollback*: its files are removed and its node is queued again (its inputs must still be
    there, or it must be a source);
  - *limit-drop*: without cgroups and with or without swap, the stand-in is paging the output
    out to a disk file: each of its tmpfs data files is copied to the run's spill directory (on
    disk; ``spill_dir``) and replaced by a symbolic link to the copy, so readers map the disk
    file through the page cache, which the kernel can drop or write back under pressure (with
    swap, the tmpfs pages would otherwise be swapped; without it they could not go anywhere).
  - ``adaptive`` (the default) picks rollback when recomputing costs less than writing the
    output out and reading it back (:func:`choose_eviction`), else limit-drop; ``rollback`` and
    ``limit-drop`` force one way; ``off`` never evicts (admission only).

Every decision is recorded in ``RunResult.events`` (start, done, evict).
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from collections.abc import Iterable
from typing import Any

from attune.errors import InvalidArgumentError

__all__ = ["EVICTIONS", "ResourceManager", "choose_eviction", "depths"]

EVICTIONS = ("adaptive", "rollback", "limit-drop", "off")
#: Assumed disk bandwidth for the first limit-drop of a run (then measured).
DEFAULT_SPILL_BYTES_PER_SEC = 500e6


def depths(nodes: Iterable[Any]) -> dict[int, int]:
    """id(node) -> longest path from a source (nodes are in definition order: inputs first)."""
    out: dict[int, int] = {}
    for n in nodes:
        out[id(n)] = 1 + max((out[id(i)] for i in n.inputs), default=-1)
    return out


def choose_eviction(
    policy: str,
    recompute_seconds: float,
    nbytes: int,
    spill_bytes_per_sec: float,
    can_rollback: bool,
) -> str:
    """``rollback`` or ``limit-drop`` for one output: rollback when the policy says so (and the
    node can run again), or, adaptively, when running the node again is cheaper than writing its
    output to disk and reading it back."""
    if policy == "limit-drop" or not can_rollback:
        return "limit-drop"
    if policy == "rollback":
        return "rollback"
    spill_seconds = 2 * nbytes / max(spill_bytes_per_sec, 1.0)
    return "rollback" if recompute_seconds <= spill_seconds else "limit-drop"


def default_spill_root() -> str:
    """A directory on disk (not tmpfs) for limit-dropped outputs: ``$ATTUNE_SPILL_ROOT``, else
    /var/tmp, else the temporary directory."""
    env = os.environ.get("ATTUNE_SPILL_ROOT")
    if env:
        return env
    return "/var/tmp" if os.path.isdir("/var/tmp") else tempfile.gettempdir()


class ResourceManager:
    """The bookkeeping of one run; :class:`attune.pipelines.dag.DAG` calls it."""

    def __init__(
        self,
        nodes: list[Any],
        budget_bytes: int,
        eviction: str,
        spill_root: str | None,
        directory: str,
    ) -> None:
        self.check(budget_bytes, eviction)
        self.budget = budget_bytes
        self.eviction = eviction
        self.depth = depths(nodes)
        self.order = {id(n): k for k, n in enumerate(nodes)}
        self.directory = directory
        self._spill_root = spill_root
        self.spill_dir: str | None = None
        self.spill_bytes_per_sec = DEFAULT_SPILL_BYTES_PER_SEC
        self.spilled: dict[str, str] = {}  # tmpfs path (now a link) -> disk copy
        self.events: list[tuple[Any, ...]] = []

    @staticmethod
    def check(budget_bytes: int, eviction: str) -> None:
        if budget_bytes <= 0:
            raise InvalidArgumentError("memory_budget_bytes must be positive")
        if eviction not in EVICTIONS:
            raise InvalidArgumentError(
                f"unknown eviction {eviction!r} (one of: {', '.join(EVICTIONS)})"
            )

    # -- admission ------------------------------------------------------------------------------

    def sort_ready(self, ready: list[Any]) -> list[Any]:
        return sorted(ready, key=lambda n: (-self.depth[id(n)], self.order[id(n)]))

    def need(self, node: Any, output_bytes: dict[int, int]) -> int:
        declared = getattr(node, "memory_bytes", None)
        if declared is not None:
            return declared
        return sum(output_bytes.get(id(i), 0) for i in node.inputs)

    def fits(self, in_use: int, need: int) -> bool:
        return in_use + need <= self.budget

    # -- eviction -------------------------------------------------------------------------------

    def candidates(
        self, live: dict[int, Any], pending: dict[int, list[Any]], protect: set[int]
    ) -> list[Any]:
        """Finished nodes whose outputs may be evicted, lowest priority first."""
        out = [n for key, n in live.items() if key not in protect and pending.get(key)]
        return sorted(
            out,
            key=lambda n: (
                min(self.depth[id(c)] for c in pending[id(n)]),
                -self.order[id(n)],
            ),
        )

    def spill(self, files: list[str]) -> int:
        """Limit-drop: copies each tmpfs data file of the run to disk and replaces it by a link
        to the copy; returns the tmpfs bytes given back (measured)."""
        if self.spill_dir is None:
            root = self._spill_root or default_spill_root()
            self.spill_dir = tempfile.mkdtemp(prefix="attune-dag-spill.", dir=root)
        freed = 0
        moved = 0
        t0 = time.perf_counter()
        for f in files:
            if os.path.dirname(f) != self.directory or f in self.spilled or os.path.islink(f):
                continue
            try:
                blocks = os.stat(f).st_blocks * 512
            except FileNotFoundError:
                continue
            dest = os.path.join(self.spill_dir, os.path.basename(f))
            shutil.copyfile(f, dest)
            link = f + ".link"
            os.symlink(dest, link)
            os.replace(link, f)
            self.spilled[f] = dest
            freed += blocks
            moved += os.path.getsize(dest)
        dt = time.perf_counter() - t0
        if moved > (1 << 20) and dt > 0:
            self.spill_bytes_per_sec = moved / dt
        return freed

    def forget(self, path: str) -> None:
        """A removed file: its disk copy goes too."""
        dest = self.spilled.pop(path, None)
        if dest is not None:
            try:
                os.unlink(dest)
            except FileNotFoundError:
                pass

    def close(self) -> None:
        if self.spill_dir is not None:
            shutil.rmtree(self.spill_dir, ignore_errors=True)
        self.spilled.clear()

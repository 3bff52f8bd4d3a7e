"""CLI verbs for the key-value engine: `attune demo`, `attune kv ...` (filled in with the engine)."""

from __future__ import annotations


def register(sub) -> None:
    p = sub.add_parser("demo", help="load a data set into an Attune database and run a read/write mix")
    p.set_defaults(func=lambda args: 0)

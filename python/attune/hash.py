"""VIP hashing from Python: a ``u64 -> u64`` chained hash table that learns which keys are popular
and moves them to the front of their chains, plus the PK-FK hash join built on it.

``VipHashMap(learning="adaptive" | "off" | N)`` behaves like a dict of non-negative ints; fetches
(``m[k]``, ``m.get``, ``m.get_many``) feed the learning, ``peek`` does not. Batch calls release the
GIL. Errors are ``HashError`` (an ``attune.Error``); a missing key raises ``HashKeyError``, which is
also a ``KeyError``. Design and measurements: docs/vip-hashing.md.
"""

from __future__ import annotations

from attune._native import VipHashMap, hash_join
from attune.errors import HashError, HashKeyError

__all__ = ["HashError", "HashKeyError", "VipHashMap", "hash_join"]

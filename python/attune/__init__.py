"""Attune: a storage stack that learns its data, its workload and its devices.

Quick start::

    import attune
    with attune.DB("/tmp/mydb", compression="zstd", memory_budget="256MiB") as db:
        db.put(b"key", b"value")
        assert db.get(b"key") == b"value"
        for key, value in db.items(start=b"a", end=b"z"):
            ...
        with db.transaction() as txn:          # commits at the end; ConflictError if raced
            txn[b"n"] = b"1"
    with attune.HashDB("/tmp/myhash") as h:   # Plush: 8-byte keys and values, point lookups
        h.put(42, 7)
        assert h.get_int(42) == 7

Every error is a subclass of :class:`attune.Error` (defined in :mod:`attune.errors`, so they
pickle); damaged files raise :class:`attune.CorruptionError` naming the file and offset.
"""

from attune import _native, errors
from attune._native import (
    DB,
    HASH_DB_OPTION_NAMES,
    OPTION_NAMES,
    HashDB,
    Snapshot,
    Transaction,
    WriteBatch,
    __version__,
)
from attune.errors import (
    AlreadyExistsError,
    ClosedError,
    ConflictError,
    CorruptionError,
    Error,
    ForkedError,
    InvalidArgumentError,
    LockedError,
    NotADatabaseError,
    ReadOnlyError,
    StorageIOError,
    UnsupportedVersionError,
)

# The native module raises the classes of attune.errors (for every crate it binds): hand them to
# it once, here.
_native._register_errors(**{name: getattr(errors, name) for name in errors.__all__})

__all__ = [
    "DB",
    "HASH_DB_OPTION_NAMES",
    "OPTION_NAMES",
    "AlreadyExistsError",
    "ClosedError",
    "ConflictError",
    "CorruptionError",
    "Error",
    "ForkedError",
    "HashDB",
    "InvalidArgumentError",
    "LockedError",
    "NotADatabaseError",
    "ReadOnlyError",
    "Snapshot",
    "StorageIOError",
    "Transaction",
    "UnsupportedVersionError",
    "WriteBatch",
    "__version__",
]

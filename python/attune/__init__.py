"""Attune: a storage stack that learns its data, its workload and its devices.

Quick start::

    import attune
    with attune.DB("/tmp/mydb", compression="zstd", memory_budget="256MiB") as db:
        db.put(b"key", b"value")
        assert db.get(b"key") == b"value"
        for key, value in db.items(start=b"a", end=b"z"):
            ...

Every error is a subclass of :class:`attune.Error`; damaged files raise
:class:`attune.CorruptionError` naming the file and offset.
"""

from attune._native import (
    DB,
    OPTION_NAMES,
    ClosedError,
    CorruptionError,
    Error,
    InvalidArgumentError,
    LockedError,
    NotADatabaseError,
    Snapshot,
    StorageIOError,
    UnsupportedVersionError,
    WriteBatch,
    __version__,
)

__all__ = [
    "DB",
    "OPTION_NAMES",
    "ClosedError",
    "CorruptionError",
    "Error",
    "InvalidArgumentError",
    "LockedError",
    "NotADatabaseError",
    "Snapshot",
    "StorageIOError",
    "UnsupportedVersionError",
    "WriteBatch",
    "__version__",
]

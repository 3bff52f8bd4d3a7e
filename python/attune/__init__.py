"""Attune: a storage stack that learns its data, its workload and its devices.

Quick start::

    import attune
    with attune.DB("/tmp/mydb", compression="zstd", memory_budget="256MiB") as db:
        db.put(b"key", b"value")
        assert db.get(b"key") == b"value"
        for key, value in db.items(start=b"a", end=b"z"):
            ...

Every error is a subclass of :class:`attune.Error` (defined in :mod:`attune.errors`, so they
pickle); damaged files raise :class:`attune.CorruptionError` naming the file and offset.
"""

from attune import _native, errors
from attune._native import (
    DB,
    OPTION_NAMES,
    Snapshot,
    WriteBatch,
    __version__,
)
from attune.errors import (
    AlreadyExistsError,
    ClosedError,
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
    "OPTION_NAMES",
    "AlreadyExistsError",
    "ClosedError",
    "CorruptionError",
    "Error",
    "ForkedError",
    "InvalidArgumentError",
    "LockedError",
    "NotADatabaseError",
    "ReadOnlyError",
    "Snapshot",
    "StorageIOError",
    "UnsupportedVersionError",
    "WriteBatch",
    "__version__",
]

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
    TableWriter,
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
    FullError,
    InvalidArgumentError,
    InvalidArgumentTypeError,
    LockedError,
    NotADatabaseError,
    ReadOnlyError,
    StorageIOError,
    UnsupportedVersionError,
)

# The native module raises the classes of attune.errors (for every crate it binds): hand them to
# it once, here.
_native._register_errors(**{name: getattr(errors, name) for name in errors.__all__})


def repair(path, **options) -> dict:
    """Salvages every readable record of a damaged database into one that opens.

    Every file in ``path`` is read on its own (the manifest and ``CURRENT`` are not trusted):
    tables block by block, write-ahead logs up to their first damaged record, value-log
    segments record by record. The newest version of each key found anywhere is written into
    new tables (sequence numbers decide; a key whose newest version is a deletion stays
    deleted), a new manifest is written, and every file that lost records, with the old
    manifest and ``CURRENT``, is kept in ``path/lost/``. Nothing is deleted before a copy of
    it is durable. No process may hold the database open (:class:`LockedError`).

    ``options`` are :class:`DB` options (the format of the tables written). Returns a dict:
    ``files`` (one dict per file: ``name``, ``kind``, ``records_kept``, ``records_lost``,
    ``bytes_lost``, ``moved_to_lost``, ``error``), ``keys`` (live keys: what iterating the
    repaired database yields), ``keys_deleted`` (keys whose newest version is a point or range
    deletion, an expired value or a lost value: kept deleted), ``values_lost``,
    ``values_inlined``, ``tables_written``, ``segments_kept``, ``last_sequence``,
    ``files_moved_to_lost`` and ``clean`` (True when no record was lost).
    """
    return _native.kv_repair(path, **options)


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
    "FullError",
    "HashDB",
    "InvalidArgumentError",
    "InvalidArgumentTypeError",
    "LockedError",
    "NotADatabaseError",
    "ReadOnlyError",
    "Snapshot",
    "StorageIOError",
    "TableWriter",
    "Transaction",
    "UnsupportedVersionError",
    "WriteBatch",
    "__version__",
    "repair",
]

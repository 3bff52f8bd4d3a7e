"""Every exception Attune raises, as plain Python classes.

They live here rather than in the native module so that they pickle (an error raised in a
``multiprocessing`` worker reaches the parent as itself, not as ``MaybeEncodingError``) and so that
tracebacks name ``attune.errors``. ``attune/__init__.py`` registers them with the native module
once, at import (``_native._register_errors``), and the native module raises them for every crate
it binds (``crates/attune-py/src/errors.rs`` maps each engine error to its class); catch them as
``attune.CorruptionError`` and so on (re-exported by ``attune``, the hash and workload errors also
by ``attune.hash`` and ``attune.workload``).

Every class derives from :class:`Error`. Errors about a file carry its ``path`` attribute (``None``
when there is none); corruption also carries the byte ``offset``.
"""

from __future__ import annotations


class Error(Exception):
    """Base class of every error Attune raises."""

    def __init__(self, message: str = "", path: str | None = None, offset: int | None = None):
        super().__init__(message)
        self.path = path
        self.offset = offset

    def __reduce__(self):
        # The message as given, not str(self): a KeyError's str() quotes it (HashKeyError).
        message = self.args[0] if self.args else ""
        return (type(self), (message, self.path, self.offset))


class CorruptionError(Error):
    """Data on disk failed a checksum or a structural check (``path`` and ``offset`` say where)."""


class StorageIOError(Error, OSError):
    """The operating system reported an I/O error (a full disk, a permission, a missing file).

    Also an ``OSError``, so that code written for files (``except OSError``) catches it; its
    ``errno`` and ``filename`` are ``None`` (``path`` names the file, the message the cause)."""


class LockedError(Error):
    """Another opener (in this process or another) holds the database lock."""


class NotADatabaseError(Error):
    """The directory holds no Attune database (or another engine's, which the message names)."""


class AlreadyExistsError(Error):
    """The database exists and ``error_if_exists=True`` was given."""


class UnsupportedVersionError(Error):
    """The files were written by a newer format version than this build reads."""


class InvalidArgumentError(Error, ValueError):
    """An argument or option is not valid; the message lists what is accepted."""


class InvalidArgumentTypeError(InvalidArgumentError, TypeError):
    """An argument of a type that is not accepted (an int or None as a key, a str as ``sync``).

    Also a ``TypeError``, so that code written for plyvel or RocksDB bindings (``except
    TypeError``) still catches it; the message names the argument, what was given and what is
    accepted."""


class ClosedError(Error):
    """The database (or the snapshot or iterator) is closed, or unusable after an error."""


class ForkedError(ClosedError):
    """The handle was opened in a parent process and used in a forked child; open it there."""


class FullError(Error):
    """The database has no room for the write under its options (a HashDB's ``levels_max``,
    ``log_chunks``); the message names the option to raise."""


class ReadOnlyError(Error):
    """A write (or compaction, garbage collection, learning) on a database opened read-only."""


class ConflictError(Error):
    """A transaction's key (or a conditional write's expected value) changed before it was
    written; nothing was written. Retry with fresh reads."""


class HashError(Error, ValueError):
    """Bad input to a VIP hash table or hash join (out-of-range key, bad configuration, ...)."""


class HashKeyError(HashError, KeyError):
    """The key is not in the VIP hash table."""


class WorkloadError(Error, ValueError):
    """Invalid workload parameters (raised before any generation), or a damaged trace file."""


__all__ = [
    "AlreadyExistsError",
    "ClosedError",
    "ConflictError",
    "CorruptionError",
    "Error",
    "ForkedError",
    "FullError",
    "HashError",
    "HashKeyError",
    "InvalidArgumentError",
    "InvalidArgumentTypeError",
    "LockedError",
    "NotADatabaseError",
    "ReadOnlyError",
    "StorageIOError",
    "UnsupportedVersionError",
    "WorkloadError",
]

"""SIPC: Arrow tables shared between processes by reference to per-column tmpfs files.

A table written with :func:`write_table` is a small *table file* (``NAME.sipc``: magic, version,
the Arrow IPC schema message, a JSON layout, one CRC-32 over both) plus data files:
one per column (``NAME.cK``) and one for every dictionary of the table (``NAME.dict``). The
layout names, for every buffer of every chunk, a triple (file, offset, length). Readers
(:func:`read_table`) map each data file read-only, once, and rebuild the table over the maps
without copying (:func:`pyarrow.Array.from_buffers` on slices of the mapped buffer).

**Resharing.** Every read-only map this process made, and every writable region of an
:class:`attune.pipelines.arena.Arena`, is recorded in a process-wide registry of address ranges
(held weakly: a range leaves the registry when its map is unmapped). When a table is written,
each buffer whose bytes lie inside a registered range is written as a reference to the file
behind that range, not copied: a node that passes a column through, drops columns, slices rows
or adds a column writes only the bytes that are new. Dictionaries are buffers like any other, so
a filter or sort of a dictionary-encoded column reshares its dictionary and copies only the
indices.

**Damage.** The table file carries a CRC-32 over its schema and layout; every data file must be
at least as long as the layout says (a short or truncated file is a
:class:`~attune.errors.CorruptionError` naming the file and the lengths). With
``checksums=True`` the writer also stores a CRC-32 of every buffer, which ``verify=True``
checks on read (a full pass over the data, off by default: the point of SIPC is not touching it).

Format: docs/formats/sipc.md. Thread-safety: the registry is guarded by a lock; one table may be
read by many threads; a writer writes its files from one thread.
"""

from __future__ import annotations

import bisect
import json
import mmap
import os
import struct
import threading
import weakref
import zlib
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from attune.errors import CorruptionError, InvalidArgumentError, UnsupportedVersionError

__all__ = [
    "MAGIC",
    "TABLE_SUFFIX",
    "VERSION",
    "WriteStats",
    "add_range_source",
    "mapped_ranges",
    "read_table",
    "register_range",
    "table_files",
    "write_table",
]

MAGIC = b"ATSIPC\r\n"
VERSION = 1
#: magic, version, flags, schema length, layout length, CRC-32 of schema + layout.
_HEADER = struct.Struct("<8sIIIII")
#: Flag bit: the layout has a CRC-32 for every buffer.
FLAG_CHECKSUMS = 1
TABLE_SUFFIX = ".sipc"
#: Buffers are placed at multiples of 64 bytes in the data files (Arrow's recommended alignment,
#: so that kernels built for aligned data get it from a mapped file too).
ALIGN_BYTES = 64
#: Bound on a table file's schema + layout (a corrupt length field must not make us allocate
#: gigabytes): 256 MiB is far above any real table's layout.
META_BYTES_MAX = 256 << 20

_PAD = bytes(ALIGN_BYTES)


# --------------------------------------------------------------------------------------------
# The registry of shared address ranges.


class _Registry:
    """Address ranges of this process that are backed by shared files: start, end, file path,
    offset of ``start`` in the file. Entries go away when their owner object is collected."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._starts: list[int] = []
        self._entries: list[tuple[int, int, str, int]] = []

    def add(self, owner: Any, start: int, length: int, path: str, file_offset: int = 0) -> None:
        if length <= 0:
            return
        entry = (start, start + length, path, file_offset)
        with self._lock:
            i = bisect.bisect_left(self._starts, start)
            self._starts.insert(i, start)
            self._entries.insert(i, entry)
        if owner is not None:  # None: the registry itself is short-lived (write_table)
            weakref.finalize(owner, self._remove, entry)

    def _remove(self, entry: tuple[int, int, str, int]) -> None:
        with self._lock:
            i = bisect.bisect_left(self._starts, entry[0])
            while i < len(self._entries) and self._starts[i] == entry[0]:
                if self._entries[i] == entry:
                    del self._starts[i]
                    del self._entries[i]
                    return
                i += 1

    def remove_range(self, start: int, end: int, path: str) -> None:
        with self._lock:
            for i, e in enumerate(self._entries):
                if e[0] == start and e[1] == end and e[2] == path:
                    del self._starts[i]
                    del self._entries[i]
                    return

    def find(self, address: int, length: int) -> tuple[str, int] | None:
        """(path, file offset) of ``[address, address + length)`` when one range holds it."""
        with self._lock:
            i = bisect.bisect_right(self._starts, address) - 1
            # Ranges do not overlap (they are distinct live mappings), so the one starting at or
            # before the address is the only candidate.
            if i < 0:
                return None
            start, end, path, off = self._entries[i]
            if address + length <= end:
                return path, off + (address - start)
            return None

    def snapshot(self) -> list[tuple[int, int, str, int]]:
        with self._lock:
            return list(self._entries)


_REGISTRY = _Registry()


class _Forever:
    """Owner of ranges that live as long as the process (a memory pool's segments)."""


_FOREVER = _Forever()
_SOURCES: list = []
_SOURCED: set[tuple[int, int, str]] = set()


def add_range_source(source) -> None:
    """Adds a function returning [(address, length, path)] of shared ranges that live for the
    rest of the process (a shared memory pool's segments); writers ask it before each table."""
    if source not in _SOURCES:
        _SOURCES.append(source)


def _sync_sources() -> None:
    for source in _SOURCES:
        for address, length, path in source():
            if (address, length, path) not in _SOURCED:
                _SOURCED.add((address, length, path))
                _REGISTRY.add(_FOREVER, address, length, path)


def forget_ranges(ranges) -> None:
    """Forgets [(address, length, path)] that a range source reported and that are no longer
    mapped (a reused node process's pool after :func:`attune.pipelines.shmpool.release`)."""
    for address, length, path in ranges:
        key = (address, length, path)
        if key in _SOURCED:
            _SOURCED.discard(key)
            _REGISTRY.remove_range(address, address + length, path)


def register_range(owner: Any, buffer: pa.Buffer, path: str, file_offset: int = 0) -> None:
    """Records that ``buffer``'s bytes are ``path`` from ``file_offset`` on, for as long as
    ``owner`` lives (it must keep the mapping alive). Used by readers and arenas."""
    _REGISTRY.add(owner, buffer.address, buffer.size, path, file_offset)


def mapped_ranges() -> list[tuple[int, int, str, int]]:
    """The live shared ranges of this process: (start, end, path, file offset)."""
    return _REGISTRY.snapshot()


# --------------------------------------------------------------------------------------------
# Writing.


@dataclass
class WriteStats:
    """What one :func:`write_table` did: bytes copied into new data files, bytes written as
    references to existing files, and the files the table refers to."""

    path: str
    bytes_copied: int = 0
    bytes_reshared: int = 0
    buffers_copied: int = 0
    buffers_reshared: int = 0
    files: list[str] = field(default_factory=list)
    #: path -> [(offset, length)] of every buffer the table refers to.
    ranges: dict[str, list[tuple[int, int]]] = field(default_factory=dict)


class _DataFile:
    """One data file being appended to (a column's or the dictionaries')."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.fd: int | None = None
        self.size = 0

    def append(self, buf: pa.Buffer) -> int:
        if self.fd is None:
            self.fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        pad = -self.size % ALIGN_BYTES
        if pad:
            _write_all(self.fd, _PAD[:pad])
            self.size += pad
        offset = self.size
        _write_all(self.fd, memoryview(buf))
        self.size += buf.size
        return offset

    def close(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None


def _write_all(fd: int, data: Any) -> None:
    view = memoryview(data).cast("B")
    while view:
        n = os.write(fd, view)
        view = view[n:]


class _Writer:
    def __init__(
        self,
        directory: str,
        name: str,
        checksums: bool,
        reshare: bool = True,
        registry: _Registry | None = None,
        copy_from: list[tuple[int, int]] | None = None,
    ) -> None:
        self.reshare = reshare
        self.registry = registry if registry is not None else _REGISTRY
        self.copy_from = copy_from or []
        self.base = os.path.join(os.path.abspath(directory), name)
        self.checksums = checksums
        self.files: list[str] = []
        self.file_index: dict[str, int] = {}
        self.file_sizes: dict[str, int] = {}
        self.data_files: list[_DataFile] = []
        self.dictionaries: list[dict[str, Any]] = []
        self.dictionary_ids: dict[tuple, int] = {}
        self.stats = WriteStats(path=self.base + TABLE_SUFFIX)

    def _file_id(self, path: str) -> int:
        i = self.file_index.get(path)
        if i is None:
            i = len(self.files)
            self.files.append(path)
            self.file_index[path] = i
        return i

    def buffer(self, buf: pa.Buffer | None, sink: _DataFile) -> list[int] | None:
        if buf is None:
            return None
        if buf.size == 0:
            return [-1, 0, 0]
        found = self.registry.find(buf.address, buf.size) if self.reshare else None
        if found is not None and self.copy_from:
            a = buf.address
            if any(start <= a < start + n for start, n in self.copy_from):
                found = None
        if found is not None:
            path, offset = found
            self.stats.bytes_reshared += buf.size
            self.stats.buffers_reshared += 1
            ref = [self._file_id(path), offset, buf.size]
            end = offset + buf.size
            if end > self.file_sizes.get(path, 0):
                self.file_sizes[path] = end
        else:
            offset = sink.append(buf)
            self.stats.bytes_copied += buf.size
            self.stats.buffers_copied += 1
            ref = [self._file_id(sink.path), offset, buf.size]
            self.file_sizes[sink.path] = sink.size
            path = sink.path
        self.stats.ranges.setdefault(path, []).append((offset, buf.size))
        if self.checksums:
            ref.append(zlib.crc32(memoryview(buf)))
        return ref

    def array(self, arr: pa.Array, sink: _DataFile, dict_sink: _DataFile) -> dict[str, Any]:
        typ = arr.type
        if isinstance(typ, pa.ExtensionType):
            return self.array(arr.storage, sink, dict_sink)
        node: dict[str, Any] = {"len": len(arr), "nulls": arr.null_count, "off": arr.offset}
        if pa.types.is_dictionary(typ):
            node["bufs"] = [self.buffer(b, sink) for b in arr.indices.buffers()]
            node["dict"] = self.dictionary(arr.dictionary, dict_sink)
            return node
        if pa.types.is_list(typ) or pa.types.is_large_list(typ):
            own = arr.buffers()[: typ.num_buffers]
            node["bufs"] = [self.buffer(b, sink) for b in own]
            node["children"] = [self.array(arr.values, sink, dict_sink)]
            return node
        if pa.types.is_struct(typ):
            own = arr.buffers()[: typ.num_buffers]
            node["bufs"] = [self.buffer(b, sink) for b in own]
            children = []
            for i in range(typ.num_fields):
                child = arr.field(i)  # sliced by the parent's offset: undo that
                raw_offset = child.offset - arr.offset
                if raw_offset < 0:
                    raise InvalidArgumentError(f"struct child {i} starts before its parent")
                c = self.array(child, sink, dict_sink)
                c["off"] = raw_offset
                c["len"] = len(child) + arr.offset
                c["nulls"] = -1
                children.append(c)
            node["children"] = children
            return node
        if typ.num_fields != 0 or pa.types.is_union(typ) or pa.types.is_map(typ):
            raise InvalidArgumentError(f"SIPC cannot share arrays of type {typ} yet")
        node["bufs"] = [self.buffer(b, sink) for b in arr.buffers()]
        return node

    def dictionary(self, dictionary: pa.Array, dict_sink: _DataFile) -> int:
        key = (str(dictionary.type), len(dictionary), dictionary.offset) + tuple(
            (b.address, b.size) if b is not None else None for b in dictionary.buffers()
        )
        i = self.dictionary_ids.get(key)
        if i is None:
            node = self.array(dictionary, dict_sink, dict_sink)
            i = len(self.dictionaries)
            self.dictionaries.append(node)
            self.dictionary_ids[key] = i
        return i


def write_table(
    table: pa.Table | pa.RecordBatch,
    directory: str | os.PathLike,
    name: str,
    *,
    checksums: bool = False,
    reshare: bool = True,
    reshare_from: list[tuple[int, int, str]] | None = None,
    copy_from: list[tuple[int, int]] | None = None,
) -> WriteStats:
    """Writes ``table`` as ``DIRECTORY/NAME.sipc`` plus its data files and returns what was
    copied and what was reshared. The table file appears last (written under a temporary name
    and renamed), so a reader never sees a table whose data files are incomplete. ``name`` must
    be new in the directory (data files are created exclusively). ``reshare=False`` copies every
    buffer into the table's own files: for a table that must outlive the files its buffers come
    from (a cache entry written from a node's memory). ``reshare_from`` [(address, length,
    path)]: reshare only buffers inside these ranges (and copy the rest), e.g. a cache entry
    whose buffers were decoded into the entry's own files by a detached pool. ``copy_from``
    [(address, length)]: buffers starting inside these ranges are copied even when they could
    be reshared (a node's few small results in a pool segment the worker wants to reuse whole)."""
    if isinstance(table, pa.RecordBatch):
        table = pa.Table.from_batches([table])
    if not isinstance(table, pa.Table):
        raise InvalidArgumentError(f"write_table needs a pyarrow Table, got {type(table).__name__}")
    if not name or "/" in name or name.startswith("."):
        raise InvalidArgumentError(f"bad SIPC table name {name!r}")
    registry = None
    if reshare_from is not None:
        registry = _Registry()
        for address, length, path in reshare_from:
            registry.add(None, address, length, path)
    else:
        _sync_sources()
    w = _Writer(os.fspath(directory), name, checksums, reshare, registry, copy_from)
    dict_sink = _DataFile(w.base + ".dict")
    sinks: list[_DataFile] = []
    try:
        columns = []
        for k, column in enumerate(table.columns):
            sink = _DataFile(f"{w.base}.c{k}")
            sinks.append(sink)
            columns.append([w.array(chunk, sink, dict_sink) for chunk in column.chunks])
        for s in [*sinks, dict_sink]:
            s.close()
        layout = {
            "num_rows": table.num_rows,
            "files": [{"path": p, "size": w.file_sizes.get(p, 0)} for p in w.files],
            "columns": columns,
            "dictionaries": w.dictionaries,
        }
        schema_bytes = table.schema.serialize().to_pybytes()
        layout_bytes = json.dumps(layout, separators=(",", ":")).encode()
        crc = zlib.crc32(layout_bytes, zlib.crc32(schema_bytes))
        flags = FLAG_CHECKSUMS if checksums else 0
        header = _HEADER.pack(MAGIC, VERSION, flags, len(schema_bytes), len(layout_bytes), crc)
        tmp = w.stats.path + ".tmp"
        with open(tmp, "wb") as f:
            f.write(header + schema_bytes + layout_bytes)
        os.rename(tmp, w.stats.path)
    except BaseException:
        for s in [*sinks, dict_sink]:
            s.close()
            if os.path.exists(s.path):
                os.unlink(s.path)
        raise
    w.stats.files = list(w.files)
    return w.stats


# --------------------------------------------------------------------------------------------
# Reading.


def _read_layout(path: str) -> tuple[int, pa.Schema, dict[str, Any]]:
    try:
        with open(path, "rb") as f:
            head = f.read(_HEADER.size)
            if len(head) < _HEADER.size:
                raise CorruptionError(
                    f"SIPC table file {path} is {len(head)} bytes, shorter than its "
                    f"{_HEADER.size}-byte header",
                    path=path,
                    offset=0,
                )
            magic, version, flags, schema_len, layout_len, crc = _HEADER.unpack(head)
            if magic != MAGIC:
                raise CorruptionError(f"{path} is not a SIPC table file (bad magic)", path, 0)
            if version != VERSION:
                raise UnsupportedVersionError(
                    f"SIPC table file {path} has format version {version}; this build reads "
                    f"version {VERSION}",
                    path=path,
                    offset=8,
                )
            if schema_len + layout_len > META_BYTES_MAX:
                raise CorruptionError(
                    f"SIPC table file {path} claims {schema_len + layout_len} bytes of schema "
                    f"and layout (at most {META_BYTES_MAX})",
                    path=path,
                    offset=16,
                )
            body = f.read(schema_len + layout_len)
    except FileNotFoundError:
        raise CorruptionError(f"SIPC table file {path} does not exist", path=path) from None
    if len(body) < schema_len + layout_len:
        raise CorruptionError(
            f"SIPC table file {path} is truncated: {_HEADER.size + len(body)} bytes, the header "
            f"says {_HEADER.size + schema_len + layout_len}",
            path=path,
            offset=_HEADER.size + len(body),
        )
    if zlib.crc32(body) != crc:
        raise CorruptionError(
            f"SIPC table file {path}: checksum mismatch over its schema and layout",
            path=path,
            offset=_HEADER.size,
        )
    try:
        schema = pa.ipc.read_schema(pa.py_buffer(body[:schema_len]))
        layout = json.loads(body[schema_len:])
    except (pa.ArrowException, ValueError) as e:
        raise CorruptionError(f"SIPC table file {path}: unreadable schema or layout: {e}", path)
    return flags, schema, layout


def table_files(path: str | os.PathLike) -> list[str]:
    """The data files a table refers to (its own and any it reshares from other tables)."""
    _, _, layout = _read_layout(os.fspath(path))
    return [f["path"] for f in layout["files"]]


def _map_file(path: str, need: int) -> pa.Buffer:
    """A read-only shared map of one data file, as a pyarrow buffer over the whole file. The
    registry's entry lives as long as the ``mmap`` object, which every pyarrow buffer sliced from
    the map keeps alive (through its buffer export): the range leaves the registry exactly when
    the last slice is gone and the file is unmapped."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        raise CorruptionError(f"SIPC data file {path} does not exist", path=path) from None
    try:
        st = os.fstat(fd)
        size = st.st_size
        if size < need:
            raise CorruptionError(
                f"SIPC data file {path} is {size} bytes; the table refers to {need}",
                path=path,
                offset=size,
            )
        if size == 0:
            return pa.py_buffer(b"")
        mm = mmap.mmap(fd, size, flags=mmap.MAP_SHARED, prot=mmap.PROT_READ)
    finally:
        os.close(fd)
    buf = pa.py_buffer(mm)
    register_range(mm, buf, path)
    with _MAPS_LOCK:
        _MAPS[path] = (weakref.ref(mm), (st.st_dev, st.st_ino))
    return buf


#: path -> (weak reference to the live map of that file, its (device, inode)), so that a file
#: read by several tables in this process is mapped once (and resharing finds one range per
#: file). The inode tells a file from a later one at the same path (an entry re-created).
_MAPS: dict[str, tuple[weakref.ref, tuple[int, int]]] = {}
_MAPS_LOCK = threading.Lock()


def _map(path: str, need: int) -> pa.Buffer:
    with _MAPS_LOCK:
        known = _MAPS.get(path)
    mm = known[0]() if known is not None else None
    if mm is not None and not mm.closed and len(mm) >= need:
        try:
            st = os.stat(path)
        except FileNotFoundError:
            raise CorruptionError(f"SIPC data file {path} does not exist", path=path) from None
        if (st.st_dev, st.st_ino) == known[1]:
            return pa.py_buffer(mm)
    return _map_file(path, need)


class _Reader:
    def __init__(self, path: str, layout: dict[str, Any], verify: bool) -> None:
        self.path = path
        self.verify = verify
        files = layout.get("files")
        if not isinstance(files, list):
            raise CorruptionError(f"SIPC table file {path}: layout has no file list", path)
        self.maps = [_map(f["path"], int(f["size"])) for f in files]
        self.layout = layout
        self.dict_nodes = layout.get("dictionaries", [])
        self.dicts: dict[tuple[int, str], pa.Array] = {}

    def buffer(self, ref: list[int] | None) -> pa.Buffer | None:
        if ref is None:
            return None
        file_id, offset, length = ref[0], ref[1], ref[2]
        if file_id == -1:
            return pa.py_buffer(b"")
        if not (0 <= file_id < len(self.maps)) or offset < 0 or length < 0:
            raise CorruptionError(f"SIPC table file {self.path}: bad buffer reference {ref}")
        whole = self.maps[file_id]
        if offset + length > whole.size:
            raise CorruptionError(
                f"SIPC table file {self.path}: buffer [{offset}, {offset + length}) lies beyond "
                f"the {whole.size} bytes of {self.layout['files'][file_id]['path']}",
                path=self.layout["files"][file_id]["path"],
                offset=whole.size,
            )
        buf = whole.slice(offset, length)
        if self.verify and len(ref) > 3 and zlib.crc32(memoryview(buf)) != ref[3]:
            raise CorruptionError(
                f"SIPC data file {self.layout['files'][file_id]['path']}: checksum mismatch in "
                f"[{offset}, {offset + length})",
                path=self.layout["files"][file_id]["path"],
                offset=offset,
            )
        return buf

    def array(self, node: dict[str, Any], typ: pa.DataType) -> pa.Array:
        if isinstance(typ, pa.ExtensionType):
            storage = self.array(node, typ.storage_type)
            return pa.ExtensionArray.from_storage(typ, storage)
        bufs = [self.buffer(b) for b in node["bufs"]]
        if pa.types.is_dictionary(typ):
            indices = pa.Array.from_buffers(
                typ.index_type, node["len"], bufs, null_count=node["nulls"], offset=node["off"]
            )
            return pa.DictionaryArray.from_arrays(
                indices, self.dictionary(node["dict"], typ.value_type), safe=False
            )
        children = None
        if "children" in node:
            fields = [typ.field(i).type for i in range(typ.num_fields)]
            if len(fields) != len(node["children"]):
                raise CorruptionError(f"SIPC table file {self.path}: child count mismatch")
            children = [self.array(c, t) for c, t in zip(node["children"], fields)]
        return pa.Array.from_buffers(
            typ, node["len"], bufs, null_count=node["nulls"], offset=node["off"], children=children
        )

    def dictionary(self, i: int, typ: pa.DataType) -> pa.Array:
        key = (i, str(typ))
        d = self.dicts.get(key)
        if d is None:
            if not (0 <= i < len(self.dict_nodes)):
                raise CorruptionError(f"SIPC table file {self.path}: bad dictionary {i}")
            d = self.array(self.dict_nodes[i], typ)
            self.dicts[key] = d
        return d


def read_table(path: str | os.PathLike, *, verify: bool = False) -> pa.Table:
    """Maps the table written at ``path`` (a ``.sipc`` file) and returns it without copying its
    data. The maps are read-only: writing into the table's buffers faults. ``verify`` checks the
    per-buffer CRC-32s (when the table was written with ``checksums=True``)."""
    path = os.fspath(path)
    _, schema, layout = _read_layout(path)
    r = _Reader(path, layout, verify)
    columns = layout.get("columns", [])
    if len(columns) != len(schema):
        raise CorruptionError(
            f"SIPC table file {path}: {len(columns)} columns in the layout, {len(schema)} in the "
            "schema",
            path=path,
        )
    rows = layout.get("num_rows")
    if not columns:
        # No column carries the length: a table of rows without columns (``t.select([])``)
        # takes it from the layout. A null column has no buffers, so a damaged count
        # allocates nothing.
        if isinstance(rows, bool) or not isinstance(rows, int) or not 0 <= rows < 1 << 63:
            raise CorruptionError(f"SIPC table file {path}: bad row count {rows!r}", path=path)
        carrier = pa.Array.from_buffers(pa.null(), rows, [None])
        return pa.table({"_": carrier}).replace_schema_metadata(schema.metadata).select([])
    try:
        arrays = [
            pa.chunked_array([r.array(n, f.type) for n in chunks], type=f.type)
            for chunks, f in zip(columns, schema)
        ]
        table = pa.Table.from_arrays(arrays, schema=schema)
    except (pa.ArrowException, KeyError, TypeError, ValueError) as e:
        if isinstance(e, CorruptionError):
            raise
        raise CorruptionError(f"SIPC table file {path}: cannot rebuild the table: {e}", path)
    if table.num_rows != rows:
        raise CorruptionError(f"SIPC table file {path}: row count mismatch", path=path)
    return table


def file_bytes(path: str) -> int:
    """Bytes a file occupies (tmpfs: resident, or swapped) — allocated blocks, not its length."""
    return os.stat(path).st_blocks * 512

"""Column store: one Parquet file per column, in the directory of the device it is placed on.

Layout (see docs/formats/mosaic.md)::

    ROOT/manifest.json                    which file holds each column, with its size and SHA-256
    DEVICE_DIR/TABLE/COLUMN.gN.parquet    column file written in generation N

DuckDB reads the tables through views (``POSITIONAL JOIN`` of a table's column files), so queries
run unchanged; a scan reads only the files of the columns it projects.

Migration to a new placement writes each moved column's new file, fsyncs it and its directory,
then replaces the manifest atomically (temporary file, fsync, rename, fsync of the root), and
only then deletes the old files. Interrupted before the rename, the old manifest still names the
old files, which are untouched; after it, the new files are complete. Either way every column is
readable, and ``gc`` removes files no manifest names.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path

from attune.errors import CorruptionError, InvalidArgumentError, StorageIOError
from attune.placement.devices import Device
from attune.placement.model import Column, Placement

MANIFEST = "manifest.json"
FORMAT = "attune-mosaic"
VERSION = 1
#: Rows per Parquet row group: the chunk of the source's retriever (it uses 5M values).
ROW_GROUP_ROWS = 1_000_000


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _body_checksum(body: dict) -> str:
    return hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()


@dataclass
class Store:
    root: Path
    manifest: dict

    @property
    def devices(self) -> dict[str, str]:
        return self.manifest["devices"]

    @property
    def columns(self) -> dict[str, dict]:
        return self.manifest["columns"]

    def placement(self) -> Placement:
        return {k: v["device"] for k, v in self.columns.items()}

    def column_path(self, key: str) -> Path:
        ent = self.columns[key]
        return Path(self.devices[ent["device"]]) / ent["file"]

    def model_columns(self) -> dict[str, Column]:
        """Columns for the cost model, sized from the files (the codec they are stored in)."""
        out = {}
        for k, ent in self.columns.items():
            t, c = k.split(".", 1)
            out[k] = Column(t, c, float(ent["raw_bytes"]), {ent["codec"]: float(ent["bytes"])})
        return out


def open_store(root: str | Path) -> Store:
    root = Path(root)
    p = root / MANIFEST
    try:
        doc = json.loads(p.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise InvalidArgumentError(f"{root}: no column store here (no {MANIFEST})") from None
    except (ValueError, UnicodeDecodeError) as e:
        raise CorruptionError(f"{p}: manifest is not JSON: {e}") from None
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise CorruptionError(f"{p}: not a {FORMAT} manifest")
    if doc.get("version") != VERSION:
        raise CorruptionError(
            f"{p}: manifest version {doc.get('version')!r}, this build reads {VERSION}"
        )
    body = doc.get("body")
    if not isinstance(body, dict) or doc.get("sha256") != _body_checksum(body):
        raise CorruptionError(f"{p}: manifest checksum mismatch")
    return Store(root, body)


def _write_manifest(root: Path, body: dict) -> None:
    doc = {"format": FORMAT, "version": VERSION, "sha256": _body_checksum(body), "body": body}
    tmp = root / (MANIFEST + ".tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(doc, f, indent=1, sort_keys=True)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, root / MANIFEST)
    _fsync_dir(root)


def _device_dirs(devices: list[Device], root: Path) -> dict[str, str]:
    out = {}
    for d in devices:
        path = Path(d.mount) if d.mount else root / "devices" / d.name
        out[d.name] = str(path.resolve())
    return out


def _write_column(con, source_sql: str, column: str, dest: Path, codec: str) -> None:
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.with_suffix(".tmp")
    comp = "uncompressed" if codec == "none" else codec
    con.execute(
        f"COPY (SELECT \"{column}\" FROM {source_sql}) TO '{tmp}' "
        f"(FORMAT parquet, COMPRESSION {comp}, ROW_GROUP_SIZE {ROW_GROUP_ROWS})"
    )
    with open(tmp, "rb+") as f:
        os.fsync(f.fileno())
    os.replace(tmp, dest)
    _fsync_dir(dest.parent)


def _raw_bytes(con, path: Path) -> int:
    r = con.execute(
        f"SELECT coalesce(sum(total_uncompressed_size), 0) FROM parquet_metadata('{path}')"
    ).fetchone()
    return int(r[0])


def create_store(
    root: str | Path,
    tables: dict[str, str],
    devices: list[Device],
    placement: Placement | None = None,
    *,
    default_device: str | None = None,
) -> Store:
    """Splits each table (name -> Parquet file) into column files on their devices."""
    import duckdb

    root = Path(root)
    if (root / MANIFEST).exists():
        raise InvalidArgumentError(f"{root}: a column store exists already")
    root.mkdir(parents=True, exist_ok=True)
    by = {d.name: d for d in devices}
    default = default_device or min(devices, key=lambda d: d.cost_ct_per_gb).name
    if default not in by:
        raise InvalidArgumentError(f"unknown device {default!r}")
    dirs = _device_dirs(devices, root)
    con = duckdb.connect()
    body: dict = {"devices": dirs, "tables": {}, "columns": {}, "generation": 1}
    for t, src in sorted(tables.items()):
        src_sql = f"read_parquet('{src}')"
        names = [r[0] for r in con.execute(f"DESCRIBE SELECT * FROM {src_sql}").fetchall()]
        rows = con.execute(f"SELECT count(*) FROM {src_sql}").fetchone()[0]
        body["tables"][t] = {"rows": int(rows), "columns": names}
        for c in names:
            key = f"{t}.{c}"
            dn = (placement or {}).get(key, default)
            if dn not in by:
                raise InvalidArgumentError(f"placement: column {key!r} on unknown device {dn!r}")
            rel = f"{t}/{c}.g1.parquet"
            dest = Path(dirs[dn]) / rel
            _write_column(con, src_sql, c, dest, by[dn].codec)
            body["columns"][key] = {
                "device": dn,
                "file": rel,
                "codec": by[dn].codec,
                "bytes": dest.stat().st_size,
                "raw_bytes": _raw_bytes(con, dest),
                "sha256": _sha256(dest),
            }
    _write_manifest(root, body)
    return Store(root, body)


def connect(store: Store, con=None):
    """A DuckDB connection with one view per table over its column files."""
    import duckdb

    con = con or duckdb.connect()
    for t, info in store.manifest["tables"].items():
        parts = []
        for c in info["columns"]:
            parts.append(f"read_parquet('{store.column_path(f'{t}.{c}')}')")
        con.execute(
            f'CREATE OR REPLACE VIEW "{t}" AS SELECT * FROM ' + " POSITIONAL JOIN ".join(parts)
        )
    return con


def verify(store: Store) -> list[str]:
    """Problems found (a missing file, a size or checksum mismatch); empty when sound."""
    problems = []
    for k, ent in sorted(store.columns.items()):
        p = store.column_path(k)
        if not p.exists():
            problems.append(f"{k}: missing file {p}")
        elif p.stat().st_size != ent["bytes"] or _sha256(p) != ent["sha256"]:
            problems.append(f"{k}: {p} does not match the manifest (size or SHA-256)")
    return problems


class _Crash(Exception):
    pass


def migrate(
    store: Store,
    placement: Placement,
    devices: list[Device],
    *,
    fail_after: int | None = None,
    progress=None,
) -> dict:
    """Moves columns to ``placement`` (write new, fsync, switch manifest, delete old).

    ``fail_after`` stops after that many new files, before the switch, as a crash would (tests).
    Returns counts of moved columns and bytes."""
    import duckdb

    by = {d.name: d for d in devices}
    for k, dn in placement.items():
        if k not in store.columns:
            raise InvalidArgumentError(f"placement: unknown column {k!r}")
        if dn not in by:
            raise InvalidArgumentError(f"placement: column {k!r} on unknown device {dn!r}")
    missing_dirs = {dn for dn in placement.values() if dn not in store.devices}
    if missing_dirs:
        store.devices.update(_device_dirs([by[n] for n in missing_dirs], store.root))
    gen = int(store.manifest["generation"]) + 1
    moves = {k: dn for k, dn in placement.items() if store.columns[k]["device"] != dn}
    con = duckdb.connect()
    new_entries = {}
    moved_bytes = 0
    for n, (k, dn) in enumerate(sorted(moves.items())):
        if fail_after is not None and n >= fail_after:
            raise _Crash(f"stopped after {n} new files (fail_after)")
        t, c = k.split(".", 1)
        src = store.column_path(k)
        rel = f"{t}/{c}.g{gen}.parquet"
        dest = Path(store.devices[dn]) / rel
        try:
            _write_column(con, f"read_parquet('{src}')", c, dest, by[dn].codec)
        except OSError as e:
            raise StorageIOError(f"migrating {k} to {dn}: {e}") from None
        new_entries[k] = {
            "device": dn,
            "file": rel,
            "codec": by[dn].codec,
            "bytes": dest.stat().st_size,
            "raw_bytes": store.columns[k]["raw_bytes"],
            "sha256": _sha256(dest),
        }
        moved_bytes += dest.stat().st_size
        if progress is not None:
            progress(k)
    old_paths = [store.column_path(k) for k in new_entries]
    body = json.loads(json.dumps(store.manifest))
    body["columns"].update(new_entries)
    body["generation"] = gen
    try:
        _write_manifest(store.root, body)
    except OSError as e:
        # the old manifest (and every old file) is still in place: the old placement stands
        raise StorageIOError(
            f"migration: writing the new manifest in {store.root}: {e}; the old placement "
            "stands (run gc to remove the new files)"
        ) from None
    store.manifest = body
    left = []
    for p in old_paths:
        try:
            p.unlink()
        except FileNotFoundError:
            pass
        except OSError:
            left.append(str(p))  # the new placement stands; gc removes it later
    return {
        "moved_columns": len(new_entries),
        "moved_bytes": moved_bytes,
        "generation": gen,
        "old_files_left": left,
    }


def gc(store: Store) -> list[str]:
    """Deletes column files under the device directories that the manifest does not name
    (left by an interrupted migration); returns their paths."""
    named = {str(store.column_path(k)) for k in store.columns}
    removed = []
    for d in set(store.devices.values()):
        base = Path(d)
        if not base.exists():
            continue
        for t in store.manifest["tables"]:
            tdir = base / t
            if not tdir.is_dir():
                continue
            for f in tdir.iterdir():
                if (f.suffix in (".parquet", ".tmp")) and str(f) not in named:
                    f.unlink()
                    removed.append(str(f))
    return sorted(removed)

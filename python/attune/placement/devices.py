"""Storage devices: the catalogue (a TOML file, or the source's Table 2.1 by default).

A device is the 5-tuple of the cost model (seek time, compression ratio, throughput, capacity,
cost per GB) plus where it lives (``mount``, a directory), how many reader threads it takes and
which Parquet codec columns on it are written with. Throughput is in bytes/s; ``model`` files
written by a calibration run (:mod:`attune.placement.emulate`) replace the nominal throughput and
seek with measured ones.

A device file looks like::

    [[device]]
    name = "nvme"
    mount = "/mnt/nvme"          # optional: where its column files go
    capacity = "40GB"            # optional in budget mode; bytes or a size with a unit
    cost_ct_per_gb = 125
    throughput = "2.10GB/s"
    seek_ms = 0.02
    readers = 4
    codec = "zstd"
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field, replace
from pathlib import Path

import tomllib

from attune.errors import InvalidArgumentError

GB = 1_000_000_000
CODECS = ("zstd", "snappy", "lz4", "gzip", "none")

_UNITS = {
    "": 1,
    "B": 1,
    "KB": 10**3,
    "MB": 10**6,
    "GB": 10**9,
    "TB": 10**12,
    "KIB": 2**10,
    "MIB": 2**20,
    "GIB": 2**30,
    "TIB": 2**40,
}


@dataclass(frozen=True)
class Device:
    """One device of the catalogue; sizes in bytes, throughput in bytes/s, seek in seconds."""

    name: str
    cost_ct_per_gb: float
    throughput: float
    seek_s: float = 0.0
    capacity: float | None = None
    readers: int = 1
    codec: str = "zstd"
    mount: str | None = None
    #: Measured throughput per codec (bytes of the stored file per second), from calibration.
    measured: dict[str, float] = field(default_factory=dict, compare=False)

    def cost_per_byte(self) -> float:
        """Cents per byte stored."""
        return self.cost_ct_per_gb / GB

    def with_capacity(self, capacity: float | None) -> Device:
        return replace(self, capacity=capacity)


#: Table 2.1 of the source: the evaluation system's four devices. Seek times are not in the table;
#: typical values are used (SSDs ~0.1 ms, 10k RPM HDDs ~4 ms plus rotation).
TABLE_2_1: tuple[Device, ...] = (
    Device("nvme", 125.0, 2.10 * GB, seek_s=0.0001, readers=4),
    Device("sata", 60.0, 0.41 * GB, seek_s=0.0002, readers=2),
    Device("raid5", 45.0, 0.32 * GB, seek_s=0.006, readers=1),
    Device("hdd", 30.0, 0.23 * GB, seek_s=0.007, readers=1),
)


def parse_size(value: object, what: str) -> float:
    """Bytes from an int/float or a string such as ``"40GB"``, ``"512 MiB"``."""
    if isinstance(value, bool):
        raise InvalidArgumentError(f"{what}: expected a size, got {value!r}")
    if isinstance(value, (int, float)):
        if value < 0 or not math.isfinite(value):
            raise InvalidArgumentError(f"{what}: size must be a finite number >= 0, got {value}")
        return float(value)
    if isinstance(value, str):
        m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*([A-Za-z]*)\s*", value)
        if m and m.group(2).upper() in _UNITS:
            return float(m.group(1)) * _UNITS[m.group(2).upper()]
        raise InvalidArgumentError(
            f"{what}: cannot read size {value!r} (use bytes or a number with B, KB, MB, GB, TB, "
            "KiB, MiB, GiB or TiB)"
        )
    raise InvalidArgumentError(f"{what}: expected a size, got {type(value).__name__}")


def parse_rate(value: object, what: str) -> float:
    """Bytes/s from a number or a string such as ``"2.1GB/s"``."""
    if isinstance(value, str) and value.strip().endswith("/s"):
        value = value.strip()[:-2]
    rate = parse_size(value, what)
    if rate <= 0:
        raise InvalidArgumentError(f"{what}: throughput must be > 0")
    return rate


_KEYS = {
    "name",
    "mount",
    "capacity",
    "cost_ct_per_gb",
    "throughput",
    "seek_ms",
    "readers",
    "codec",
    "measured",
}


def device_from_dict(raw: dict, where: str) -> Device:
    """One ``[[device]]`` table; ``where`` names it in errors."""
    if not isinstance(raw, dict):
        raise InvalidArgumentError(f"{where}: expected a table, got {type(raw).__name__}")
    unknown = sorted(set(raw) - _KEYS)
    if unknown:
        raise InvalidArgumentError(
            f"{where}: unknown key(s) {', '.join(unknown)} (known: {', '.join(sorted(_KEYS))})"
        )
    for key in ("name", "cost_ct_per_gb", "throughput"):
        if key not in raw:
            raise InvalidArgumentError(f"{where}: missing required key {key!r}")
    name = raw["name"]
    if not isinstance(name, str) or not re.fullmatch(r"[A-Za-z0-9_][A-Za-z0-9_.-]*", name):
        raise InvalidArgumentError(
            f"{where}: name must be letters, digits, '_', '-', '.', got {name!r}"
        )
    where = f"{where} ({name})"
    cost = raw["cost_ct_per_gb"]
    if isinstance(cost, bool) or not isinstance(cost, (int, float)) or cost < 0:
        raise InvalidArgumentError(f"{where}: cost_ct_per_gb must be a number >= 0, got {cost!r}")
    seek = raw.get("seek_ms", 0.0)
    if isinstance(seek, bool) or not isinstance(seek, (int, float)) or seek < 0:
        raise InvalidArgumentError(f"{where}: seek_ms must be a number >= 0, got {seek!r}")
    readers = raw.get("readers", 1)
    if isinstance(readers, bool) or not isinstance(readers, int) or readers < 1:
        raise InvalidArgumentError(f"{where}: readers must be an integer >= 1, got {readers!r}")
    codec = raw.get("codec", "zstd")
    if codec not in CODECS:
        raise InvalidArgumentError(
            f"{where}: codec must be one of {', '.join(CODECS)}, got {codec!r}"
        )
    capacity = raw.get("capacity")
    measured_raw = raw.get("measured", {})
    if not isinstance(measured_raw, dict):
        raise InvalidArgumentError(f"{where}: measured must be a table codec = rate")
    measured = {str(k): parse_rate(v, f"{where}: measured.{k}") for k, v in measured_raw.items()}
    mount = raw.get("mount")
    if mount is not None and not isinstance(mount, str):
        raise InvalidArgumentError(f"{where}: mount must be a path string")
    return Device(
        name=name,
        cost_ct_per_gb=float(cost),
        throughput=parse_rate(raw["throughput"], f"{where}: throughput"),
        seek_s=float(seek) / 1000.0,
        capacity=None if capacity is None else parse_size(capacity, f"{where}: capacity"),
        readers=readers,
        codec=codec,
        mount=mount,
        measured=measured,
    )


def load_devices(path: str | Path | None = None) -> list[Device]:
    """The catalogue in ``path`` (TOML), or Table 2.1 when ``path`` is None."""
    if path is None:
        return list(TABLE_2_1)
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InvalidArgumentError(f"device file {p}: no such file") from None
    except (OSError, UnicodeDecodeError) as e:
        raise InvalidArgumentError(f"device file {p}: cannot read: {e}") from None
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise InvalidArgumentError(f"device file {p}: not valid TOML: {e}") from None
    return devices_from_doc(doc, str(p))


def devices_from_doc(doc: dict, where: str) -> list[Device]:
    unknown = sorted(set(doc) - {"device"})
    if unknown:
        raise InvalidArgumentError(
            f"device file {where}: unknown top-level key(s) {', '.join(unknown)} "
            "(expected [[device]] tables)"
        )
    raw = doc.get("device")
    if not isinstance(raw, list) or not raw:
        raise InvalidArgumentError(f"device file {where}: no [[device]] tables")
    devices = [
        device_from_dict(d, f"device file {where}: device #{i + 1}") for i, d in enumerate(raw)
    ]
    names = [d.name for d in devices]
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise InvalidArgumentError(
            f"device file {where}: duplicate device name(s) {', '.join(dup)}"
        )
    return devices


def devices_to_toml(devices: list[Device]) -> str:
    """The catalogue as a device file that :func:`load_devices` reads back."""
    out = []
    for d in devices:
        out.append("[[device]]")
        out.append(f'name = "{d.name}"')
        if d.mount is not None:
            out.append(f"mount = {_toml_str(d.mount)}")
        if d.capacity is not None:
            out.append(f"capacity = {int(d.capacity)}")
        out.append(f"cost_ct_per_gb = {d.cost_ct_per_gb!r}")
        out.append(f"throughput = {d.throughput!r}")
        out.append(f"seek_ms = {d.seek_s * 1000.0!r}")
        out.append(f"readers = {d.readers}")
        out.append(f'codec = "{d.codec}"')
        if d.measured:
            inner = ", ".join(f"{k} = {v!r}" for k, v in sorted(d.measured.items()))
            out.append(f"measured = {{ {inner} }}")
        out.append("")
    return "\n".join(out)


def _toml_str(s: str) -> str:
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'

"""The cost model: column sizes, table scans, and the predicted scan time t_T.

Equation numbers are the source's (chapter 2):

* (2.2) ``t_{d,c} = t_seek(d) + size(c) / (cr(d) * t(d))``: the time to read column c from d;
  ``size(c) / cr(d)`` is the column's size in d's codec (measured when known, see
  :meth:`Column.size_on`), and ``t(d)`` the device's throughput in stored bytes per second.
* (2.3) ``t_T = max_d sum_{c in T} I_{d,c} * t_{d,c}``: columns on different devices are read in
  parallel, so a scan lasts as long as its slowest device.
* (2.4) ``t_total = sum_T t_T`` (times each distinct scan's multiplicity).
* (2.5) ``cost = sum_c cost(d(c)) * size(c) / cr(d(c))``.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from attune.errors import InvalidArgumentError
from attune.placement.devices import Device

#: Compression ratio assumed for a codec whose size was not measured (uncompressed / stored).
DEFAULT_RATIO = {"none": 1.0, "snappy": 2.0, "lz4": 2.0, "gzip": 3.0, "zstd": 3.0}


@dataclass(frozen=True)
class Column:
    """A column: ``table.name``, its uncompressed bytes and its measured size per codec."""

    table: str
    name: str
    raw_bytes: float
    sizes: dict[str, float] = field(default_factory=dict, compare=False, hash=False)

    @property
    def key(self) -> str:
        return f"{self.table}.{self.name}"

    def size_on(self, device: Device) -> float:
        """Bytes the column takes on ``device`` (its codec): measured, else estimated."""
        if device.codec in self.sizes:
            return self.sizes[device.codec]
        if device.codec == "none":
            return self.raw_bytes
        return self.raw_bytes / DEFAULT_RATIO[device.codec]


@dataclass(frozen=True)
class Scan:
    """One table scan: the table and the columns it reads."""

    table: str
    columns: tuple[str, ...]

    def column_keys(self) -> list[str]:
        return [f"{self.table}.{c}" for c in self.columns]


@dataclass
class Workload:
    """Queries as lists of scans, over a set of columns."""

    columns: dict[str, Column]
    queries: dict[str, list[Scan]]

    def __post_init__(self) -> None:
        for q, scans in self.queries.items():
            for s in scans:
                for k in s.column_keys():
                    if k not in self.columns:
                        raise InvalidArgumentError(
                            f"query {q}: scan of {s.table} reads unknown column {k!r}"
                        )

    def distinct_scans(self) -> Counter[Scan]:
        """Each distinct scan with its multiplicity over the workload."""
        c: Counter[Scan] = Counter()
        for scans in self.queries.values():
            c.update(scans)
        return c

    def tables(self) -> dict[str, list[str]]:
        out: dict[str, list[str]] = {}
        for col in self.columns.values():
            out.setdefault(col.table, []).append(col.key)
        return out

    def touched(self) -> set[str]:
        return {k for s in self.distinct_scans() for k in s.column_keys()}

    def access_counts(self) -> Counter[str]:
        """Per column: how many scans read it (with multiplicity)."""
        c: Counter[str] = Counter()
        for s, n in self.distinct_scans().items():
            for k in s.column_keys():
                c[k] += n
        return c

    def total_bytes(self, codec: str = "zstd") -> float:
        from attune.placement.devices import Device as _D

        probe = _D("probe", 0.0, 1.0, codec=codec)
        return sum(c.size_on(probe) for c in self.columns.values())


Placement = dict[str, str]  # column key -> device name


def check_placement(workload: Workload, devices: list[Device], placement: Placement) -> None:
    names = {d.name for d in devices}
    for k in workload.columns:
        if k not in placement:
            raise InvalidArgumentError(f"placement: column {k!r} is not placed")
    for k, d in placement.items():
        if k not in workload.columns:
            raise InvalidArgumentError(f"placement: unknown column {k!r}")
        if d not in names:
            raise InvalidArgumentError(
                f"placement: column {k!r} on unknown device {d!r} (devices: {', '.join(sorted(names))})"
            )


def throughput(device: Device) -> float:
    """t(d) in stored bytes/s: the calibrated rate for the device's codec, else the nominal one."""
    return device.measured.get(device.codec, device.throughput)


def column_time(column: Column, device: Device) -> float:
    """Equation 2.2."""
    return device.seek_s + column.size_on(device) / throughput(device)


def scan_time(
    scan: Scan, workload: Workload, devices: dict[str, Device], placement: Placement
) -> float:
    """Equation 2.3: the slowest device's share of the scan."""
    per: dict[str, float] = {}
    for k in scan.column_keys():
        d = devices[placement[k]]
        per[d.name] = per.get(d.name, 0.0) + column_time(workload.columns[k], d)
    return max(per.values(), default=0.0)


def query_times(
    workload: Workload, devices: list[Device], placement: Placement
) -> dict[str, float]:
    """Predicted I/O time of each query (sum of its scans)."""
    by = {d.name: d for d in devices}
    return {
        q: sum(scan_time(s, workload, by, placement) for s in scans)
        for q, scans in workload.queries.items()
    }


def total_time(workload: Workload, devices: list[Device], placement: Placement) -> float:
    """Equation 2.4."""
    return sum(query_times(workload, devices, placement).values())


def used_bytes(workload: Workload, devices: list[Device], placement: Placement) -> dict[str, float]:
    by = {d.name: d for d in devices}
    out = {d.name: 0.0 for d in devices}
    for k, dn in placement.items():
        out[dn] += workload.columns[k].size_on(by[dn])
    return out


def cost(workload: Workload, devices: list[Device], placement: Placement) -> float:
    """Equation 2.5, in cents."""
    by = {d.name: d for d in devices}
    return sum(
        used * by[n].cost_per_byte() for n, used in used_bytes(workload, devices, placement).items()
    )

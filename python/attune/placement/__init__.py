"""Column placement on heterogeneous storage under a capacity or a budget (Mosaic).

* :mod:`~attune.placement.devices`: the device catalogue (TOML; Table 2.1 by default);
* :mod:`~attune.placement.model`: column sizes, scans and the predicted scan time t_T;
* :mod:`~attune.placement.trace`: table scans per query, extracted from SQL with SQLGlot;
* :mod:`~attune.placement.strategies`: HOT-table, HOT-column, LOPT (HiGHS), Pareto, advice;
* :mod:`~attune.placement.store`: per-column Parquet files on device directories, migration;
* :mod:`~attune.placement.emulate`: devices on one machine (loop + blkio, or a throttled
  reader) and the calibration run.

See docs/mosaic.md.
"""

from attune.placement.devices import TABLE_2_1, Device, load_devices
from attune.placement.model import Column, Scan, Workload, query_times, total_time
from attune.placement.strategies import Result, advise, hot_column, hot_table, lopt, pareto, solve

__all__ = [
    "TABLE_2_1",
    "Column",
    "Device",
    "Result",
    "Scan",
    "Workload",
    "advise",
    "hot_column",
    "hot_table",
    "load_devices",
    "lopt",
    "pareto",
    "query_times",
    "solve",
    "total_time",
]

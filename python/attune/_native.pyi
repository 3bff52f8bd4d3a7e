"""Type stubs of the native module (crates/attune-py), checked against the build by
``make lint`` (``python -m mypy.stubtest attune._native``).

The typed fronts are ``attune`` (key-value engine), ``attune.hash``, ``attune.io`` and
``attune.workload``; the
exceptions raised here are the classes of ``attune.errors``, registered at import.
"""

from collections.abc import Callable, Iterable, Iterator
from os import PathLike
from typing import Any, Self, TypeAlias, TypeVar, final

__all__ = [
    "DB",
    "HASH_DB_OPTION_NAMES",
    "OPTION_NAMES",
    "EmbedStore",
    "HashDB",
    "Items",
    "Locator",
    "OpStream",
    "Pipe",
    "PipeRuntime",
    "PipeTransfer",
    "RequestStream",
    "Snapshot",
    "TableWriter",
    "TraceReader",
    "Transaction",
    "VipHashMap",
    "WriteBatch",
    "__version__",
    "_register_errors",
    "device_analyze",
    "device_check",
    "device_profile_config",
    "device_profile_simulated",
    "device_replay_os",
    "embed_access_stream",
    "embed_list_tables",
    "embed_load_table",
    "embed_simulate",
    "embed_verify_table",
    "hash_join",
    "io_model_info",
    "io_model_scores",
    "io_prefetch_eval",
    "io_prefetch_predict",
    "io_prefetch_samples",
    "io_prefetch_synth",
    "io_read_trace",
    "io_replay",
    "io_replay_direct",
    "io_route",
    "io_ssd_params",
    "io_write_clock_flags",
    "kv_repair",
    "pipes_gen_records",
    "pipes_sort",
    "workload_criteo",
    "workload_keys",
    "workload_mixgraph",
    "workload_trace_write",
    "workload_wiscer",
    "workload_ycsb",
]

__version__: str
OPTION_NAMES: list[str]

def _register_errors(**classes: type[BaseException]) -> None: ...

# ---- key-value engine (kv.rs) -----------------------------------------------------------------

_Bytes: TypeAlias = bytes | bytearray | memoryview | str

@final
class WriteBatch:
    def __new__(cls) -> Self: ...
    def put(self, key: _Bytes, value: _Bytes, ttl: float | None = None) -> None: ...
    def delete(self, key: _Bytes) -> None: ...
    def delete_range(self, begin: _Bytes, end: _Bytes) -> None: ...
    def expect(self, key: _Bytes, value: _Bytes | None) -> None: ...
    def clear(self) -> None: ...
    def __len__(self) -> int: ...

@final
class Transaction:
    """An optimistic transaction from ``DB.transaction()``; commits at the end of a ``with``."""
    @property
    def sequence(self) -> int: ...
    def get(self, key: _Bytes, default: Any = None) -> Any: ...
    def get_for_update(self, key: _Bytes, default: Any = None) -> Any: ...
    def __getitem__(self, key: _Bytes, /) -> bytes: ...
    def __contains__(self, key: _Bytes, /) -> bool: ...
    def put(self, key: _Bytes, value: _Bytes) -> None: ...
    def __setitem__(self, key: _Bytes, value: _Bytes, /) -> None: ...
    def delete(self, key: _Bytes) -> None: ...
    def __delitem__(self, key: _Bytes, /) -> None: ...
    def __len__(self) -> int: ...
    def commit(self) -> None: ...
    def rollback(self) -> None: ...
    def __enter__(self) -> Self: ...
    def __exit__(self, exc_type: object, _b: object, _c: object) -> bool: ...

_T_co = TypeVar("_T_co", covariant=True)

@final
class Items(Iterator[_T_co]):
    """(key, value) pairs from ``items()``, keys from ``keys()``, values from ``values()``."""
    def __iter__(self) -> Self: ...
    def __next__(self) -> _T_co: ...

@final
class Snapshot:
    @property
    def sequence(self) -> int: ...
    def get(self, key: _Bytes, default: Any = None) -> Any: ...
    def multi_get(self, keys: Iterable[_Bytes]) -> list[bytes | None]: ...
    def __getitem__(self, key: _Bytes, /) -> bytes: ...
    def __contains__(self, key: _Bytes, /) -> bool: ...
    def __iter__(self) -> Items[bytes]: ...
    def items(
        self,
        start: _Bytes | None = None,
        end: _Bytes | None = None,
        reverse: bool = False,
        prefix: _Bytes | None = None,
    ) -> Items[tuple[bytes, bytes]]: ...
    def keys(
        self,
        start: _Bytes | None = None,
        end: _Bytes | None = None,
        reverse: bool = False,
        prefix: _Bytes | None = None,
    ) -> Items[bytes]: ...
    def values(
        self,
        start: _Bytes | None = None,
        end: _Bytes | None = None,
        reverse: bool = False,
        prefix: _Bytes | None = None,
    ) -> Items[bytes]: ...
    def release(self) -> None: ...
    def __enter__(self) -> Self: ...
    def __exit__(self, _a: object, _b: object, _c: object) -> None: ...

@final
class TableWriter:
    def __new__(
        cls, path: str | bytes | PathLike[str] | PathLike[bytes], **options: object
    ) -> Self: ...
    def put(self, key: _Bytes, value: _Bytes) -> None: ...
    def delete(self, key: _Bytes) -> None: ...
    def finish(self) -> dict[str, Any]: ...
    def abandon(self) -> None: ...
    @property
    def entries(self) -> int: ...
    @property
    def path(self) -> str: ...
    @property
    def finished(self) -> bool: ...
    def __enter__(self) -> Self: ...
    def __exit__(
        self, exc_type: object = None, _exc: object = None, _tb: object = None
    ) -> bool: ...

@final
class DB:
    def __new__(
        cls,
        path: str | bytes | PathLike[str] | PathLike[bytes],
        compaction_filter: Callable[[int, bytes, bytes], object] | None = None,
        **options: bool | float | str,
    ) -> Self: ...
    def put(
        self, key: _Bytes, value: _Bytes, sync: bool = False, ttl: float | None = None
    ) -> None: ...
    def get(self, key: _Bytes, default: Any = None) -> Any: ...
    def multi_get(self, keys: Iterable[_Bytes]) -> list[bytes | None]: ...
    def delete(self, key: _Bytes, sync: bool = False) -> None: ...
    def delete_range(self, begin: _Bytes, end: _Bytes, sync: bool = False) -> None: ...
    def write(self, batch: WriteBatch, sync: bool = False) -> None: ...
    def compare_and_set(
        self, key: _Bytes, expected: _Bytes | None, value: _Bytes | None, sync: bool = False
    ) -> bool: ...
    def transaction(self, sync: bool = False) -> Transaction: ...
    def __getitem__(self, key: _Bytes, /) -> bytes: ...
    def __setitem__(self, key: _Bytes, value: _Bytes, /) -> None: ...
    def __delitem__(self, key: _Bytes, /) -> None: ...
    def __contains__(self, key: _Bytes, /) -> bool: ...
    def __iter__(self) -> Items[bytes]: ...
    def items(
        self,
        start: _Bytes | None = None,
        end: _Bytes | None = None,
        reverse: bool = False,
        prefix: _Bytes | None = None,
    ) -> Items[tuple[bytes, bytes]]: ...
    def keys(
        self,
        start: _Bytes | None = None,
        end: _Bytes | None = None,
        reverse: bool = False,
        prefix: _Bytes | None = None,
    ) -> Items[bytes]: ...
    def values(
        self,
        start: _Bytes | None = None,
        end: _Bytes | None = None,
        reverse: bool = False,
        prefix: _Bytes | None = None,
    ) -> Items[bytes]: ...
    def snapshot(self) -> Snapshot: ...
    def flush(self) -> None: ...
    def compact(self, start: _Bytes | None = None, end: _Bytes | None = None) -> None: ...
    def verify(self) -> dict[str, int]: ...
    def try_catch_up(self) -> dict[str, int]: ...
    @property
    def secondary(self) -> bool: ...
    def checkpoint(
        self, path: str | bytes | PathLike[str] | PathLike[bytes], seal_value_log: bool = False
    ) -> dict[str, int]: ...
    def gc(self, ratio: float | None = None) -> dict[str, int]: ...
    def ingest(
        self,
        paths: str
        | bytes
        | PathLike[str]
        | PathLike[bytes]
        | list[str | bytes | PathLike[str] | PathLike[bytes]]
        | tuple[str | bytes | PathLike[str] | PathLike[bytes], ...],
        move: bool = False,
    ) -> dict[str, Any]: ...
    def learn_all(self) -> int: ...
    def set_block_cache_capacity(self, capacity_bytes: int) -> None: ...
    def stats(self) -> dict[str, Any]: ...
    @property
    def path(self) -> str: ...
    @property
    def closed(self) -> bool: ...
    def close(self) -> None: ...
    def __enter__(self) -> Self: ...
    def __exit__(self, _a: object, _b: object, _c: object) -> None: ...

# ---- Plush hash table (plush.rs) ---------------------------------------------------------------

_Word: TypeAlias = int | bytes
HASH_DB_OPTION_NAMES: list[str]

@final
class HashDB:
    def __new__(
        cls, path: str | bytes | PathLike[str] | PathLike[bytes], **options: bool | int | str
    ) -> Self: ...
    def put(self, key: _Word, value: _Word) -> None: ...
    def get(self, key: _Word) -> bytes | None: ...
    def get_int(self, key: _Word) -> int | None: ...
    def delete(self, key: _Word) -> None: ...
    def collect_garbage(self, all: bool = False) -> int: ...
    def checkpoint(self) -> None: ...
    def verify(self) -> dict[str, int]: ...
    def stats(self) -> dict[str, Any]: ...
    @property
    def path(self) -> str: ...
    @property
    def closed(self) -> bool: ...
    def close(self) -> None: ...
    def __enter__(self) -> Self: ...
    def __exit__(self, _a: object, _b: object, _c: object) -> None: ...

# ---- VIP hashing (hash.rs) --------------------------------------------------------------------

_Learning: TypeAlias = str | int

@final
class VipHashMap:
    def __new__(
        cls,
        learning: _Learning | None = None,
        buckets: int | None = None,
        confidence: float | None = None,
        sense_fetches: int | None = None,
        learn_factor: float | None = None,
        default_factor: int | None = None,
    ) -> Self: ...
    def __len__(self) -> int: ...
    def __contains__(self, key: int, /) -> bool: ...
    def __getitem__(self, key: int, /) -> int: ...
    def __setitem__(self, key: int, value: int, /) -> None: ...
    def __delitem__(self, key: int, /) -> None: ...
    def get(self, key: int, default: Any = None) -> Any: ...
    def peek(self, key: int) -> int | None: ...
    def insert(self, key: int, value: int) -> int | None: ...
    def remove(self, key: int) -> int | None: ...
    def get_many(self, keys: Any) -> list[int | None]: ...
    def insert_many(self, keys: Any, values: Any) -> None: ...
    def displacement(self, key: int) -> int | None: ...
    def set_learning(self, learning: _Learning) -> None: ...
    @property
    def phase(self) -> str: ...
    @property
    def buckets(self) -> int: ...
    @property
    def load_factor(self) -> float: ...
    def stats(self) -> dict[str, int | float]: ...
    def items(self) -> list[tuple[int, int]]: ...

def hash_join(r_keys: Any, s_keys: Any, vip: bool = True) -> list[tuple[int, int]]: ...

# ---- workloads (workload.rs) ------------------------------------------------------------------

_OpTuple: TypeAlias = tuple[str, int, int]
_RecordTuple: TypeAlias = tuple[int, int, int, str, int]

def workload_criteo(
    tables: int,
    scale: float,
    count: int,
    seed: int = 0,
    theta: float = 1.05,
    clusters: int = 10_000,
    cluster_theta: float = 0.9,
    correlation: float = 0.8,
    pool: int = 4,
    profile: str = "zipf",
    coverage: float | None = None,
    click_logit: float | None = None,
) -> tuple[bytes, bytes, bytes, list[int]]: ...
def workload_keys(
    name: str,
    n: int,
    seed: int = 0,
    order: str = "sequential",
    start: int = 0,
    count: int | None = None,
    as_bytes: bool = False,
) -> list[int] | list[bytes]: ...

@final
class RequestStream:
    def __new__(cls, dist: str, n: int, count: int, seed: int = 0) -> Self: ...
    def take(self, k: int) -> list[int]: ...
    def remaining(self) -> int: ...

@final
class OpStream:
    def take(self, k: int) -> list[_OpTuple]: ...

def workload_ycsb(
    letter: str,
    records: int,
    operations: int,
    seed: int = 0,
    phase: str = "run",
    insert_order: str = "hashed",
    field_count: int = 10,
    field_length: int = 100,
    request_distribution: str | None = None,
) -> OpStream: ...
def workload_wiscer(
    zipf: float,
    initial_size: int,
    operations: int,
    seed: int = 0,
    fetch: float = 1.0,
    insert: float = 0.0,
    delete: float = 0.0,
    dist_shift_freq: int = 0,
    dist_shift_prct: float = 0.0,
    key_pattern: str = "random",
    key_order: str = "random",
    phase: str = "run",
) -> OpStream: ...
def workload_mixgraph(
    num: int,
    operations: int,
    seed: int = 0,
    keyrange: tuple[int, float, float, float, float] | None = None,
    key_dist: tuple[float, float] | None = None,
    mix: tuple[float, float, float] | None = None,
) -> OpStream: ...
def workload_trace_write(
    path: str,
    patterns: list[str],
    count: int,
    seed: int = 0,
    fmt: str = "bin",
    size: int = 4096,
    range_bytes: int = ...,  # 1 << 30 (2**30 bytes)
    write_fraction: float = 0.0,
    combine: str = "mixture",
    mean_gap_ns: float = 1000.0,
) -> int: ...

@final
class TraceReader:
    def __new__(cls, path: str) -> Self: ...
    def take(self, k: int) -> list[_RecordTuple]: ...

# Data Pipes (crates/attune-py/src/pipes.rs; the typed front is attune.pipes).

@final
class PipeRuntime:
    def __new__(
        cls,
        mechanism: str = "auto",
        queue_depth: int = 32,
        block_bytes: int = 131072,
        register_buffers: bool = True,
        fixed_files: bool = True,
        register_per_block: bool = True,
        sqpoll_idle_ms: int | None = None,
    ) -> Self: ...
    def report(self) -> dict[str, Any]: ...
    def pipe(
        self,
        src: Locator,
        dst: Locator,
        block_bytes: int | None = None,
        queue_depth: int | None = None,
    ) -> Pipe: ...

@final
class Locator:
    @staticmethod
    def dram(nbytes: int, huge_pages: bool = True) -> Locator: ...
    @staticmethod
    def core_cache(core: int = 0, nbytes: int | None = None) -> Locator: ...
    @staticmethod
    def pmem(path: str | PathLike[str], nbytes: int) -> Locator: ...
    @staticmethod
    def file(
        path: str | PathLike[str],
        direct: bool = False,
        write: bool = False,
        create: bool = False,
        truncate: bool = False,
    ) -> Locator: ...
    @property
    def kind(self) -> str: ...
    @property
    def huge_pages(self) -> bool: ...
    def size(self) -> int: ...
    def read(self, offset: int, length: int) -> bytes: ...
    def write(self, offset: int, data: bytes) -> None: ...
    def sync(self) -> None: ...

@final
class Pipe:
    def transfer(self, src_offset: int, dst_offset: int, length: int) -> PipeTransfer: ...
    def transfer_blocking(self, src_offset: int, dst_offset: int, length: int) -> int: ...
    def state(self) -> dict[str, Any]: ...
    def fileno(self) -> int: ...

@final
class PipeTransfer:
    def done(self) -> bool: ...
    def wait(self, timeout: float | None = None) -> int | None: ...
    def cancel(self) -> None: ...
    @property
    def bytes_done(self) -> int: ...

def pipes_sort(
    input: str | PathLike[str],
    output: str | PathLike[str],
    memory_bytes: int = 268435456,
    run_bytes: int | None = None,
    fan_in: int = 4,
    merge_fan_in: int | None = None,
    merge_select: str = "heap",
    block_bytes: int | None = None,
    staging_dir: str | PathLike[str] | None = None,
    threads: int | None = None,
    double_buffering: bool = True,
    early_spill: bool = True,
    direct_io: bool = True,
    mechanism: str = "auto",
    progress: Callable[[str, int, int], Any] | None = None,
) -> dict[str, Any]: ...
def pipes_gen_records(path: str | PathLike[str], records: int, seed: int = 1) -> int: ...

@final
class EmbedStore:
    def __new__(
        cls,
        path: str,
        tables: list[str],
        cache_bytes: int = 0,
        policy: str = "ev-lfu",
        precisions: list[int] = ...,
        l1_share: float = 0.5,
        l3_share: float = 0.0,
        backend: str = "file",
    ) -> Self: ...
    def lookup(self, keys: bytes) -> bytearray: ...
    def backend(self) -> str: ...
    def drop_page_cache(self) -> None: ...
    def set_surrogates(self, table: int, map: bytes) -> None: ...
    def l3_capacity(self) -> int: ...
    def stats(self) -> dict[str, int]: ...
    def info(self) -> tuple[list[str], int, list[int], str, int, int]: ...
    def close(self) -> None: ...

def embed_load_table(
    dir: str, name: str, dim: int, values: bytes, backend: str = "file"
) -> None: ...
def embed_verify_table(dir: str, name: str, backend: str = "file") -> tuple[int, int]: ...
def embed_list_tables(dir: str, backend: str = "file") -> list[str]: ...
def embed_simulate(
    policy: str, capacity: int, tables: int, keys: bytes, warmup: int = 0
) -> tuple[int, int, int, int]: ...
def embed_access_stream(policy: str, capacity: int, keys: bytes) -> int: ...

# ---------------------------------------------------------------- attune-io (attune.io)
_TraceColumns: TypeAlias = tuple[list[int], list[int], list[int], list[bool]]

def io_read_trace(
    data: bytes, format: str | None = None
) -> tuple[list[int], list[int], list[int], list[bool], int]: ...
def io_ssd_params(params: dict[str, Any] | None = None) -> list[tuple[str, str]]: ...
def io_replay(
    columns: _TraceColumns, params: dict[str, Any] | None = None, seed: int = 0
) -> dict[str, Any]: ...
def io_replay_direct(
    columns: _TraceColumns,
    path: str | PathLike[str],
    file_bytes: int,
    pace: bool = False,
    speed: float = 1.0,
    direct: bool = True,
    overwrite: bool = False,
) -> dict[str, list[int]]: ...
def io_route(
    traces: list[_TraceColumns],
    policy: str,
    params: dict[str, Any] | None = None,
    seed: int = 0,
    timeout_ns: int = 0,
    models: list[bytes] | None = None,
    tie: float = 0.0,
    slow_factor: float = 10.0,
    probe_models: list[bytes] | None = None,
    probe_reads_us: float = 0.0,
    probe_read_size: int = 4096,
    write_clock: tuple[int, int, float, float] | None = None,
    clock_anchor_us: float = 0.0,
    aged_bytes: list[int] | None = None,
    clock_anchor_writes: bool = False,
    clock_anchor_gate: bool = False,
    clock_vote: bool = False,
) -> dict[str, Any]: ...
def io_write_clock_flags(
    trace: _TraceColumns, write_clock: tuple[int, int, float, float]
) -> list[bool]: ...
def io_model_info(data: bytes) -> dict[str, Any]: ...
def io_model_scores(data: bytes, features: bytes, n: int) -> list[float]: ...

# ---------------------------------------------------------------- device profiler (attune.device)
_Guess: TypeAlias = tuple[int, int, list[list[float]]]

def device_profile_config(config: dict[str, Any] | None = None) -> dict[str, Any]: ...
def device_profile_simulated(
    params: dict[str, Any] | None = None,
    config: dict[str, Any] | None = None,
    seed: int = 0,
    progress: Callable[[int, int], object] | None = None,
) -> dict[str, Any]: ...
def device_analyze(
    sizes: list[int],
    size_latencies_ns: list[list[float]],
    guesses: list[_Guess],
    config: dict[str, Any] | None = None,
) -> dict[str, Any]: ...
def device_check(
    file: list[int],
    offset: list[int],
    size: list[int],
    write: list[bool],
    params: dict[str, Any],
) -> dict[str, Any]: ...
def device_replay_os(
    kind: list[int],
    file: list[int],
    offset: list[int],
    size: list[int],
    bases: list[int],
    params: dict[str, Any] | None = None,
    seed: int = 0,
    write_bytes: int = 131072,
    split_bytes: int = 0,
) -> dict[str, Any]: ...
def io_prefetch_eval(
    columns: _TraceColumns,
    methods: list[str],
    model: bytes | None = None,
    measure_from: int = 0,
    delay_ms: float = 20.0,
    reads_only: bool = False,
    predictions: list[int] | None = None,
    predictions_name: str = "lstm",
) -> list[dict[str, Any]]: ...
def io_prefetch_samples(
    offsets: list[int], sizes: list[int], padding: str = "repeat"
) -> tuple[bytes, bytes]: ...
def io_prefetch_predict(model: bytes, inputs: bytes, n: int) -> list[int]: ...
def io_prefetch_synth(kind: str, n: int, jobs: int = 8, seed: int = 0) -> _TraceColumns: ...
def kv_repair(
    path: str | bytes | PathLike[str] | PathLike[bytes], **options: bool | float | str
) -> dict[str, Any]: ...

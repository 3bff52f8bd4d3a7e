"""SIPC: round trips of every supported layout, resharing by address, damage as clear errors."""

from __future__ import annotations

import os
import struct
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest

from attune.errors import CorruptionError, InvalidArgumentError, UnsupportedVersionError
from attune.pipelines import Arena, read_table, sipc, table_files, write_table


def sample() -> pa.Table:
    n = 2000
    t = pa.table(
        {
            "i": pa.array(np.arange(n, dtype=np.int64)),
            "f": pa.array([None if i % 11 == 0 else i / 3 for i in range(n)]),
            "s": pa.array([f"row-{i}" if i % 7 else None for i in range(n)]),
            "ls": pa.array([f"x{i}" for i in range(n)], pa.large_string()),
            "b": pa.array([i % 3 == 0 for i in range(n)]),
            "d": pa.array(["red", "green", "blue", "ß"] * (n // 4)).dictionary_encode(),
            "l": pa.array([[i, i + 1] if i % 5 else None for i in range(n)]),
            "st": pa.array([{"x": i, "y": str(i)} for i in range(n)]),
            "ts": pa.array(np.arange(n, dtype=np.int64).astype("datetime64[ms]")),
        }
    )
    return pa.concat_tables([t.slice(0, 700), t.slice(700)])


def test_every_supported_layout_round_trips_with_checksums(tmp_path):
    t = sample()
    st = write_table(t, tmp_path, "t", checksums=True)
    assert st.bytes_reshared == 0 and st.bytes_copied > 0
    assert read_table(st.path, verify=True).equals(t)


def test_sliced_struct_and_list_chunks_round_trip(tmp_path):
    t = sample()
    part = pa.table({"st": t["st"].chunk(1).slice(5, 50), "l": t["l"].chunk(1).slice(3, 50)})
    st = write_table(part, tmp_path, "p")
    assert read_table(st.path).equals(part)


def test_pass_through_slice_and_dropped_columns_copy_nothing(tmp_path):
    src = read_table(write_table(sample(), tmp_path, "src").path)
    out = src.slice(100, 500).drop_columns(["f", "b"])
    st = write_table(out, tmp_path, "out")
    assert st.bytes_copied == 0 and st.bytes_reshared > 0
    assert all(os.path.basename(f).startswith("src.") for f in st.files)
    assert read_table(st.path).equals(out)


def test_added_column_is_the_only_bytes_copied(tmp_path):
    src = read_table(write_table(sample(), tmp_path, "src").path)
    new = pc.multiply(src["i"], 2)
    st = write_table(src.append_column("j", new), tmp_path, "out")
    assert st.bytes_copied == sum(b.size for c in new.chunks for b in c.buffers() if b)


def test_filter_of_a_dictionary_column_reshares_the_dictionary(tmp_path):
    src = read_table(write_table(sample(), tmp_path, "src").path)
    out = src.select(["d"]).filter(pc.equal(pc.bit_wise_and(src["i"], 1), 0))
    st = write_table(out, tmp_path, "out")
    dict_bytes = sum(b.size for b in src["d"].chunk(0).dictionary.buffers() if b)
    assert st.bytes_reshared >= dict_bytes
    assert os.path.join(str(tmp_path), "src.dict") in st.files
    assert read_table(st.path).equals(out)


def test_arena_buffers_are_written_as_references(tmp_path):
    arena = Arena(tmp_path)
    values = arena.empty(1000, np.int64)
    values[:] = np.arange(1000)
    st = write_table(pa.table({"v": arena.array(values)}), tmp_path, "t")
    assert st.bytes_copied == 0 and st.bytes_reshared == 8000
    assert read_table(st.path)["v"].to_pylist() == list(range(1000))


def test_readers_map_read_only(tmp_path):
    t = read_table(write_table(pa.table({"v": np.arange(10)}), tmp_path, "t").path)
    buf = t["v"].chunk(0).buffers()[1]
    assert not buf.is_mutable


def test_mappings_leave_the_registry_when_the_table_is_gone(tmp_path):
    path = write_table(pa.table({"v": np.arange(10)}), tmp_path, "t").path
    t = read_table(path)
    n = len(sipc.mapped_ranges())
    del t
    assert len(sipc.mapped_ranges()) == n - 1


def test_table_files_names_reshared_files(tmp_path):
    src = read_table(write_table(pa.table({"a": np.arange(5)}), tmp_path, "a").path)
    st = write_table(src.append_column("b", pa.array(np.arange(5))), tmp_path, "b")
    names = sorted(os.path.basename(f) for f in table_files(st.path))
    assert names == ["a.c0", "b.c1"]


# -- damage ------------------------------------------------------------------------------------


def written(tmp_path) -> str:
    return write_table(sample(), tmp_path, "t", checksums=True).path


def test_a_short_data_file_names_the_file_and_the_lengths(tmp_path):
    path = written(tmp_path)
    col = os.path.join(tmp_path, "t.c0")
    size = os.path.getsize(col)
    os.truncate(col, size - 8)
    with pytest.raises(CorruptionError, match=rf"t\.c0 is {size - 8} bytes; the table refers to"):
        read_table(path)


def test_a_missing_data_file_is_corruption(tmp_path):
    path = written(tmp_path)
    os.unlink(os.path.join(tmp_path, "t.c2"))
    with pytest.raises(CorruptionError, match=r"t\.c2 does not exist"):
        read_table(path)


def test_a_flipped_byte_in_the_layout_fails_the_checksum(tmp_path):
    path = written(tmp_path)
    data = bytearray(Path(path).read_bytes())
    data[-5] ^= 0x20
    Path(path).write_bytes(bytes(data))
    with pytest.raises(CorruptionError, match="checksum mismatch") as e:
        read_table(path)
    assert e.value.path == path


def test_a_truncated_table_file_says_so(tmp_path):
    path = written(tmp_path)
    os.truncate(path, 40)
    with pytest.raises(CorruptionError, match="truncated"):
        read_table(path)
    os.truncate(path, 10)
    with pytest.raises(CorruptionError, match="shorter than its"):
        read_table(path)


def test_not_a_table_file_and_a_newer_version(tmp_path):
    bad = tmp_path / "x.sipc"
    bad.write_bytes(b"PAR1" + bytes(40))
    with pytest.raises(CorruptionError, match="bad magic"):
        read_table(bad)
    path = written(tmp_path)
    data = bytearray(Path(path).read_bytes())
    data[8:12] = struct.pack("<I", 99)
    Path(path).write_bytes(bytes(data))
    with pytest.raises(UnsupportedVersionError, match="version 99"):
        read_table(path)


def test_damaged_data_is_found_by_verify(tmp_path):
    path = written(tmp_path)
    with open(os.path.join(tmp_path, "t.c0"), "r+b") as f:
        f.seek(16)
        f.write(b"\xff")
    read_table(path)  # without verify the data is not read
    with pytest.raises(CorruptionError, match=r"t\.c0: checksum mismatch in \[0, "):
        read_table(path, verify=True)


def test_bad_arguments(tmp_path):
    with pytest.raises(InvalidArgumentError, match="needs a pyarrow Table"):
        write_table({"a": [1]}, tmp_path, "t")  # type: ignore[arg-type]
    with pytest.raises(InvalidArgumentError, match="bad SIPC table name"):
        write_table(pa.table({"a": [1]}), tmp_path, "../t")
    with pytest.raises(InvalidArgumentError, match="cannot share arrays of type"):
        write_table(
            pa.table({"m": pa.array([[(1, 2)]], pa.map_(pa.int8(), pa.int8()))}), tmp_path, "m"
        )
    assert os.listdir(tmp_path) == []


def test_a_file_replaced_at_the_same_path_is_mapped_anew(tmp_path):
    # The first table stays mapped (and its files unlinked) while another table is written
    # under the same names: reading must map the new files, not reuse the old maps.
    old = sipc.read_table(sipc.write_table(pa.table({"a": [1, 2, 3]}), tmp_path, "t").path)
    for name in os.listdir(tmp_path):
        os.unlink(tmp_path / name)
    new_path = sipc.write_table(pa.table({"a": [7, 8, 9]}), tmp_path, "t").path
    assert sipc.read_table(new_path)["a"].to_pylist() == [7, 8, 9]
    assert old["a"].to_pylist() == [1, 2, 3]

"""Splitting files with DuckDB and the `attune split` verb: round trips, bad input, refusals."""

import json

import duckdb
import pyarrow as pa
import pytest

from attune import Error
from attune.cli import main
from attune.frames import SplitError, connect, read_schema, read_split, split_arrow, split_file


def accidents_csv(path, nrows=3000):
    """Correlated columns: state -> county -> city, timezone; many repeats of long strings."""
    states = ["California", "Texas", "Florida", "New York"]
    lines = ["id,state,county,city,timezone,weather,severity"]
    for i in range(nrows):
        s = states[i % 4]
        county = f"{s} County {i % 7}"
        city = f"{county} City {i % 3}"
        tz = "US/Pacific" if s == "California" else "US/Eastern"
        weather = ["Clear", "Light Rain", "Overcast", ""][i % 4]
        lines.append(f"{i},{s},{county},{city},{tz},{weather},{i % 4 + 1}")
    path.write_text("\n".join(lines) + "\n")
    return path


def rows(table: pa.Table):
    return sorted(repr(tuple(r.values())) for r in table.to_pylist())


def as_read(path) -> pa.Table:
    return duckdb.sql(f"SELECT * FROM read_csv('{path}')").to_arrow_table()


def test_csv_round_trips_with_column_order_and_types(tmp_path):
    src = accidents_csv(tmp_path / "acc.csv")
    res = split_file(src, tmp_path / "out")
    assert res.plan.dims, "correlated strings must split"
    back = read_split(tmp_path / "out")
    orig = as_read(src)
    assert back.schema == orig.schema
    assert rows(back) == rows(orig)
    assert res.split_logical_bytes < res.input_logical_bytes
    assert res.output_bytes < res.input_bytes


def test_duckdb_storage_round_trips(tmp_path):
    src = accidents_csv(tmp_path / "acc.csv")
    split_file(src, tmp_path / "out", storage="duckdb")
    assert read_schema(tmp_path / "out")["storage"] == "duckdb"
    assert rows(read_split(tmp_path / "out")) == rows(as_read(src))
    sf = connect(tmp_path / "out")
    t = sf.table
    assert sf.execute(t.count()) == 3000


def test_parquet_input_and_approx_variant(tmp_path):
    src = accidents_csv(tmp_path / "acc.csv")
    duckdb.sql(f"COPY (SELECT * FROM read_csv('{src}')) TO '{tmp_path / 'acc.parquet'}'")
    res = split_file(tmp_path / "acc.parquet", tmp_path / "out", variant="approx")
    assert res.plan.variant == "approx"
    assert rows(read_split(tmp_path / "out")) == rows(as_read(src))


def test_nulls_in_grouped_columns_come_back_exactly(tmp_path):
    n = 4000
    city = [None if i % 5 == 0 else f"A long city name number {i % 3}" for i in range(n)]
    state = [None if i % 7 == 0 else f"A long state name {i % 2}" for i in range(n)]
    t = pa.table({"id": list(range(n)), "city": city, "state": state})
    res = split_arrow(t, tmp_path / "out")
    assert any("city" in g for g in res.plan.dims)
    back = read_split(tmp_path / "out")
    assert rows(back) == rows(t)
    assert back.column("city").null_count == t.column("city").null_count


def test_missing_file_is_a_clear_error(tmp_path):
    with pytest.raises(SplitError, match="no such file"):
        split_file(tmp_path / "nope.csv", tmp_path / "out")


def test_empty_file_is_a_clear_error(tmp_path):
    (tmp_path / "e.csv").write_text("")
    with pytest.raises(SplitError, match="empty"):
        split_file(tmp_path / "e.csv", tmp_path / "out")


def test_header_only_file_is_refused(tmp_path):
    (tmp_path / "h.csv").write_text("a,b,c\n")
    with pytest.raises(SplitError):
        split_file(tmp_path / "h.csv", tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_all_unique_columns_are_refused_with_numbers(tmp_path):
    lines = ["a,b"] + [f"{i},{i * 7}" for i in range(1000)]
    (tmp_path / "u.csv").write_text("\n".join(lines) + "\n")
    with pytest.raises(SplitError, match=r"refusing to split.*1000 rows.*bytes"):
        split_file(tmp_path / "u.csv", tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_single_column_splits_like_a_dictionary(tmp_path):
    lines = ["weather"] + [["Clear skies", "Heavy thunderstorm"][i % 2] for i in range(2000)]
    (tmp_path / "w.csv").write_text("\n".join(lines) + "\n")
    res = split_file(tmp_path / "w.csv", tmp_path / "out")
    assert res.plan.dims == [("weather",)]
    assert res.dim_rows == [2]
    assert rows(read_split(tmp_path / "out")) == rows(as_read(tmp_path / "w.csv"))


def test_mixed_types_in_a_csv_column_become_text(tmp_path):
    # The sniffer samples the start of the file; the column turns to text far later.
    lines = ["k,v"] + [f"{i % 3},{i}" for i in range(30000)] + ["1,not a number"]
    (tmp_path / "m.csv").write_text("\n".join(lines) + "\n")
    res = split_file(tmp_path / "m.csv", tmp_path / "out", narrow_keys=True)
    schema = read_schema(tmp_path / "out")
    assert {c["name"]: c["type"] for c in schema["columns"]}["v"] == "VARCHAR"
    back = read_split(tmp_path / "out")
    assert back.num_rows == 30001 == res.stats.nrows
    assert "not a number" in back.column("v").to_pylist()


@pytest.mark.parametrize(
    "text",
    [
        # DuckDB's sniffer would skip the three lines before the widest row: one row loaded.
        "a,b,c\n1,2,3\n4,5\n6,7,8,9\n",
        # ... or read every line as one text value under a delimiter that does not occur.
        "a,b,c\n1,2,3\n4,5,6\n7,8\n9,10,11\n",
    ],
)
def test_rows_with_different_field_counts_are_refused_not_mangled(tmp_path, text):
    (tmp_path / "r.csv").write_text(text)
    with pytest.raises(SplitError, match="number of fields"):
        split_file(tmp_path / "r.csv", tmp_path / "out", narrow_keys=True)
    assert not (tmp_path / "out").exists()


def test_non_utf8_text_is_a_clear_error_and_latin1_works(tmp_path):
    data = "name,city\n" + "".join(f"Jos\xe9 {i % 2},S\xe3o Paulo\n" for i in range(2000))
    (tmp_path / "l.csv").write_bytes(data.encode("latin-1"))
    with pytest.raises(SplitError, match="latin-1"):
        split_file(tmp_path / "l.csv", tmp_path / "out")
    split_file(tmp_path / "l.csv", tmp_path / "out", encoding="latin-1")
    assert "São Paulo" in read_split(tmp_path / "out").column("city").to_pylist()


def test_output_directory_must_be_new_or_empty(tmp_path):
    src = accidents_csv(tmp_path / "acc.csv", 500)
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "x").write_text("x")
    with pytest.raises(SplitError, match="not empty"):
        split_file(src, tmp_path / "out")


def test_output_path_that_is_a_file_is_refused(tmp_path):
    src = accidents_csv(tmp_path / "acc.csv", 500)
    (tmp_path / "f").write_text("x")
    with pytest.raises(SplitError, match="not a directory"):
        split_file(src, tmp_path / "f")


def test_damaged_schema_is_a_split_error(tmp_path):
    src = accidents_csv(tmp_path / "acc.csv", 500)
    split_file(src, tmp_path / "out")
    (tmp_path / "out" / "schema.json").write_text('{"format": "attune-split"}')
    with pytest.raises(SplitError, match="malformed"):
        read_split(tmp_path / "out")
    assert issubclass(SplitError, Error)


def test_cli_json_reports_groups_and_sizes(tmp_path, capsys):
    src = accidents_csv(tmp_path / "acc.csv")
    assert main(["split", str(src), "--out", str(tmp_path / "o"), "--json", "--explain"]) == 0
    obj = json.loads(capsys.readouterr().out)
    assert obj["groups"] and obj["input_bytes"] > obj["output_bytes"] > 0
    assert {"candidate", "act", "est", "action"} <= set(obj["steps"][0])


def test_cli_text_and_refusal(tmp_path, capsys):
    src = accidents_csv(tmp_path / "acc.csv")
    assert main(["split", str(src), "--out", str(tmp_path / "o"), "--explain"]) == 0
    out = capsys.readouterr().out
    assert "ACT bytes" in out and "dimension" in out and "smaller" in out
    (tmp_path / "u.csv").write_text("a\n" + "".join(f"{i}\n" for i in range(100)))
    assert main(["split", str(tmp_path / "u.csv"), "--out", str(tmp_path / "o2")]) == 1
    assert "refusing to split" in capsys.readouterr().err
    assert main(["split", str(tmp_path / "none.csv"), "--out", str(tmp_path / "o3")]) == 1


def test_fact_keeps_input_row_order_and_uses_zstd(tmp_path):
    import pyarrow.parquet as pq

    src = accidents_csv(tmp_path / "acc.csv")
    split_file(src, tmp_path / "out")
    fact = pq.read_table(tmp_path / "out" / "fact.parquet")
    assert fact.column("id").to_pylist() == list(range(3000))
    meta = pq.ParquetFile(tmp_path / "out" / "fact.parquet").metadata
    assert meta.row_group(0).column(0).compression == "ZSTD"


def test_max_dims_bounds_the_dimensions_and_round_trips(tmp_path):
    src = accidents_csv(tmp_path / "acc.csv")
    # Algorithm 6 as printed splits this table into several groups (the dependency strategy
    # finds one: city determines every grouped column).
    free = split_file(src, tmp_path / "free", narrow_keys=True, strategy="paper")
    assert len(free.plan.dims) >= 2
    res = split_file(src, tmp_path / "out", narrow_keys=True, max_dims=1, strategy="paper")
    assert len(res.plan.dims) == 1
    assert read_schema(tmp_path / "out")["max_dims"] == 1
    assert rows(read_split(tmp_path / "out")) == rows(as_read(src))
    with pytest.raises(SplitError, match="max_dims"):
        split_file(src, tmp_path / "bad", max_dims=0)


def test_cli_max_dims(tmp_path, capsys):
    src = accidents_csv(tmp_path / "acc.csv")
    args = ["split", str(src), "--out", str(tmp_path / "o"), "--json", "--narrow-keys"]
    assert main([*args, "--max-dims", "1"]) == 0
    obj = json.loads(capsys.readouterr().out)
    assert len(obj["groups"]) == 1 and obj["max_dims"] == 1

"""records.jsonl read as columns (contract.columnar) gives the records, the screening and the errors of the
line-by-line reader: the same values and types, the same records left out by kind, and where the columnar
reader cannot read a file exactly (a torn or non-JSON line, a wrong type, a newer schema) it declines and the
line reader gives its one-line error or its records. Speed and memory are benchmarks/bench_summarize.py's."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from specbench.analysis.records.load import load_run
from specbench.contract.columnar import ColumnRecords, read_columns
from specbench.contract.evidence import screen_records
from specbench.contract.schema import SCHEMA_VERSION, STATUSES, RunFormatError, read_records

pytestmark = pytest.mark.quick


def _record(i: int, **fields) -> dict:
    return {"schema": 2, "request_id": f"r{i}", "server_request_id": f"r{i}", "label": "base", "api": "generate",
            "prompt_id": f"p{i % 3}", "status": "ok", "step": 0, "target_c": 1, "start_s": 1000.0 + i, "ttft_s": 0.01,
            "e2e_s": 0.5, "output_tokens": 3, "max_tokens": 8, "chunk_ms": [10.0, 20.5, 31.25],
            "chunk_tokens": [1, 2, 3], "spec": None, "error": None, **fields}


def _write(path, rows) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows))


def _line_records(monkeypatch, path):
    with monkeypatch.context() as m:
        m.setattr("specbench.contract.schema.read_columns", lambda *args: None)
        return read_records(path)


def _same(a, b) -> bool:
    if isinstance(a, float):
        return type(b) is float and (a.hex() == b.hex() or (math.isnan(a) and math.isnan(b)))
    return type(a) is type(b) and a == b


def _rows():
    return [_record(0, finish_reason="stop"),
            _record(1, chunk_ms=[0.001, 4.4175, 70000.25], chunk_tokens=[2, 2, 300], output_tokens=300, max_tokens=512,
                    spec={"verify_ct": 2, "accept_length": 1.5}),
            _record(2, chunk_ms=[], chunk_tokens=[], output_tokens=0, status="http_error", error="HTTP 503",
                    ttft_s=None, server_request_id=None, step=None, target_c=None),
            _record(3, answer_digest="ids:ab", start_s=-0.0, e2e_s=0.1 + 0.2),
            _record(1),  # a request twice
            _record(5, e2e_s=-1.0),  # negative
            _record(6, chunk_ms=[3.0, 2.0, 4.0]),  # backwards
            _record(7, chunk_tokens=[1, 3, 2]),  # a count that falls
            _record(8, output_tokens=9, chunk_tokens=[1, 2, 9]),  # above max_tokens 8
            _record(9, output_tokens=9, chunk_tokens=[1, 2, 9], status="bad_count"),  # not counted: kept
            _record(10, ttft_s=float("nan")),  # not finite
            _record(11, chunk_ms=[1.0, float("inf"), 2.0], e2e_s=-1.0),  # first kind wins
            _record(12, max_tokens=None, output_tokens=99, chunk_tokens=[1, 2, 99]),  # no limit: kept
            _record(13, max_tokens=None, output_tokens=40000, chunk_tokens=[1, 2, 40000], finish_reason=None)]


def test_columns_read_every_value_and_type_the_line_reader_reads(tmp_path, monkeypatch):
    path = tmp_path / "records.jsonl"
    _write(path, _rows())
    columns, torn = read_records(path)
    assert isinstance(columns, ColumnRecords) and torn == 0
    lines, _ = _line_records(monkeypatch, path)
    assert len(columns) == len(lines)
    for got, want in zip(columns, lines, strict=True):
        for key, value in want.items():
            if key in ("chunk_ms", "chunk_tokens"):
                assert len(got[key]) == len(value) and all(map(_same, value, got[key]))
                assert bool(got[key]) == bool(value)
            elif key == "spec" and value is not None:
                assert {k: v for k, v in got[key].items() if v is not None} == value
            else:
                assert _same(value, got[key]), key
        assert all(got[k] is None for k in got if k not in want)  # a field of other lines: null here
        assert got.get("nope", 7) == 7 and "nope" not in got


@pytest.mark.parametrize(("chunk_ms", "micros"), [([0.001, 4.417, 70000.25], True), ([0.0, 4.4175, 5.0], False),
                                                 ([-0.0, 1.0, 2.0], False), ([1.0, 2.0, 3e9], False)])
def test_chunk_times_held_as_microseconds_only_where_they_read_back_bit_for_bit(tmp_path, monkeypatch, chunk_ms,
                                                                               micros):
    path = tmp_path / "records.jsonl"
    _write(path, [_record(0), _record(1, chunk_ms=chunk_ms)])
    columns, _ = read_records(path)
    assert isinstance(columns, ColumnRecords) and (columns.columns.times.dtype == np.int32) == micros
    lines, _ = _line_records(monkeypatch, path)
    for got, want in zip(columns, lines, strict=True):
        assert [x.hex() for x in got["chunk_ms"]] == [x.hex() for x in want["chunk_ms"]]


def test_columns_are_screened_as_the_line_reader_screens(tmp_path, monkeypatch):
    path = tmp_path / "records.jsonl"
    _write(path, _rows())
    columns, _ = read_records(path)
    assert isinstance(columns, ColumnRecords)
    kept, left_out = screen_records(columns)
    want_kept, want_left_out = screen_records(_line_records(monkeypatch, path)[0])
    assert left_out == want_left_out == {"duplicate": 1, "non_finite_time": 2, "negative_time": 1,
                                         "reversed_chunks": 1, "impossible_tokens": 2}
    assert [r["request_id"] for r in kept] == [r["request_id"] for r in want_kept] == \
        ["r0", "r1", "r2", "r3", "r9", "r12", "r13"]


@pytest.mark.parametrize(("line", "where"), [
    ('{"schema": 2, "request_id": "r9", "start_s"', "last"),  # a torn last line: skipped and counted
    ("not json", "middle"),
    (_record(9, chunk_ms=[1.0, "2", 3.0]), "middle"),
    (_record(9, chunk_tokens=[1, True, 3]), "middle"),
    (_record(9, output_tokens=3.0), "middle"),
    (_record(9, start_s="soon"), "middle"),
    (_record(9, ttft_s="1"), "middle"),
    (_record(9, step=1.5), "middle"),
    (_record(9, status="weird"), "middle"),
    (_record(9, schema=SCHEMA_VERSION + 1), "middle"),
    (_record(9, chunk_ms=[1.0, 2.0]), "middle"),
    (_record(9, spec=[1]), "middle"),
    ({k: v for k, v in _record(9).items() if k != "e2e_s"}, "middle"),
    (_record(9, request_id=7), "middle"),
    (_record(9, chunk_tokens=[1, 2, 2**40]), "middle"),
])
def test_what_the_columns_cannot_hold_is_read_line_by_line_with_the_same_result(tmp_path, monkeypatch, line, where):
    rows = [_record(0), _record(1)]
    rows.insert(len(rows) if where == "last" else 1, line)
    run = tmp_path / "run"
    _write(run / "records.jsonl", rows)
    assert read_columns(run / "records.jsonl", SCHEMA_VERSION, STATUSES) is None

    def outcome():
        try:
            data = load_run(run)
        except RunFormatError as exc:
            return ("error", str(exc))
        return ("read", [dict(r) for r in data.records], data.skipped_lines, data.left_out)

    got = outcome()
    with monkeypatch.context() as m:
        m.setattr("specbench.contract.schema.read_columns", lambda *args: None)
        assert outcome() == got
    if where == "last":
        assert got[0] == "read" and got[2] == 1


def test_an_empty_file_has_no_records(tmp_path):
    (tmp_path / "records.jsonl").write_text("")
    assert read_records(tmp_path / "records.jsonl") == ([], 0)

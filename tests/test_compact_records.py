"""Records read for analysis are compacted (contract.compact: shared shapes, packed chunk lists) without changing a
value or its type, and a malformed chunk list is still named by the analysis' type check. Memory per record is a
benchmark's figure (benchmarks/bench_summarize.py), not asserted here. The compaction is the line-by-line reader's,
so the tests of it turn the columnar reader off (``line_reader``); tests/test_columnar_records.py tests that one."""

from __future__ import annotations

import json
from array import array

import pytest

from specbench.analysis.records.load import load_run
from specbench.contract.schema import RunFormatError, read_records


def _record(i: int, **fields) -> dict:
    return {"schema": 2, "request_id": f"r{i}", "label": "base", "api": "generate", "status": "ok",
            "start_s": 1000.0 + i, "ttft_s": 0.01, "e2e_s": 0.5, "output_tokens": 3,
            "chunk_ms": [10.0, 20.5, 31.25], "chunk_tokens": [1, 2, 3], **fields}


@pytest.fixture
def line_reader(monkeypatch):
    """read_records reads line by line, compacting (the columnar reader, contract.columnar, declines)."""
    monkeypatch.setattr("specbench.contract.schema.read_columns", lambda *args: None)


def _write(path, records) -> None:
    path.write_text("".join(json.dumps(r) + "\n" for r in records))


def test_values_survive_compaction_and_repeated_strings_are_shared(tmp_path, line_reader):
    rows = [_record(0), _record(1, chunk_ms=[1, 2.5], chunk_tokens=[2, 4], output_tokens=4),
            _record(2, chunk_tokens=[1, 2**40, 2**40 + 1])]  # beyond 32 bits: stays a list, value intact
    _write(tmp_path / "records.jsonl", rows)
    records, torn = read_records(tmp_path / "records.jsonl")
    assert torn == 0
    for got, sent in zip(records, rows, strict=True):
        assert {k: v for k, v in got.items() if not k.startswith("chunk_")} == \
            {k: v for k, v in sent.items() if not k.startswith("chunk_")}
        assert list(got["chunk_ms"]) == [float(x) for x in sent["chunk_ms"]]
        assert list(got["chunk_tokens"]) == sent["chunk_tokens"]
    assert isinstance(records[0]["chunk_ms"], array) and isinstance(records[0]["chunk_tokens"], array)
    assert isinstance(records[2]["chunk_tokens"], list)
    assert records[0]["label"] is records[1]["label"]  # one string object for a repeated value
    assert next(iter(records[0])) is next(iter(records[1]))  # and for each field name


@pytest.mark.parametrize(("field", "bad"), [("chunk_ms", [1.0, "2", 3.0]), ("chunk_ms", [1.0, True, 3.0]),
                                            ("chunk_tokens", [1, None, 3])])
def test_a_malformed_chunk_list_is_still_named(tmp_path, field, bad):
    (tmp_path / "run").mkdir()
    _write(tmp_path / "run" / "records.jsonl", [_record(0), _record(1, **{field: bad})])
    with pytest.raises(RunFormatError, match=rf"record 2 \('r1'\): '{field}' should be a list of numbers"):
        load_run(tmp_path / "run")


def test_packed_chunks_read_back_bit_for_bit_and_what_would_not_survive_packing_stays_unpacked(tmp_path, line_reader):
    rows = [_record(0, chunk_ms=[4.417, 5.618, 7.0], chunk_tokens=[2, 2, 200], output_tokens=200),  # packed
            _record(1, chunk_ms=[4.4175, 5.0], chunk_tokens=[1, 2]),  # 4 decimals: not whole microseconds
            _record(2, chunk_ms=[-0.0, 1.0], chunk_tokens=[1, 2]),  # the sign of zero is kept
            _record(3, chunk_ms=[1.0, 2.0], chunk_tokens=[1, 400]),  # a chunk of more than 255 tokens
            _record(4, chunk_ms=[1.0, 2.0], chunk_tokens=[3, 2]),  # a count that falls
            _record(5, chunk_ms=[], chunk_tokens=[], output_tokens=0, status="http_error", error="HTTP 503"),
            _record(6, chunk_ms=[70.001, 1.5, 2000.25], chunk_tokens=[1, 2, 3])]  # gaps past uint16 and back
    _write(tmp_path / "records.jsonl", rows)
    records, _ = read_records(tmp_path / "records.jsonl")
    for got, sent in zip(records, rows, strict=True):
        assert [x.hex() for x in got["chunk_ms"]] == [float(x).hex() for x in sent["chunk_ms"]]
        assert list(got["chunk_tokens"]) == sent["chunk_tokens"]
        assert isinstance(got["chunk_ms"], array) and isinstance(got["chunk_tokens"], array)
        assert dict(got) == {**sent, "chunk_ms": got["chunk_ms"], "chunk_tokens": got["chunk_tokens"]}
        assert list(got) == list(sent) and len(got) == len(sent)
    assert records[5].get("error") == "HTTP 503" and records[5].get("nope", 7) == 7 and "nope" not in records[5]
    packed = [any(type(v) is bytes for v in r._own) for r in records]
    assert packed == [True, False, False, False, False, True, True]


def test_a_repeated_field_keeps_its_own_type(tmp_path, line_reader):
    rows = [_record(0, target_rate=1.0, start_s=-0.0), _record(1, target_rate=1, start_s=5),
            _record(2, target_rate=True, send_lag_ms=None), _record(3, target_rate=-0.0, e2e_s=0.1 + 0.2),
            _record(4, target_rate=0.0, ttft_s=None)]  # start_s ... e2e_s packed beside the chunk lists
    _write(tmp_path / "records.jsonl", rows)
    records, _ = read_records(tmp_path / "records.jsonl")
    assert [repr(r["target_rate"]) for r in records] == ["1.0", "1", "True", "-0.0", "0.0"]
    for got, sent in zip(records, rows, strict=True):
        assert {k: repr(got[k]) for k in sent if not k.startswith("chunk_")} == \
            {k: repr(v) for k, v in sent.items() if not k.startswith("chunk_")}

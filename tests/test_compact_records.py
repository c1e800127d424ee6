"""Records read for analysis are compacted (contract.compact) without changing a value, and a malformed chunk list
is still named by the analysis' type check. Memory per record is a benchmark's figure
(benchmarks/bench_summarize.py), not asserted here."""

from __future__ import annotations

import json
from array import array

import pytest

from analysis.records.load import load_run
from contract.schema import RunFormatError, read_records


def _record(i: int, **fields) -> dict:
    return {"schema": 2, "request_id": f"r{i}", "label": "base", "api": "generate", "status": "ok",
            "start_s": 1000.0 + i, "ttft_s": 0.01, "e2e_s": 0.5, "output_tokens": 3,
            "chunk_ms": [10.0, 20.5, 31.25], "chunk_tokens": [1, 2, 3], **fields}


def _write(path, records) -> None:
    path.write_text("".join(json.dumps(r) + "\n" for r in records))


def test_values_survive_compaction_and_repeated_strings_are_shared(tmp_path):
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

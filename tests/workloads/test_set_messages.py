"""#70 items 6 and 11, #76: what reading a prompt set or trace says when the input is wrong. An integer of 5001
digits in any JSON reader of a user's file, an empty ``hf:`` source, an unknown set name before ``=PATH``, a cut
JSON line, and ``hf:`` without a network: each one line naming the file, the line and the field, with a near
miss beside it; through the real CLI, exit 2."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from specbench.contract.traces import TraceError, load_trace
from specbench.locustfiles.prompts import PromptError, load_prompts
from tests.conftest import REPO

LIMIT = sys.get_int_max_str_digits()  # 4300


def specbench_run(tmp_path: Path, *args: str, env: dict[str, str] | None = None) -> tuple[str, float]:
    """The one error line of ``specbench run`` (exit 2 asserted) and its seconds."""
    started = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "specbench.cli", "run", "--label", "x", "--host",
                           "http://127.0.0.1:9", *args], capture_output=True, text=True, timeout=120, cwd=tmp_path,
                          env={**os.environ, "PYTHONPATH": str(REPO), **(env or {})})
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert proc.returncode == 2 and len(lines) == 1 and lines[0].startswith("specbench: error: "), proc.stderr[-2000:]
    return lines[0], time.monotonic() - started


def _question(qid: object) -> str:
    return '{"question_id": ' + str(qid) + ', "category": "c", "turns": ["q"]}\n'


# --- item 6: an integer past Python's 4300 digits --------------------------------------------------------------

def test_a_5001_digit_integer_is_one_line_naming_file_line_and_field(tmp_path: Path) -> None:
    path = tmp_path / "p.jsonl"
    path.write_text('{"prompt": "a"}\n{"prompt": "b", "id": ' + "9" * 5001 + "}\n")
    with pytest.raises(PromptError, match=rf"p\.jsonl line 2: field 'id': a whole number of 5001 digits; at most "
                                          rf"{LIMIT} digits are read"):
        load_prompts(str(path))
    path.write_text('{"prompt": "b", "id": ' + "9" * LIMIT + "}\n")  # the near miss: read, a usable id
    assert load_prompts(str(path)).prompts[0].id == "9" * LIMIT
    shared = tmp_path / "s.json"  # ShareGPT: one document
    shared.write_text(json.dumps([{"conversations": [{"from": "human", "value": "hi"}]}])[:-1]
                      + ', {"id": -' + "1" * 5001 + "}]")
    with pytest.raises(PromptError, match=r"s\.json: value \[1\]\['id'\]: a whole number of 5001 digits"):
        load_prompts(str(shared))
    question = tmp_path / "q.jsonl"
    question.write_text(_question(1) + _question("9" * 5001))
    with pytest.raises(PromptError, match=r"q\.jsonl line 2: field 'question_id': a whole number of 5001 digits"):
        load_prompts(f"mt-bench={question}")
    question.write_text(_question(1) + _question("9" * LIMIT))
    assert len(load_prompts(f"mt-bench={question}")) == 2


def test_a_5001_digit_integer_in_a_trace_is_one_line(tmp_path: Path) -> None:
    trace = tmp_path / "t.jsonl"
    trace.write_text('{"timestamp": 0, "input_length": 600, "output_length": 3, "hash_ids": [1, ' + "7" * 5001
                     + "]}\n")
    with pytest.raises(TraceError, match=r"t\.jsonl line 1: field 'hash_ids'\[1\]: a whole number of 5001 digits"):
        load_trace(str(trace))
    trace.write_text('{"timestamp": 0, "input_length": 600, "output_length": 3, "hash_ids": [1, ' + "7" * LIMIT
                     + "]}\n")
    assert load_trace(str(trace)).rows[0].hash_ids[1] == int("7" * LIMIT)
    trace.write_text('{"timestamp": ' + "9" * 4000 + ', "input_length": 1, "output_length": 3}\n')
    with pytest.raises(TraceError) as info:  # under the digit limit, but no time: said, the echo cut short
        load_trace(str(trace))
    assert "expected 'timestamp' to be a time at or after 0" in str(info.value) and len(str(info.value)) < 300


def test_a_5001_digit_integer_through_the_cli(tmp_path: Path) -> None:
    path = tmp_path / "q.jsonl"
    path.write_text(_question("9" * 5001))
    line, _ = specbench_run(tmp_path, "--prompts", f"gsm8k={path}")
    assert f"{path} line 1: field 'question_id': a whole number of 5001 digits" in line, line
    trace = tmp_path / "t.jsonl"
    trace.write_text('{"timestamp": ' + "9" * 5001 + ', "input_length": 1, "output_length": 3}\n')
    line, _ = specbench_run(tmp_path, "--trace", str(trace))
    assert f"{trace} line 1: field 'timestamp': a whole number of 5001 digits" in line, line


# --- #76: a cut line; a set name that is not one ----------------------------------------------------------------

def test_a_cut_line_says_where_the_string_starts_once(tmp_path: Path) -> None:
    path = tmp_path / "q.jsonl"
    path.write_text(_question(1) + '{"question_id": 2, "category": "c", "turns": ["a question cut sho')
    with pytest.raises(PromptError) as info:
        load_prompts(f"spec-bench={path}")
    assert str(info.value).endswith("line 2: invalid JSON (Unterminated string starting at column 47)"), info.value
    path.write_text(_question(1) + '{"question_id": 2, "category": "c", "turns": ["q"]')  # no closing brace
    with pytest.raises(PromptError, match=r"line 2: invalid JSON \(Expecting ',' delimiter at column 51\)"):
        load_prompts(f"spec-bench={path}")
    shared = tmp_path / "s.json"
    shared.write_text('[{"conversations": [{"from": "human", "value": "cut')
    with pytest.raises(PromptError, match=r"invalid JSON \(Unterminated string starting at line 1 column 48\)"):
        load_prompts(str(shared))


def test_an_unknown_set_name_with_a_file_says_the_name_and_the_known_ones(tmp_path: Path) -> None:
    path = tmp_path / "q.jsonl"
    path.write_text(_question(1))
    line, _ = specbench_run(tmp_path, "--prompts", f"spec-bench-v2={path}")
    assert "'spec-bench-v2': not a standard set name (did you mean spec-bench? known: mt-bench, spec-bench," in line
    assert "no such file" not in line
    assert len(load_prompts(f"spec-bench={path}")) == 1  # the near miss: the name it meant
    odd = tmp_path / "a=b.jsonl"  # a user's file with '=' in its name is still a file
    odd.write_text('{"prompt": "hi"}\n')
    assert len(load_prompts(str(odd))) == 1


# --- item 11: an empty hf: source; hf: without a network ---------------------------------------------------------

def test_an_empty_hf_source_is_one_line(tmp_path: Path) -> None:
    line, _ = specbench_run(tmp_path, "--prompts", "mt-bench=hf:")
    assert "mt-bench=hf:: expected mt-bench=hf:SOURCE[#SPLIT], SOURCE a dataset on the hub" in line, line
    with pytest.raises(PromptError, match="expected speed-bench:qualitative=hf:SOURCE"):
        load_prompts("speed-bench:qualitative=hf: #test")
    with pytest.raises(PromptError, match="gsm8k=PATH"):  # the near miss: nothing after '=' at all
        load_prompts("gsm8k=")


def test_hf_without_a_network_fails_fast_and_says_how_to_prefetch(tmp_path: Path) -> None:
    """Before: 26 s of the library's retries, then its line. HF_ENDPOINT points at a closed port here, as a
    machine without a network sees the hub."""
    env = {"HF_ENDPOINT": "http://127.0.0.1:9", "HF_HOME": str(tmp_path / "hf"), "HF_HUB_OFFLINE": ""}
    line, seconds = specbench_run(tmp_path, "--prompts", "speed-bench:qualitative=hf:nvidia/SPEED-Bench", env=env)
    assert "127.0.0.1 cannot be reached" in line and "the local cache has no copy" in line, line
    assert "datasets.load_dataset('nvidia/SPEED-Bench', 'qualitative')" in line and "HF_HUB_OFFLINE=1" in line
    assert seconds < 20, seconds
    line, seconds = specbench_run(tmp_path, "--prompts", "mt-bench=hf:lmsys/mt_bench",
                                  env={**env, "HF_HUB_OFFLINE": "1"})
    assert "HF_HUB_OFFLINE is set, and the local cache has no copy" in line and seconds < 20, (line, seconds)
    folder = tmp_path / "mt"  # the near miss: a local folder needs no network, and none is probed
    (folder / "data").mkdir(parents=True)
    (folder / "data" / "test.jsonl").write_text(_question(1))
    started = time.monotonic()
    proc = subprocess.run([sys.executable, "-c", "import sys\nfrom specbench.locustfiles.prompts import load_prompts\n"
                           "print(len(load_prompts(sys.argv[1])))", f"mt-bench=hf:{folder}"], capture_output=True,
                          text=True, timeout=120, cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(REPO), **env})
    assert proc.stdout.strip() == "1" and time.monotonic() - started < 20, proc.stderr[-2000:]


def test_a_csv_field_past_the_csv_readers_limit_is_one_line(tmp_path: Path) -> None:
    """Python's CSV reader refuses a field over 131072 characters (was csv.Error with a traceback)."""
    trace = tmp_path / "b.csv"
    trace.write_text("Timestamp,Request tokens,Response tokens\n0,1,1" + " " * 131071 + "\n")
    assert load_trace(str(trace)).rows[0].output_tokens == 1
    trace.write_text("Timestamp,Request tokens,Response tokens\n0,1,1" + " " * 131072 + "\n")
    with pytest.raises(TraceError, match=r"b\.csv line 2: not a CSV row \(field larger than field limit"):
        load_trace(str(trace))

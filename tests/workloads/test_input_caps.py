"""#70 item 5: every prompt-set and trace format is read under the same caps (``contract.inputcaps``), counted as
it is decoded. Bombs (a small file standing for a huge one, in each publisher's format) go through the real CLI in
a fresh process: one line, exit 2, within seconds and a few hundred MB; near misses (just under a cap read, just
over refused) run in-process with the caps made small, so they stay fast."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from specbench.contract import inputcaps
from specbench.contract.inputcaps import MAX_INPUT_LINES
from specbench.contract.traces import TraceError, load_trace
from specbench.locustfiles.prompts import PromptError, load_prompts
from tests.conftest import REPO

# The CLI in a fresh process: its stderr, then its exit code and the peak memory (MB) of it and its children.
_PEAK = ("import resource, subprocess, sys\n"
         "p = subprocess.run(sys.argv[1:], capture_output=True, text=True)\n"
         "sys.stdout.write(p.stderr)\n"
         "print(p.returncode, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss // 1024)\n")
PEAK_MB = 400  # measured 55-185 MB (a 64 MiB line read, pyarrow or datasets loaded); the bombs stand for GBs


def refused_by_cli(tmp_path: Path, *args: str, env: dict[str, str] | None = None) -> tuple[str, int, float]:
    """The one error line of ``specbench run`` (exit 2 asserted), its peak memory in MB and its seconds."""
    started = time.monotonic()
    proc = subprocess.run([sys.executable, "-c", _PEAK, sys.executable, "-m", "specbench.cli", "run", "--label", "x",
                           "--host", "http://127.0.0.1:9", *args], capture_output=True, text=True, timeout=180,
                          cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(REPO), **(env or {})})
    seconds = time.monotonic() - started
    lines = proc.stdout.splitlines()
    code, peak = (int(x) for x in lines[-1].split())
    said = [ln for ln in lines[:-1] if ln.strip()]
    assert code == 2 and len(said) == 1 and said[0].startswith("specbench: error: "), proc.stdout[-2000:]
    assert "Traceback" not in proc.stdout
    return said[0], peak, seconds


def _gz_repeated(path: Path, chunk: bytes, times: int) -> Path:
    """A gzip file of ``chunk`` ``times`` over, as that many members (each compressed once): a bomb of GBs in KBs,
    written in milliseconds. gzip readers read the members as one stream."""
    member = gzip.compress(chunk, compresslevel=9)
    with path.open("wb") as f:
        for _ in range(times):
            f.write(member)
    return path


def _sparse(path: Path, size: int) -> Path:
    with path.open("wb") as f:  # no disk used: NUL bytes, no line end
        f.truncate(size)
    return path


def _dictionary_bomb(path: Path, rows: int, value_bytes: int) -> Path:
    """SPEED-Bench's columns, every row's one turn the same long value: a dictionary page holds it once, so the
    file is a few KB and stands for rows * value_bytes."""
    turn = pa.DictionaryArray.from_arrays(pa.array([0] * rows, pa.int32()), pa.array(["x" * value_bytes]))
    turns = pa.ListArray.from_arrays(pa.array(range(rows + 1), pa.int32()), turn)
    table = pa.table({"question_id": pa.array([str(i) for i in range(rows)]), "category": pa.array(["c"] * rows),
                      "turns": turns})
    pq.write_table(table, path, compression="zstd")
    return path


# --- bombs, one per format, through the real CLI ---------------------------------------------------------------

def test_gzip_bombs_are_refused_at_the_cap_in_constant_memory(tmp_path: Path) -> None:
    """The issue's cases: 512 MiB of newlines in a 510 KB .gz took 157 s; a 1.5 MB .jsonl.gz ended in
    MemoryError."""
    newlines = _gz_repeated(tmp_path / "HumanEval.jsonl.gz", b"\n" * 2**24, 32)
    assert newlines.stat().st_size < 2**20
    line, peak, seconds = refused_by_cli(tmp_path, "--prompts", f"humaneval={newlines}")
    assert f"HumanEval.jsonl.gz: more than {MAX_INPUT_LINES} lines; at most" in line, line
    assert peak < PEAK_MB and seconds < 60, (peak, seconds)
    spaces = _gz_repeated(tmp_path / "big.jsonl.gz", b" " * (2**24 - 1) + b"\n", 65)  # 1040 MiB in 16 MiB lines
    line, peak, seconds = refused_by_cli(tmp_path, "--prompts", f"humaneval={spaces}")
    assert "big.jsonl.gz: more than 1 GiB of text once decompressed; at most 1 GiB is read" in line, line
    assert peak < PEAK_MB and seconds < 60, (peak, seconds)
    one_line = _gz_repeated(tmp_path / "long.jsonl.gz", b"x" * 2**24, 8)  # 128 MiB, no line end
    line, peak, seconds = refused_by_cli(tmp_path, "--prompts", f"humaneval={one_line}")
    assert "long.jsonl.gz line 1: longer than 64 MiB" in line, line
    assert peak < PEAK_MB and seconds < 60, (peak, seconds)


@pytest.mark.parametrize("name", ["prompts", "mt-bench", "spec-bench", "gsm8k", "humaneval"])
def test_plain_jsonl_bombs_are_refused_at_the_cap(tmp_path: Path, name: str) -> None:
    """A user's JSONL and each standard set's .jsonl: a 900 MB line; 2,000,001 blank lines (the user's file and
    MT-Bench's: the other sets' .jsonl are read by the same function as MT-Bench's)."""
    long = _sparse(tmp_path / "long.jsonl", 900 * 2**20)
    spec = str(long) if name == "prompts" else f"{name}={long}"
    line, peak, seconds = refused_by_cli(tmp_path, "--prompts", spec)
    assert "long.jsonl line 1: longer than 64 MiB; a line is one prompt or one request" in line, line
    assert peak < PEAK_MB and seconds < 60, (peak, seconds)
    if name not in ("prompts", "mt-bench"):
        return
    blank = tmp_path / "blank.jsonl"
    blank.write_bytes(b"\n" * (MAX_INPUT_LINES + 1))
    spec = str(blank) if name == "prompts" else f"{name}={blank}"
    line, peak, seconds = refused_by_cli(tmp_path, "--prompts", spec)
    assert f"blank.jsonl: more than {MAX_INPUT_LINES} lines" in line, line
    assert peak < PEAK_MB and seconds < 60, (peak, seconds)


def test_a_parquet_dictionary_bomb_is_refused_before_it_is_decoded(tmp_path: Path) -> None:
    """The issue's case: a 2,546-byte Parquet file was read with a 4.48 GB peak. This one: 12 KB for 4.2 GB."""
    bomb = _dictionary_bomb(tmp_path / "q.parquet", 4000, 2**20)
    assert bomb.stat().st_size < 64 * 2**10
    line, peak, seconds = refused_by_cli(tmp_path, "--prompts", f"speed-bench:qualitative={bomb}")
    assert "q.parquet: more than 1 GiB of text once decoded" in line, line
    assert peak < PEAK_MB and seconds < 60, (peak, seconds)


def test_the_hf_route_sizes_the_data_files_before_the_library_decodes_them(tmp_path: Path) -> None:
    folder = tmp_path / "SPEED-Bench"
    (folder / "qualitative").mkdir(parents=True)
    _dictionary_bomb(folder / "qualitative" / "test-00000-of-00001.parquet", 4000, 2**20)
    (folder / "README.md").write_text("---\nconfigs:\n- config_name: qualitative\n  data_files:\n  - split: test\n"
                                      "    path: qualitative/*.parquet\n---\n")
    env = {"HF_HUB_OFFLINE": "1", "HF_HOME": str(tmp_path / "hf")}
    line, peak, seconds = refused_by_cli(tmp_path, "--prompts", f"speed-bench:qualitative=hf:{folder}", env=env)
    assert "test-00000-of-00001.parquet: more than 1 GiB of text once decoded" in line, line
    assert peak < PEAK_MB and seconds < 60, (peak, seconds)
    mt = tmp_path / "mt"
    (mt / "data").mkdir(parents=True)
    _gz_repeated(mt / "data" / "test.jsonl.gz", b"\n" * 2**24, 32)
    line, peak, seconds = refused_by_cli(tmp_path, "--prompts", f"mt-bench=hf:{mt}", env=env)
    assert f"test.jsonl.gz: more than {MAX_INPUT_LINES} lines" in line, line
    assert peak < PEAK_MB and seconds < 60, (peak, seconds)


def test_trace_bombs_are_refused_at_the_cap(tmp_path: Path) -> None:
    long = _sparse(tmp_path / "long.jsonl", 900 * 2**20)
    line, peak, seconds = refused_by_cli(tmp_path, "--trace", str(long), "--trace-format", "mooncake")
    assert "long.jsonl line 1: longer than 64 MiB" in line, line
    assert peak < PEAK_MB and seconds < 60, (peak, seconds)
    blank = tmp_path / "burst.csv"
    blank.write_bytes(b"Timestamp,Request tokens,Response tokens\n" + b"\n" * MAX_INPUT_LINES)
    line, peak, seconds = refused_by_cli(tmp_path, "--trace", str(blank))
    assert f"burst.csv: more than {MAX_INPUT_LINES} lines" in line, line
    assert peak < PEAK_MB and seconds < 60, (peak, seconds)


# --- near misses: just under each cap is read, just over refused (caps made small) ------------------------------

@pytest.fixture
def small_caps(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(inputcaps, "MAX_INPUT_BYTES", 4096)
    monkeypatch.setattr(inputcaps, "MAX_INPUT_LINES", 20)
    monkeypatch.setattr(inputcaps, "MAX_LINE_BYTES", 300)


def _lines(n: int, width: int = 0) -> bytes:
    """``n`` questions in FastChat's shape, each line ``width`` bytes with its line end when given."""
    out = []
    for i in range(n):
        line = json.dumps({"question_id": i, "category": "c", "turns": ["q"]})
        out.append((line + " " * max(0, width - len(line) - 1) + "\n").encode())
    return b"".join(out)


@pytest.mark.usefixtures("small_caps")
@pytest.mark.parametrize("gz", [False, True])
def test_lines_bytes_and_line_length_near_misses(tmp_path: Path, gz: bool) -> None:
    path = tmp_path / ("q.jsonl.gz" if gz else "q.jsonl")

    def load(content: bytes) -> int:
        path.write_bytes(gzip.compress(content) if gz else content)
        return len(load_prompts(f"mt-bench={path}"))

    assert load(_lines(20)) == 20
    with pytest.raises(PromptError, match=r"q\.jsonl(\.gz)?: more than 20 lines"):
        load(_lines(21))
    assert load(_lines(1, 300)) == 1
    with pytest.raises(PromptError, match=r"line 1: longer than 300 bytes"):
        load(_lines(1, 301))
    assert load(_lines(16, 256)) == 16  # 4096 bytes
    over = "more than 4 KiB of text once decompressed" if gz else "4,097 bytes; at most 4 KiB is read"
    with pytest.raises(PromptError, match=over):
        load(_lines(16, 256) + b"\n")


@pytest.mark.usefixtures("small_caps")
def test_a_users_prompt_file_and_a_trace_near_misses(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    prompts = tmp_path / "p.jsonl"
    prompts.write_text("".join(f'{{"prompt": "p{i}"}}\n' for i in range(20)))
    assert len(load_prompts(str(prompts))) == 20
    prompts.write_text(prompts.read_text() + "\n")
    with pytest.raises(PromptError, match=r"p\.jsonl: more than 20 lines"):
        load_prompts(str(prompts))
    shared = tmp_path / "s.json"  # ShareGPT: one JSON list, its entries under the same cap
    entry = {"conversations": [{"from": "human", "value": "hi"}]}
    shared.write_text(json.dumps([entry] * 20))
    assert len(load_prompts(str(shared))) == 20
    shared.write_text(json.dumps([entry] * 21))
    with pytest.raises(PromptError, match=r"s\.json: more than 20 entries"):
        load_prompts(str(shared))
    trace = tmp_path / "t.jsonl"
    rows = [json.dumps({"timestamp": i, "input_length": 1, "output_length": 1}) + "\n" for i in range(20)]
    trace.write_text("".join(rows))
    assert len(load_trace(str(trace)).rows) == 20
    trace.write_text("".join(rows) + rows[-1])
    with pytest.raises(TraceError, match=r"t\.jsonl: more than 20 lines"):
        load_trace(str(trace))
    monkeypatch.setattr(inputcaps, "MAX_LINE_BYTES", 8192)
    big = tmp_path / "b.csv"
    big.write_bytes(b"Timestamp,Request tokens,Response tokens\n" + b"0,1,1" + b" " * 4049 + b"\n")
    assert big.stat().st_size == 4096 and len(load_trace(str(big)).rows) == 1
    big.write_bytes(big.read_bytes() + b"\n")
    with pytest.raises(TraceError, match=r"b\.csv: 4,097 bytes; at most 4 KiB is read"):
        load_trace(str(big))


def test_parquet_rows_and_decoded_bytes_near_misses(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    bomb = _dictionary_bomb(tmp_path / "q.parquet", 8, 1000)
    decoded = inputcaps.check_parquet(bomb, "q", PromptError)
    assert decoded > 8 * 1000
    monkeypatch.setattr(inputcaps, "MAX_INPUT_BYTES", decoded)
    monkeypatch.setattr(inputcaps, "MAX_INPUT_LINES", 8)
    assert len(load_prompts(f"speed-bench:qualitative={bomb}")) == 8
    monkeypatch.setattr(inputcaps, "MAX_INPUT_BYTES", decoded - 1)
    with pytest.raises(PromptError, match=r"q\.parquet: more than .* of text once decoded"):
        load_prompts(f"speed-bench:qualitative={bomb}")
    monkeypatch.setattr(inputcaps, "MAX_INPUT_BYTES", decoded)
    monkeypatch.setattr(inputcaps, "MAX_INPUT_LINES", 7)
    with pytest.raises(PromptError, match=r"q\.parquet: more than 7 rows \(8\)"):
        load_prompts(f"speed-bench:qualitative={bomb}")


def test_the_hf_route_near_misses(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The data files sized before loading; the prepared rows counted before they become rows."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_DATASETS_CACHE", str(tmp_path / "hf-cache"))
    monkeypatch.setattr(inputcaps, "MAX_INPUT_LINES", 3)
    folder = tmp_path / "mt"
    (folder / "data").mkdir(parents=True)
    data = folder / "data" / "test.jsonl"
    data.write_bytes(_lines(3))
    assert len(load_prompts(f"mt-bench=hf:{folder}")) == 3
    monkeypatch.setattr(inputcaps, "MAX_INPUT_LINES", 2)
    with pytest.raises(PromptError, match=r"hf:.*mt: more than 2 rows \(3\)"):
        load_prompts(f"mt-bench=hf:{folder}")
    monkeypatch.setattr(inputcaps, "MAX_INPUT_LINES", 3)
    monkeypatch.setattr(inputcaps, "MAX_INPUT_BYTES", data.stat().st_size)
    assert len(load_prompts(f"mt-bench=hf:{folder}")) == 3
    monkeypatch.setattr(inputcaps, "MAX_INPUT_BYTES", data.stat().st_size - 1)
    with pytest.raises(PromptError, match=r"test\.jsonl: .* at most .* is read"):
        load_prompts(f"mt-bench=hf:{folder}")

"""Issue #22, analysis inputs: any bytes in a run's files, a run compared with itself and a report aimed into a
run directory are one line and exit 2, never a traceback. On main: undecodable bytes and a non-list chunk_ms
gave tracebacks, a run compared with itself gave a report, and compare-runs --out RUN_DIR wrote into it."""

from __future__ import annotations

import random
import shutil
from pathlib import Path

import pytest

from specbench.analysis.cli import main as analysis_main
from tests.analysis.synthetic_runs import small_pair, write_run
from tests.test_hardening_inputs import one_line_error, specbench


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    base_spec, spec_spec = small_pair()
    root = tmp_path_factory.mktemp("pair")
    return write_run(root / "base", base_spec), write_run(root / "spec", spec_spec)


def _one_line_exit_2(capsys: pytest.CaptureFixture[str], argv: list[str]) -> str:
    code = analysis_main(argv)
    err = capsys.readouterr().err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert code == 2 and len(lines) == 1 and lines[0].startswith("error: "), (code, err[-2000:])
    return lines[0]


@pytest.mark.parametrize("name", ["records.jsonl", "steps.jsonl", "meta.json", "server_metrics.jsonl"])
def test_random_bytes_in_a_run_file_are_one_line_or_read(tmp_path, pair, capsys, name):
    """Seeded damage anywhere in each file (bytes replaced, inserted, lines cut): read cleanly or one line."""
    rng = random.Random(22)
    for case in range(25):
        run = tmp_path / f"run{case}"
        shutil.copytree(pair[1], run)
        path = run / name
        if not path.exists():
            pytest.skip(f"the synthetic run has no {name}")
        data = bytearray(path.read_bytes())
        for _ in range(rng.randint(1, 6)):
            at = rng.randrange(len(data))
            junk = bytes(rng.choice([0x00, 0xFF, 0xC3, 0x22, 0x7B, 0x5D, 0x0A, 0x2C, 0x39, 0x80]) for _ in range(3))
            data[at:at + rng.randint(0, 3)] = junk
        path.write_bytes(bytes(data))
        code = analysis_main(["compare", str(pair[0]), str(run)])
        out = capsys.readouterr()
        assert "Traceback" not in out.err
        if code != 0:
            lines = [ln for ln in out.err.splitlines() if ln.strip()]
            assert code == 2 and len(lines) == 1 and lines[0].startswith("error: "), (case, code, out.err[-2000:])


@pytest.mark.parametrize("content", [b"\xff\xfe\x00garbage\n" * 3, b"[1, 2]\n{}\n", b"\x00" * 64 + b"\n{}\n",
                                     b'{"schema": 1, "request_id": 1, "start_s": 0, "e2e_s": 1, "status": "ok", '
                                     b'"output_tokens": 1, "chunk_ms": 5, "chunk_tokens": 5}\n{"schema": 1}\n'])
def test_bytes_that_are_no_records_are_one_line(tmp_path, pair, capsys, content):
    run = tmp_path / "bad"
    shutil.copytree(pair[1], run)
    (run / "records.jsonl").write_bytes(content)
    assert "records.jsonl" in _one_line_exit_2(capsys, ["summarize", str(run)])


def test_a_run_compared_with_itself_is_refused(tmp_path, pair, capsys):
    line = _one_line_exit_2(capsys, ["compare", str(pair[0]), str(pair[0]) + "/"])
    assert "same run directory" in line
    one_line_error(specbench("compare-runs", str(pair[0]), f"x={pair[0]}/../{pair[0].name}", cwd=tmp_path),
                   "same run directory")


def test_compare_runs_refuses_a_run_directory_as_out(tmp_path, pair, capsys):
    target = tmp_path / "target"
    shutil.copytree(pair[0], target)
    before = sorted(p.name for p in target.iterdir())
    one_line_error(specbench("compare-runs", str(pair[0]), str(pair[1]), "--out", str(target), "--overwrite",
                             cwd=tmp_path), "--out", "run directory")
    assert "run directory" in _one_line_exit_2(capsys, ["compare", str(pair[0]), str(pair[1]), "--out", str(target)])
    assert sorted(p.name for p in target.iterdir()) == before

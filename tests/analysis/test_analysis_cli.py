"""python -m specbench.analysis as a user runs it: summarize, --json, compare --out, and bad input."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from synthetic_runs import small_pair, write_run

ROOT = Path(__file__).resolve().parents[2]


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "specbench.analysis", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=120, check=False)


@pytest.fixture(scope="module")
def pair_dirs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("cli")
    base, spec = small_pair()
    return write_run(root / "base", base), write_run(root / "spec", spec)


def test_summarize_prints_the_step_table(pair_dirs: tuple[Path, Path]) -> None:
    done = run_cli("summarize", str(pair_dirs[0]))
    assert done.returncode == 0, done.stderr
    header = next(line for line in done.stdout.splitlines() if line.startswith("step"))
    for column in ("achieved C", "ok/total", "tok/s", "TTFT p50/p99 ms", "ITL p50/p99 ms", "latency avg/p50/p99 s"):
        assert column in header
    assert "Warnings: none" in done.stdout


def test_summarize_json_is_one_object_per_step(pair_dirs: tuple[Path, Path]) -> None:
    done = run_cli("summarize", str(pair_dirs[1]), "--json")
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert [s["target_c"] for s in data["steps"]] == [1, 2, 4]
    assert data["steps"][0]["accept_length"] == pytest.approx(16 / 6)  # round(16 / 2.5) = 6 verify passes
    assert data["warnings"] == []


def test_compare_prints_verdict_and_writes_outputs(pair_dirs: tuple[Path, Path], tmp_path: Path) -> None:
    out = tmp_path / "cmp"
    done = run_cli("compare", str(pair_dirs[0]), str(pair_dirs[1]), "--out", str(out), "--seed", "3")
    assert done.returncode == 0, done.stderr
    assert "Verdict: baseline wins at every tested level" in done.stdout
    assert "Recommendation: keep speculation off" in done.stdout
    assert (out / "report.md").exists() and (out / "ratio_vs_c.png").exists()
    assert json.loads((out / "comparison.json").read_text())["method"]["seed"] == 3


def test_compare_json(pair_dirs: tuple[Path, Path]) -> None:
    done = run_cli("compare", *map(str, pair_dirs), "--json", "--n-boot", "100")
    assert done.returncode == 0, done.stderr
    assert [lv["target_c"] for lv in json.loads(done.stdout)["levels"]] == [1, 2, 4]


def _assert_one_clean_error(done: subprocess.CompletedProcess[str], *fragments: str) -> None:
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("error: ") and "Traceback" not in done.stderr
    for fragment in fragments:
        assert fragment in lines[0]


def test_a_directory_that_is_not_a_run_exits_2_with_one_line(tmp_path: Path) -> None:
    _assert_one_clean_error(run_cli("summarize", str(tmp_path)), str(tmp_path), "records.jsonl")
    _assert_one_clean_error(run_cli("summarize", str(tmp_path / "missing")), "not a run directory")


def test_a_malformed_record_exits_2_naming_the_file(tmp_path: Path, pair_dirs: tuple[Path, Path]) -> None:
    bad = tmp_path / "bad"
    bad.mkdir()
    lines = (pair_dirs[0] / "records.jsonl").read_text().splitlines()
    record = json.loads(lines[3])
    record["e2e_s"] = "slow"
    (bad / "records.jsonl").write_text("\n".join([*lines[:3], json.dumps(record), *lines[4:]]) + "\n")
    _assert_one_clean_error(run_cli("compare", str(pair_dirs[0]), str(bad)), "records.jsonl", "record 4", "e2e_s")


def test_a_broken_meta_file_exits_2_naming_it(tmp_path: Path, pair_dirs: tuple[Path, Path]) -> None:
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "records.jsonl").write_text((pair_dirs[0] / "records.jsonl").read_text())
    (bad / "meta.json").write_text("{not json")
    _assert_one_clean_error(run_cli("summarize", str(bad)), "meta.json", "not valid JSON")


def test_analysis_never_imports_locust() -> None:
    code = ("import sys, analysis.cli, analysis.charts.plots, analysis.outputs; "
            "assert not [m for m in sys.modules if m.split('.')[0] == 'locust'], 'locust imported'")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    sources = (ROOT / "analysis").rglob("*.py")
    assert not [p.name for p in sources if "import locust" in p.read_text() or "from locust" in p.read_text()]

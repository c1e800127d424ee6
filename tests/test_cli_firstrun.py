"""What a user meets first on the command line (#61): one-line mistakes with a suggestion, help that reads as
text, a quiet closed pipe, the verdict first after compare-runs, compare's JSON on stdout, a report header
without pre-run figures, and a changelog whose released section is the version the command reports."""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from specbench.cli import _parser, subcommands
from specbench.contract.settings import OPTIONS, add_option
from specbench.contract.version import SUITE_VERSION
from specbench.locustfiles.target import start_emulator_process
from tests.conftest import REPO

SHORT = ["--ladder", "1,4", "--max-tokens", "32", "--min-requests", "10", "--min-step-time", "1",
         "--max-step-time", "60", "--step-ci", "0", "--no-refine"]


def specbench(*args: str, cwd: Path | None = None, timeout: float = 120.0) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "specbench.cli", *args], capture_output=True, text=True,
                          timeout=timeout, cwd=cwd)


def one_line(proc: subprocess.CompletedProcess[str]) -> str:
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(lines) == 1, (proc.returncode, proc.stderr)
    return lines[0]


@pytest.fixture(scope="module")
def compared(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, subprocess.CompletedProcess[str]]:
    """One `specbench compare --json` of a baseline and an eagle3 emulator: its report directory and process."""
    out = tmp_path_factory.mktemp("firstrun") / "report"
    with start_emulator_process("baseline", speed=50) as base, start_emulator_process("eagle3", speed=50) as spec:
        proc = specbench("compare", "--json", "--baseline", base.url, "--spec", spec.url, "--out", str(out), *SHORT,
                         timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return out, proc


def test_an_argparse_mistake_is_one_line_naming_the_command() -> None:
    line = one_line(specbench("compare", "--baseline", "http://127.0.0.1:9", "--spec", "http://127.0.0.1:9",
                              "--api", "grpc"))
    assert line.startswith("specbench compare: error: argument --api: invalid choice: 'grpc'"), line
    assert "specbench compare --help" in line
    assert one_line(specbench()).startswith("specbench: error: ")  # no command at all
    assert one_line(specbench("report")).startswith("specbench report: error: ")  # its run directory missing


def test_a_mistyped_flag_is_offered_the_closest_one(tmp_path: Path) -> None:
    run = ("run", "--host", "http://127.0.0.1:9", "--label", "x", "--out", str(tmp_path / "run"))
    assert "did you mean --ladder?" in one_line(specbench(*run, "--lader", "1,2"))  # a suite option
    assert "did you mean --verbose?" in one_line(specbench(*run, "--verbos"))  # the command's own flag
    assert "did you mean --run-time?" in one_line(specbench(*run, "--run-tme=1m"))  # Locust's, with its value
    assert "did you mean" not in one_line(specbench(*run, "--zzzzzz"))
    assert "did you mean --json?" in one_line(specbench("report", str(tmp_path), "--jsn"))
    assert not (tmp_path / "run").exists()


def test_a_closed_stdout_ends_the_command_quietly() -> None:
    proc = subprocess.Popen([sys.executable, "-m", "specbench.cli", "options"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()  # the reader is gone before the command writes a byte (`| head -0`)
    err = proc.stderr.read()
    proc.wait(timeout=60)
    assert "Traceback" not in err and "BrokenPipe" not in err, err
    assert proc.returncode in (0, 141), (proc.returncode, err)


def test_report_json_into_head_prints_no_traceback(compared) -> None:
    out, _ = compared
    # `true` reads nothing and is gone before the command prints (as `head -1` is gone before a long print ends)
    for reader in ("true", "head -c 1"):
        cmd = f"{sys.executable} -m specbench.cli report --json {out / 'baseline'} | {reader}"
        proc = subprocess.run(["bash", "-c", cmd], capture_output=True, text=True, timeout=120)
        assert "Traceback" not in proc.stderr and "Error" not in proc.stderr, (reader, proc.stderr)
    assert proc.stdout == "{"


def test_the_help_reads_as_text_with_a_line_per_command() -> None:
    top = _parser().format_help()
    assert "``" not in top and "`" not in top, top
    for name, parser in subcommands().items():
        help_text = parser.format_help()
        assert parser.description and parser.description in help_text, name
        assert "`" not in parser.description, name
        assert help_text.split("\n\n")[1].strip() == parser.description.strip(), name  # right after the usage


def test_no_empty_choice_and_the_options_usage_says_suite_options_once() -> None:
    for name in ("run", "compare"):
        help_text = subcommands()[name].format_help()
        assert "{mooncake,burstgpt,azure}" in help_text and "{," not in help_text, name
    for opt in OPTIONS:  # as plain Locust's parser gets each option
        plain = argparse.ArgumentParser(prog="locust")
        add_option(plain, opt.dest)
        assert "{," not in plain.format_usage() and ",}" not in plain.format_usage(), opt.dest
    proc = specbench("options")
    assert proc.returncode == 0
    usage = proc.stdout.split("\n\n")[0]
    assert usage.count("[suite options]") == 1 and "{," not in proc.stdout, usage


def test_compare_json_puts_the_comparison_alone_on_stdout(compared) -> None:
    out, proc = compared
    assert json.loads(proc.stdout) == json.loads((out / "comparison.json").read_text(encoding="utf-8"))
    assert "Verdict: " in proc.stderr and "step 1/2 C=1" in proc.stderr  # the job's own lines, its children's too


def test_compare_runs_leads_with_the_verdict_and_names_its_report(compared, tmp_path: Path) -> None:
    out, _ = compared
    proc = specbench("compare-runs", str(out / "baseline"), str(out / "spec"), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.strip().splitlines()
    assert lines[0].startswith("Verdict: "), lines[:3]
    made = list((tmp_path / "reports").glob("compare-runs-*/report.md"))
    assert len(made) == 1 and lines[-1].startswith(f"report: {made[0].relative_to(tmp_path)} "), lines[-1]


def test_the_report_header_holds_settings_not_pre_run_figures(compared) -> None:
    out, _ = compared
    meta = json.loads((out / "spec" / "meta.json").read_text(encoding="utf-8"))
    assert "avg_spec_accept_length" in meta["server"]["speculative"]  # the server did report a pre-run figure
    header = specbench("report", str(out / "spec")).stdout.splitlines()[0]
    assert "speculative algorithm=EAGLE3" in header and "not measured yet" not in header, header
    assert "ignore_eos on" in header and "True" not in header, header
    assert "not measured yet" not in (out / "report.md").read_text(encoding="utf-8")


def test_the_documented_docs_build_leaves_nothing_to_commit() -> None:
    proc = subprocess.run(["git", "check-ignore", "-q", "site/index.html"], cwd=REPO, timeout=30)
    assert proc.returncode == 0, "site/ (mkdocs build) is not in .gitignore"


def test_the_changelog_releases_the_version_the_command_reports() -> None:
    text = (REPO / "CHANGELOG.md").read_text(encoding="utf-8")
    sections = re.split(r"^## ", text, flags=re.M)[1:]
    assert sections[0].splitlines()[0].strip() == "Unreleased"
    released = sections[1].splitlines()[0]
    assert re.fullmatch(rf"\[?{re.escape(SUITE_VERSION)}\]? - \d{{4}}-\d\d-\d\d", released), released
    assert re.search(r"^- ", sections[1], re.M)


def test_the_user_docs_carry_no_commit_ids_or_issue_numbers() -> None:
    found = []
    for path in [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]:
        if path.name == "development.md":
            continue
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if re.search(r"(?<![\w/&#])#\d+\b", line) or re.search(r"\bsession \d+\b", line):
                found.append(f"{path.relative_to(REPO)}:{n}: {line.strip()[:80]}")
            for word in re.findall(r"\b[0-9a-f]{7,40}\b", line):
                if re.search(r"[a-f]", word) and re.search(r"\d", word):
                    found.append(f"{path.relative_to(REPO)}:{n}: {word}")
    assert not found, "\n".join(found)

"""#70: a run's meta.json read back. A number no run writes (NaN, an infinity, a setting outside its limits) is one
line naming the file and key, exit 2, never a default put silently in its place; and the report's header never
states a max_tokens the records contradict (it shows the requests' and says what meta.json holds, with the warning
``meta_contradicted``). Each case on a copy of one real run against the built-in emulator, its meta.json edited by
hand as a user would."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

RUN_SHORT = ["--ladder", "1", "--max-tokens", "16", "--min-step-time", "1", "--max-step-time", "2",
             "--warmup-time", "0", "--step-ci", "0"]


@pytest.fixture(scope="module")
def real_run(tmp_path_factory, emulator_module) -> Path:
    """One real run: every request asked for 16 tokens, and meta.json says so."""
    out = tmp_path_factory.mktemp("meta_trust") / "run"
    proc = subprocess.run([sys.executable, "-m", "specbench.cli", "run", "--label", "run", "--host",
                           emulator_module.url, "--out", str(out), *RUN_SHORT], capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-3000:]
    return out


@pytest.fixture(scope="module")
def emulator_module():
    from specbench.locustfiles.target import start_emulator_process

    emu = start_emulator_process("baseline", speed=20)
    yield emu
    emu.stop()


def _edited(real_run: Path, tmp_path: Path, old: str, new: str) -> Path:
    run = tmp_path / "run"
    shutil.copytree(real_run, run)
    meta = run / "meta.json"
    text = meta.read_text(encoding="utf-8")
    assert old in text, text
    meta.write_text(text.replace(old, new, 1), encoding="utf-8")
    return run


def _summarize(run: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "specbench.analysis", "summarize", str(run)], capture_output=True,
                          text=True, timeout=120)


@pytest.mark.parametrize(("old", "new", "line"), [
    ('"max_tokens": 16', '"max_tokens": NaN', "key 'settings.max_tokens' should be a finite number, got nan"),
    ('"max_tokens": 16', '"max_tokens": -Infinity',
     "key 'settings.max_tokens' should be a finite number, got -inf"),
    ('"max_tokens": 16', '"max_tokens": 0', "key 'settings.max_tokens': expected a number at least 1"),
    ('"started_s": ', '"started_s": Infinity, "was_started_s": ', "key 'started_s' should be a finite number, got inf"),
])
def test_a_number_no_run_writes_in_meta_json_is_one_line_naming_the_file_and_key(real_run, tmp_path, old, new, line):
    run = _edited(real_run, tmp_path, old, new)
    proc = _summarize(run)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    (said,) = proc.stderr.strip().splitlines()
    assert said.startswith(f"error: {run / 'meta.json'}: {line}"), said
    assert "Traceback" not in proc.stderr and proc.stdout == ""


def test_the_header_states_the_max_tokens_the_requests_asked_for_not_a_contradicting_meta_json(real_run, tmp_path):
    """meta.json edited to say 512 while every request asked for 16: the header says 16 and what meta.json holds,
    and the run is flagged. The near miss, the run as written (16 both): the header says 16 and nothing more."""
    proc = _summarize(real_run)
    assert proc.returncode == 0, proc.stderr
    assert "max_tokens 16, ignore_eos" in proc.stdout and "meta_contradicted" not in proc.stdout
    run = _edited(real_run, tmp_path, '"max_tokens": 16', '"max_tokens": 512')
    proc = _summarize(run)
    assert proc.returncode == 0, proc.stderr
    assert "max_tokens 16 (the requests'; meta.json says 512), ignore_eos" in proc.stdout
    assert "api generate, max_tokens 512" not in proc.stdout
    assert ("[meta_contradicted] run: meta.json says max_tokens 512, but the requests in records.jsonl asked for 16; "
            "the report shows the requests'") in proc.stdout

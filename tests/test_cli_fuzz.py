"""Issue #22: random values for every suite option, from its type and its neighbours (0, -1, huge, NaN, empty,
unicode), are either accepted or refused with one InputError line; never another exception (a traceback)."""

from __future__ import annotations

import os
import random
import signal
import subprocess
from pathlib import Path

import pytest

from specbench.contract.rundir import read_run
from specbench.contract.settings import OPTIONS
from specbench.inputs import InputError, check_load_options
from tests.conftest import REPO, locust_cmd, wait_until_or_timeout

NEIGHBOURS = ("0", "-1", "1", "1e308", "99999999999999999999", "nan", "inf", "-inf", "", " ", "²", "٣", "é",
              "1,2", "1,,2", "0.5", "-0.0", "1e-9", "\x00", "true", "10s", "1h30m", "fixed:4", "uniform:9-1",
              "normal:5,-1", "4:10", "ttft=2s", "a" * 300)
# Every option, paths and names included: a name the file system refuses (too long) is one line too.
SKIP: frozenset[str] = frozenset()


def _value(rng: random.Random, default: object) -> str:
    if isinstance(default, bool):
        return ""
    if isinstance(default, int | float) and rng.random() < 0.4:
        return str(type(default)(rng.choice([0, 1, 2, 7, 1000, 10**6])) * rng.choice([1, -1]))
    return rng.choice(NEIGHBOURS)


@pytest.mark.parametrize("seed", range(6))
def test_random_option_values_never_give_a_traceback(seed):
    rng = random.Random(2200 + seed)
    options = [o for o in OPTIONS if o.dest not in SKIP]
    accepted = 0
    for _ in range(60):
        args: list[str] = []
        for opt in rng.sample(options, rng.randint(1, 4)):
            if isinstance(opt.default, bool):
                args.append(f"--{'' if rng.random() < 0.5 else 'no-'}{opt.name}")
            else:
                args += [f"--{opt.name}={_value(rng, opt.default)}"]
        try:
            check_load_options(args)
            accepted += 1
        except InputError as exc:
            line = str(exc)
            assert "\n" not in line.strip() and line, args
            assert "--" in line or "option" in line, (args, line)  # names the flag
    assert accepted < 60  # the neighbours do find refusals


# Free-text options take any printable text; these stand for its kinds (empty, blank, non-ASCII, digits, commas,
# a leading dash, a long one), so the run test below needs a dozen runs instead of thirty.
TEXT_KINDS = ("", " ", "é", "²", "1,2", "-1", "a" * 200)


def _accepted_pairs() -> list[tuple[str, str]]:
    """Every (flag, value) from the neighbours that the checks accept on its own; flags of booleans alone."""
    pairs: list[tuple[str, str]] = []
    for opt in OPTIONS:
        if opt.refers_to:
            continue  # its value names a file, a variable or another option's input: its own tests try those
        if isinstance(opt.default, bool):
            candidates = [f"--{opt.name}", f"--no-{opt.name}"]
        else:
            plain_text = isinstance(opt.default, str) and opt.parse is None and opt.choices is None
            values = TEXT_KINDS if plain_text else (*NEIGHBOURS, "2", "7", "1000", "1000000", "-7")
            candidates = [f"--{opt.name}={v}" for v in values if "\x00" not in v]  # argv cannot carry a NUL
        for arg in candidates:
            try:
                check_load_options([arg])
                pairs.append((opt.dest, arg))
            except InputError:
                pass
    return pairs


def _pack(pairs: list[tuple[str, str]]) -> list[list[str]]:
    """Fewest command lines that together hold every accepted pair, each line still accepted as a whole."""
    runs: list[tuple[set[str], list[str]]] = []
    for dest, arg in pairs:
        for dests, args in runs:
            if dest in dests:
                continue
            try:
                check_load_options([*args, arg])
            except InputError:
                continue
            dests.add(dest)
            args.append(arg)
            break
        else:
            runs.append(({dest}, [arg]))
    return [args for _dests, args in runs]


def test_every_accepted_value_runs(emulator, tmp_path):
    """Issue #22: a value the checks accept must also run: each packed command line starts a real Locust run
    against the emulator, is stopped by a Ctrl-C at its first record (or 3 s after it started: a million-token
    request or a rate of one a year records nothing sooner) and ends with a readable run directory, no traceback."""
    emu = emulator("baseline", speed=20)
    lines = _pack(_accepted_pairs())
    assert 3 <= len(lines) <= 16, len(lines)
    for n, args in enumerate(lines):
        cwd = tmp_path / f"run{n}"
        cwd.mkdir()
        own_emulator = any(a.startswith("--emulator-speed") for a in args)
        cmd = locust_cmd(None if own_emulator else emu.url, cwd / "out", "--max-step-time", "1000", *args)
        err = _run_until_first_record(cmd, cwd)
        assert "Traceback" not in err, (args, err[-3000:])
        metas = list(cwd.rglob("meta.json"))
        assert len(metas) == 1, (args, err[-2000:])
        data = read_run(metas[0].parent)  # the contract's reader: meta, steps and every record parse
        assert data.meta.settings is not None, args


def _run_until_first_record(cmd: list[str], cwd: Path) -> str:
    """Start the run, Ctrl-C it once it has started (run directory claimed) and recorded, or after 3 s of load."""
    proc = subprocess.Popen(cmd, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONPATH": str(REPO)})
    try:
        wait_until_or_timeout(lambda: proc.poll() is not None or any(cwd.rglob("meta.json")), timeout_s=30)
        wait_until_or_timeout(lambda: proc.poll() is not None or _first_record(cwd), timeout_s=3)
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
        return proc.communicate(timeout=90)[1]
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def _first_record(cwd: Path) -> bool:
    return any(p.stat().st_size > 0 for p in cwd.rglob("records.jsonl"))

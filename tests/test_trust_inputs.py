"""Inputs that would hang, exhaust or silently mislead (#53): the one YAML loader's refusals (aliases, duplicate
keys, non-finite numbers) in every YAML the suite reads, sweep placeholders with format specs, and URLs filled
from sweep params checked like --host before use. Each refusal is one line naming the file and the key or line.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from specbench.cli import main as specbench_main
from specbench.emulator.profile import ProfileError
from specbench.emulator.profile import load_profile as load_emulator_profile
from specbench.launch import LaunchError
from specbench.sweep import SweepJob, run_sweep
from specbench.sweepfile import Sweep, SweepFileError, load_sweep
from tests.test_hardening_inputs import one_line_error, specbench


def bomb(indent: str, listed: bool) -> str:
    """Nine aliases of nine at each of nine levels: 9**9 (387 million) strings once expanded, in nine lines."""
    names = "abcdefghi"
    values = ['["lol","lol","lol","lol","lol","lol","lol","lol","lol"]',
              *(f"[{', '.join([f'*{a}'] * 9)}]" for a in names[:-1])]
    return "\n".join(f"{indent}{'- ' if listed else name + ': '}&{name} {value}"
                     for name, value in zip(names, values, strict=True))


TWO = ("configurations:\n  - {name: a, baseline: true, url: 'http://127.0.0.1:1'}\n"
       "  - {name: b, url: 'http://127.0.0.1:2'}\n")


def _write(tmp_path: Path, text: str, name: str = "in.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def _sweep_error(path: Path) -> str:
    with pytest.raises(SweepFileError) as info:
        load_sweep(path)
    message = str(info.value)
    assert "\n" not in message and str(path) in message, message
    return message


# -- aliases --------------------------------------------------------------------------------------------------

LOAD_AND_TIME = """import sys, time
from {module} import {func} as load
start = time.process_time()
try:
    load(sys.argv[1])
except ValueError as exc:
    print(f"{{time.process_time() - start:.3f}}", str(exc), sep="\\n")
"""


@pytest.mark.parametrize(("module", "func", "text"), [
    # The bomb under params: the old reader printed the expanded value in its error message.
    ("specbench.sweepfile", "load_sweep", "params:\n  x:\n" + bomb("    ", False) + "\n" + TWO),
    # The bomb as a suite profile's ladder: the old reader joined the expanded list into one string.
    ("specbench.contract.settings", "load_profile", "ladder:\n" + bomb("  ", True) + "\n"),
    ("specbench.emulator.profile", "load_profile", "base: baseline\nbomb:\n" + bomb("  ", False) + "\n"),
])
def test_an_alias_bomb_is_refused_in_well_under_a_second_of_cpu(tmp_path: Path, module: str, func: str,
                                                                text: str) -> None:
    """In a child with a deadline: before the fix the sweep and suite profile readers expanded the bomb and ran
    until killed (a timeout here), the emulator's printed a ProfileError only after its own checks."""
    path = _write(tmp_path, text)
    proc = subprocess.run([sys.executable, "-c", LOAD_AND_TIME.format(module=module, func=func), str(path)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and proc.stdout, proc.stderr[-2000:]
    cpu, message, *rest = proc.stdout.splitlines()
    assert not rest and float(cpu) < 1.0, proc.stdout[:2000]  # measured: about 1 ms
    assert str(path) in message and "line " in message and "aliases" in message, message


def test_an_alias_bomb_in_a_sweep_file_is_one_line_from_the_cli(tmp_path: Path) -> None:
    path = _write(tmp_path, "params:\n  x: &x [1, 2]\n  y: *x\n" + TWO)
    proc = specbench("sweep", str(path), "--out", str(tmp_path / "out"), cwd=tmp_path)
    one_line_error(proc, str(path), "line 3", "aliases")
    assert not (tmp_path / "out").exists()


def test_merge_keys_are_refused(tmp_path: Path) -> None:
    message = _sweep_error(_write(tmp_path, "params:\n  <<: {x: 1}\n" + TWO))
    assert "line 2" in message and "merge keys" in message


# -- duplicate keys -------------------------------------------------------------------------------------------

def test_duplicate_keys_in_a_sweep_file_are_named_with_their_line(tmp_path: Path) -> None:
    """Before the fix the second ready_timeout_s silently won."""
    message = _sweep_error(_write(tmp_path, "ready_timeout_s: 60\n" + TWO + "ready_timeout_s: 5\n"))
    assert "line 5" in message and "key 'ready_timeout_s'" in message and "first at line 1" in message


def test_duplicate_keys_inside_an_entry_are_named_with_their_path(tmp_path: Path) -> None:
    text = TWO.replace("{name: b, url:", "{name: b, name: c, url:")
    message = _sweep_error(_write(tmp_path, text))
    assert "line 3" in message and "key 'configurations[1].name'" in message


def test_duplicate_keys_in_a_suite_profile_are_one_line_from_the_cli(tmp_path: Path) -> None:
    path = _write(tmp_path, "max-tokens: 32\nladder: 1,2\nmax-tokens: 64\n")
    proc = specbench("run", "--host", "http://127.0.0.1:9", "--label", "x", "--suite-config", str(path),
                     cwd=tmp_path)
    one_line_error(proc, str(path), "line 3", "key 'max-tokens'", "given twice")


def test_duplicate_keys_in_an_emulator_profile_are_refused(tmp_path: Path) -> None:
    path = _write(tmp_path, "base: baseline\nstep_a_ms: 5\nstep_a_ms: 6\n")
    with pytest.raises(ProfileError, match=r"line 3: key 'step_a_ms': given twice") as info:
        load_emulator_profile(str(path))
    assert str(path) in str(info.value)


# -- non-finite numbers ---------------------------------------------------------------------------------------

@pytest.mark.parametrize(("text", "key"), [
    ("ready_timeout_s: .inf\n" + TWO, "ready_timeout_s"),
    ("stop_timeout_s: .nan\n" + TWO, "stop_timeout_s"),
    (TWO.replace("url: 'http://127.0.0.1:2'}", "url: 'http://127.0.0.1:2', ready: {timeout_s: -.Inf}}"),
     "configurations[1].ready.timeout_s"),
    (TWO.replace("url: 'http://127.0.0.1:2'}", "url: 'http://127.0.0.1:2', ready: {interval_s: .NaN}}"),
     "configurations[1].ready.interval_s"),
])
def test_non_finite_timeouts_are_refused_with_the_key(tmp_path: Path, text: str, key: str) -> None:
    """Before the fix .inf passed "> 0" (a sweep waiting for ever) and .nan passed every comparison."""
    message = _sweep_error(_write(tmp_path, text))
    assert f"key '{key}'" in message and "not a finite number" in message, message


def test_non_finite_numbers_in_an_emulator_profile_name_the_key(tmp_path: Path) -> None:
    path = _write(tmp_path, "base: baseline\nspeculative:\n  acceptance_rate: .nan\n")
    with pytest.raises(ProfileError, match=r"line 3: key 'speculative.acceptance_rate': .nan is not a finite"):
        load_emulator_profile(str(path))


# -- placeholders ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("template", ["serve --tag {name:>300000000}", "serve {name!r}", "serve {name:{port}}"])
def test_placeholders_with_a_format_spec_or_conversion_are_refused(tmp_path: Path, template: str) -> None:
    """Before the fix {name:>300000000} passed (its field is known) and filled a 300 MB command line and log."""
    text = TWO.replace("url: 'http://127.0.0.1:2'}", f"command: '{template}'}}")
    message = _sweep_error(_write(tmp_path, text))
    assert "key 'configurations[1].command'" in message and "format spec or conversion" in message
    assert len(message) < 400, message


# -- URLs filled from params ----------------------------------------------------------------------------------

@pytest.mark.parametrize(("params", "url", "needle"), [
    ("{hostport: '127.0.0.1:9/v1'}", "http://{hostport}", "drop '/v1'"),
    ("{hostport: '127.0.0.1:9?x=1'}", "http://{hostport}", "no query"),
    ("{hostport: '127.0.0.1:notaport'}", "http://{hostport}", "bad port"),
    ("{host: '10.1.2.3'}", "http://{host}:{port}", "loopback"),
    ("{host: '10.1.2.3'}", "http://127.0.0.1:{port}", None),  # a param the URL does not use
    ("{host: 'localhost'}", "http://{host}:{port}", None),
    ("{host: '10.1.2.3', port: 8000}", "http://{host}:{port}", None),  # a fixed port may be anywhere
])
def test_a_url_filled_from_params_is_checked_like_host(tmp_path: Path, params: str, url: str,
                                                       needle: str | None) -> None:
    """Before the fix only the template was matched against ^https?://, never the URL it filled to."""
    text = TWO.replace("url: 'http://127.0.0.1:2'}", f"command: [serve], url: '{url}'}}") + f"params: {params}\n"
    path = _write(tmp_path, text)
    if needle is None:
        assert load_sweep(path).entries[1].url == url
        return
    message = _sweep_error(path)
    assert "key 'configurations[1].url'" in message and needle in message, message


def test_a_ready_url_keeps_its_path_but_is_checked(tmp_path: Path) -> None:
    ok = TWO.replace("url: 'http://127.0.0.1:2'}", "command: [serve], ready: {url: 'http://127.0.0.1:{port}/v1/models'}}")
    assert load_sweep(_write(tmp_path, ok)).entries[1].ready.url.endswith("/v1/models")
    bad = ok.replace("127.0.0.1:{port}/v1", "{where}:{port}/v1") + "params: {where: example.com}\n"
    message = _sweep_error(_write(tmp_path, bad))
    assert "key 'configurations[1].ready.url'" in message and "loopback" in message


def test_the_filled_url_is_checked_again_before_use(tmp_path: Path) -> None:
    """A Sweep made in code (as the demo makes one) skips the file's checks: the URL about to be loaded is still
    checked, and no server is started for it."""
    good = load_sweep(_write(tmp_path, TWO))
    marker = tmp_path / "started"
    bad = good.entries[0].__class__(**{**good.entries[0].__dict__, "url": "http://127.0.0.1:{port}/v1",
                                       "command": ("touch", str(marker)), "params": {}})
    with pytest.raises(LaunchError, match=r"a: url: .*drop '/v1'"):
        run_sweep(SweepJob(Sweep("code", (bad, good.entries[1])), tmp_path / "out"))
    assert not marker.exists()


def test_host_ending_in_v1_is_refused(tmp_path: Path) -> None:
    proc = specbench("run", "--host", "http://127.0.0.1:9/v1/", "--label", "x", cwd=tmp_path)
    one_line_error(proc, "--host", "drop '/v1'")


def test_the_cli_prints_a_placeholder_refusal_as_one_line(tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    path = _write(tmp_path, TWO.replace("url: 'http://127.0.0.1:2'}", "command: 'x {name:>9}'}"))
    assert specbench_main(["sweep", str(path), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "format spec" in err and not (tmp_path / "out").exists()

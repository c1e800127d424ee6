"""Each option declared once (issue #21): in ``contract.settings.SuiteSettings``, and derived everywhere else.

The scan reads our packages' source with ``ast``: a suite option's flag registered by hand with ``add_argument``,
an ``Option``/``option`` made outside contract/settings.py, or the API names listed again by hand is a second
declaration that can drift from the first (as the sweep command's own --api list once could).
"""

from __future__ import annotations

import argparse
import ast
import json
from pathlib import Path

import pytest

from specbench.contract.apis import APIS
from specbench.contract.schema import SCHEMA_VERSION, RunMeta, read_meta
from specbench.contract.settings import OPTIONS, SuiteSettings, add_arguments, passthrough_argv

ROOT = Path(__file__).resolve().parent.parent
# The emulator is a server of its own (its --seed seeds its answers), kept apart from the suite by design.
PACKAGES = ("analysis", "contract", "locustfiles", "shapes", "specbench")
# Packages whose commands start load runs: a suite flag registered there must come from the declaration.
# (python -m specbench.analysis re-reads finished runs: its --out is a report, --slo re-judges, --seed seeds the
# bootstrap.)
LOAD_PACKAGES = ("contract", "locustfiles", "shapes", "specbench")
FLAGS = {opt.flag for opt in OPTIONS}
# Same flag name, another option: the report directory of the commands that write a report, and compare-runs'
# permission to replace a report (neither reaches a Locust run).
OTHER_MEANING = {("specbench/cli.py", "--out"): 4, ("specbench/cli.py", "--overwrite"): 1,
                 ("specbench/tunecmd.py", "--out"): 1}


def second_declarations(path: Path, rel: str) -> list[str]:
    """Where ``path`` declares an option again: hand-registered suite flags, Option()/option() calls, API lists."""
    found: list[str] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if isinstance(node, ast.Call):
            name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
            first = node.args[0] if node.args else None
            if name == "add_argument" and isinstance(first, ast.Constant) and first.value in FLAGS \
                    and rel.split("/")[0] in LOAD_PACKAGES:
                found.append(f"{rel}:{node.lineno}: {first.value} registered by hand")
            if name in ("Option", "option") and rel != "contract/settings.py":
                found.append(f"{rel}:{node.lineno}: {name}() outside contract/settings.py")
        if isinstance(node, ast.Tuple | ast.List) and rel != "contract/apis.py":
            words = {e.value for e in node.elts if isinstance(e, ast.Constant)}
            if set(APIS) <= words:
                found.append(f"{rel}:{node.lineno}: the API names listed by hand (use contract.apis.APIS)")
    return found


def scan() -> list[str]:
    found: list[str] = []
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            found += second_declarations(path, path.relative_to(ROOT).as_posix())
    return found


def test_no_option_is_declared_twice_in_the_sources() -> None:
    found = scan()
    allowed = dict(OTHER_MEANING)
    left = []
    for line in found:
        rel, flag = line.split(":")[0], line.split(": ")[1].split(" ")[0]
        if allowed.get((rel, flag), 0) > 0:
            allowed[(rel, flag)] -= 1
        else:
            left.append(line)
    assert not left, "\n".join(left)
    assert not any(allowed.values()), f"the other-meaning flags changed; update OTHER_MEANING: {allowed}"
    assert len({opt.name for opt in OPTIONS}) == len(OPTIONS)


def test_the_scan_finds_a_second_declaration(tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    module.write_text('def f(p):\n    p.add_argument("--max-tokens", type=int)\n    return ("chat", "generate", '
                      '"completions")\n', encoding="utf-8")
    found = second_declarations(module, "specbench/m.py")
    assert len(found) == 2 and "--max-tokens registered by hand" in found[0] and "API names" in found[1]


class _Parser(argparse.ArgumentParser):
    def add_argument(self, *args, include_in_web_ui=True, **kwargs):  # type: ignore[override]
        return super().add_argument(*args, **kwargs)


def test_passed_on_flags_read_back_as_the_same_values() -> None:
    """What a specbench command hands to the Locust child is what the child's parser reads."""
    given = argparse.Namespace(api_key_env="MY_KEY", overwrite=True, ignore_eos=False, max_tokens=64, ladder="1,4",
                               temperature=0.0)
    dests = ("api_key_env", "overwrite", "ignore_eos", "max_tokens", "ladder", "temperature")
    argv = passthrough_argv(given, dests)
    assert "--temperature" not in argv  # at its default: not written
    parser = _Parser()
    add_arguments(parser)
    back = parser.parse_args(argv)
    assert all(getattr(back, d) == getattr(given, d) for d in dests)


# meta.json as version 1 wrote it (a real run's, shortened): label, max_tokens, ignore_eos and temperature twice.
V1_META = {
    "schema": 1, "suite_version": "0.1.0", "label": "ladder", "command_line": [], "api": "generate",
    "max_tokens": 24, "ignore_eos": True, "temperature": 0.0, "ladder": [1, 3], "partial": False,
    "prompts": {"name": "diverse", "count": 230}, "server": {"kind": "sglang"}, "started_s": 1.0, "ended_s": 2.0,
    "settings": {"api": "auto", "max_tokens": 24, "ignore_eos": True, "temperature": 0.0, "label": "ladder",
                 "ladder": [1, 3], "seed": 7, "rate_ladder": [], "slo": "", "max_error_rate": 0.05},
}


def test_a_version_1_meta_reads_typed_and_a_new_one_holds_each_fact_once(tmp_path: Path) -> None:
    (tmp_path / "meta.json").write_text(json.dumps(V1_META), encoding="utf-8")
    old = read_meta(tmp_path / "meta.json")
    assert old.settings is not None
    assert (old.settings.label, old.settings.max_tokens, old.settings.seed, old.settings.ladder) == \
        ("ladder", 24, 7, [1, 3])
    assert old.settings.multi_turn == 1  # an option newer than the run: it behaved as the default
    # a version 1 meta written without those settings inside "settings" (hand-made ones) keeps the top-level ones
    bare = {k: v for k, v in V1_META.items() if k != "settings"}
    (tmp_path / "meta.json").write_text(json.dumps({**bare, "max_tokens": 9}), encoding="utf-8")
    assert read_meta(tmp_path / "meta.json").settings.max_tokens == 9  # type: ignore[union-attr]

    new = RunMeta(settings=SuiteSettings(max_tokens=24, label="x", ladder=[1, 3]), api="generate", ladder=[1, 3])
    data = new.to_json()
    assert data["schema"] == SCHEMA_VERSION == 2
    assert not {"label", "max_tokens", "ignore_eos", "temperature"} & set(data)
    assert set(data["settings"]) == {opt.dest for opt in OPTIONS if opt.in_meta}
    (tmp_path / "meta.json").write_text(json.dumps(data), encoding="utf-8")
    assert read_meta(tmp_path / "meta.json") == new


@pytest.mark.parametrize("bad", [{"max_tokens": "many"}, {"ladder": "x"}, {"nonsense": 1}])
def test_a_hand_edited_setting_of_the_wrong_type_reads_as_its_default(bad: dict) -> None:
    settings = SuiteSettings.from_public(bad)
    assert settings == SuiteSettings()


def test_a_key_named_only_in_the_profile_goes_with_preflight_as_with_the_run(tmp_path: Path) -> None:
    """specbench reads the key from the settings it validated once, so a profile's api_key_env counts everywhere
    (it used to reach only the Locust child: the preflight's requests went without it)."""
    import os
    import subprocess
    import sys

    from tests.tinyservers import tiny_server

    profile = tmp_path / "p.yaml"
    profile.write_text("api_key_env: SPECBENCH_PROFILE_KEY\n", encoding="utf-8")
    with tiny_server("ok") as server:
        proc = subprocess.run(
            [sys.executable, "-m", "specbench.cli", "run", "--host", server.url, "--label", "k", "--out",
             str(tmp_path / "run"), "--suite-config", str(profile), "--api", "chat", "--ladder", "1",
             "--max-tokens", "1", "--min-requests", "2", "--min-step-time", "0.5", "--step-ci", "0",
             "--no-server-metrics"],
            capture_output=True, text=True, timeout=120, cwd=tmp_path,
            env={**os.environ, "SPECBENCH_PROFILE_KEY": "sk-profile-key-123"})
        seen = list(server.seen)
    assert proc.returncode == 0, proc.stderr[-2000:]
    gets = [s for s in seen if s[0] == "GET"]
    posts = [s for s in seen if s[0] == "POST"]
    assert gets and posts
    assert all(auth == "Bearer sk-profile-key-123" for _, _, auth in seen), seen


def test_a_flag_for_the_locust_child_is_never_taken_as_a_prefix_of_a_command_flag() -> None:
    from specbench.cli import split_args

    args, extra = split_args(["run", "--host", "http://h", "--label", "k", "--api", "chat"])
    assert args.api_key_env == "" and extra == ["--api", "chat"]


@pytest.mark.parametrize("command", ["compare", "run", "sweep", "demo"])
def test_every_suite_option_a_command_accepts_is_in_its_help(command: str) -> None:
    """Before: `specbench compare --help` listed 14 options; the ~40 it hands on to Locust were only in the README."""
    from specbench.cli import SET_BY_COMMAND, subcommands

    sub = subcommands()[command]
    shown = sub.format_help()
    missing = [opt.flag for opt in OPTIONS if opt.dest not in SET_BY_COMMAND and f"{opt.flag} " not in shown
               and f"{opt.flag}," not in shown and not shown.rstrip().endswith(opt.flag)]
    assert not missing, f"specbench {command} --help lacks {missing}"
    assert "exit codes:" in shown and "examples:" in shown


def test_specbench_options_lists_every_suite_option_for_plain_locust(capsys: pytest.CaptureFixture[str]) -> None:
    from specbench.cli import main

    assert main(["options"]) == 0
    shown = capsys.readouterr().out
    assert all(f"{opt.flag}" in shown for opt in OPTIONS)


def test_a_suite_option_given_at_its_default_is_still_handed_on() -> None:
    """It must override a --suite-config profile, as on the child's own command line; and a bad value is left to
    the settings check (one line naming the flag), not argparse (its usage)."""
    from specbench.cli import split_args

    _args, extra = split_args(["compare", "--baseline", "http://a", "--spec", "http://b", "--max-tokens", "512",
                              "--no-ignore-eos", "--ladder", "1,4", "--web-port", "0"])
    assert extra == ["--max-tokens", "512", "--no-ignore-eos", "--ladder", "1,4", "--web-port", "0"]
    _args, extra = split_args(["run", "--host", "http://a", "--label", "x", "--max-tokens", "abc"])
    assert extra == ["--max-tokens", "abc"]

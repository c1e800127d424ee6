"""Suite options: YAML profile precedence and clear errors for user mistakes."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from specbench.contract.settings import (
    OPTIONS,
    SettingsError,
    SuiteSettings,
    add_arguments,
    apply_profile,
    explicit_dests,
    load_profile,
    parse_ladder,
    settings_of,
)
from specbench.locustfiles.prompts import load_prompts
from specbench.locustfiles.replay import Replay


class _Parser(argparse.ArgumentParser):
    """argparse stand-in for Locust's parser: accepts (and drops) Locust's extra keyword."""

    def add_argument(self, *args, include_in_web_ui=True, **kwargs):  # type: ignore[override]
        return super().add_argument(*args, **kwargs)


def parse(argv: list[str]) -> argparse.Namespace:
    parser = _Parser()
    add_arguments(parser)
    return parser.parse_args(argv)


def test_defaults_match_the_product(tmp_path):
    s = SuiteSettings.from_options(parse([]))
    assert s.ladder == [1, 2, 5, 10, 30, 70, 100, 250]
    assert (s.api, s.max_tokens, s.ignore_eos, s.temperature) == ("auto", 512, True, 0.0)
    assert parse(["--no-ignore-eos"]).ignore_eos is False


def test_yaml_profile_fills_options_but_command_line_wins(tmp_path):
    cfg = tmp_path / "x.yaml"
    cfg.write_text("max-tokens: 64\nladder: [1, 4]\nlabel: eagle3\nignore_eos: false\n")
    argv = ["--suite-config", str(cfg), "--label", "mine"]
    opts = parse(argv)
    apply_profile(opts, argv)
    s = SuiteSettings.from_options(opts)
    assert (s.max_tokens, s.ladder, s.label, s.ignore_eos) == (64, [1, 4], "mine", False)
    assert explicit_dests(["--no-ignore-eos", "--max-tokens=3", "-u", "5"]) == {"ignore_eos", "max_tokens"}


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        ("max_tokens: lots\n", "key 'max_tokens': expected a whole number"),
        ("bogus: 1\n", "unknown key 'bogus'"),
        ("api: grpc\n", "key 'api': expected one of auto, generate, chat, completions"),
        ("- 1\n- 2\n", "expected a mapping"),
        ("a: [\n", "line"),
        ("ignore-eos: 3\n", "expected true or false"),
    ],
)
def test_bad_yaml_names_file_key_and_expectation(tmp_path, content, expected):
    cfg = tmp_path / "bad.yaml"
    cfg.write_text(content)
    with pytest.raises(SettingsError) as err:
        load_profile(str(cfg))
    assert str(cfg) in str(err.value) and expected in str(err.value)


def test_bad_ladder_and_missing_key_env_are_clear():
    with pytest.raises(SettingsError, match="--ladder: expected comma-separated positive whole numbers"):
        parse_ladder("1,x,3")
    opts = parse(["--api-key-env", "SPECBENCH_SURELY_UNSET_VAR"])
    with pytest.raises(SettingsError, match="SPECBENCH_SURELY_UNSET_VAR is not set"):
        SuiteSettings.from_options(opts)


def test_public_settings_keep_the_variable_name_never_the_key(monkeypatch):
    monkeypatch.setenv("MY_KEY", "sk-secret-value")
    s = SuiteSettings.from_options(parse(["--api-key-env", "MY_KEY"]))
    assert s.api_key() == "sk-secret-value"
    assert "sk-secret-value" not in repr(s.public()) and s.public()["api_key_env"] == "MY_KEY"


def test_every_option_has_help_and_a_typed_default():
    for opt in OPTIONS:
        assert opt.help and opt.default is not None


# -- validated once per distinct set of values; a --trace file read once per process --
# The trace was read three times per process (validation, the users' replay, the shape), and settings_of never
# hit its cache for Locust's argparse options (a Namespace compares by value, so it cannot be a dictionary key):
# every call validated again. The users' replay below is built after the file is gone, so it can only come from
# the one read at validation (no Locust import: pytest's process stays unpatched).


def test_same_values_same_settings_and_a_changed_value_validates_anew() -> None:
    options = parse(["--max-tokens", "64"])
    first = settings_of(options)
    assert settings_of(options) is first
    options.max_tokens = 32  # as a web-UI Start with another value in the form
    second = settings_of(options)
    assert second is not first and second.max_tokens == 32
    options.max_tokens = -1
    with pytest.raises(SettingsError):
        settings_of(options)


def test_the_trace_is_read_once_and_shared_by_the_shape_and_the_users(tmp_path: Path) -> None:
    trace = tmp_path / "t.jsonl"
    rows = [{"timestamp": t, "input_length": 100 + t, "output_length": 5} for t in (0, 500, 1500)]
    trace.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    options = parse(["--trace", str(trace), "--trace-window", "0:1,1:1"])
    settings = settings_of(options)
    trace.unlink()  # from here on, nothing can read it again
    assert settings_of(options) is settings
    replay = Replay.from_settings(settings, load_prompts(settings.prompts))
    assert [len(s.rows) for s in replay.steps] == [2, 1]
    assert [r.input_tokens for r in replay.steps[0].rows] == [100, 600]
    assert replay.steps is settings.trace_steps  # the shape (shapes.rate.TraceReplay) reads the same attribute

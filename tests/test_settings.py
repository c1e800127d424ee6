"""Suite options: YAML profile precedence and clear errors for user mistakes."""

from __future__ import annotations

import argparse

import pytest

from contract.settings import (
    OPTIONS,
    SettingsError,
    SuiteSettings,
    add_arguments,
    apply_profile,
    explicit_dests,
    load_profile,
    parse_ladder,
)


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

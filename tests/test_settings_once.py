"""Settings are validated once per distinct set of option values, and a --trace file is read once per process.

Why: the trace was read and parsed three times per process (validation, the users' replay, the shape), and
``settings_of`` never hit its cache for Locust's argparse options (a Namespace compares by value, so it cannot
be a dictionary key), so every call validated again. Here the users' view of the trace is built after the file
is gone: it can only come from the one read at validation (no Locust import: pytest's process stays unpatched).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from contract.settings import SettingsError, add_arguments, settings_of
from locustfiles.prompts import load_prompts
from locustfiles.replay import Replay


class _Parser(argparse.ArgumentParser):
    """argparse stand-in for Locust's parser: accepts (and drops) Locust's extra keyword."""

    def add_argument(self, *args, include_in_web_ui=True, **kwargs):  # type: ignore[override]
        return super().add_argument(*args, **kwargs)


def parse(argv: list[str]) -> argparse.Namespace:
    parser = _Parser()
    add_arguments(parser)
    return parser.parse_args(argv)


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

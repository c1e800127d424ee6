"""The tune file's errors (one line naming the key), its expansion into a sweep, the vLLM config form per stated
release, and the CLI's refusals before any server starts."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from specbench.analysis.verdicts.tune import TuneResult
from specbench.contract.kschedule import DISABLE_FIELD, SCHEDULE_FIELD, depth_for_batch, parse_release
from specbench.sweepfile import SweepFileError
from specbench.tunefile import parse_depths, parse_tune
from specbench.tuneout import TuneContext, launch_lines, vllm_config

BASE = {"command": ["srv", "--port", "{port}"]}
SPEC = {"command": ["srv", "--port", "{port}", "--speculative-config", "{speculative_config}"]}


def _tune(**keys: object) -> dict[str, object]:
    return {"speculative_config": {"method": "eagle3", "model": "/d"}, "baseline": BASE, "speculative": SPEC} | keys


def test_a_template_expands_to_one_configuration_per_depth() -> None:
    tune = parse_tune(_tune(depths=[4, 1, 2]))
    assert [e.name for e in tune.sweep.entries] == ["baseline", "k1", "k2", "k4"]
    assert dict(tune.depths) == {"k1": 1, "k2": 2, "k4": 4} and tune.takes_config
    k2 = tune.sweep.entries[2]
    config = json.loads(k2.command_line(8000)[-1])  # type: ignore[index]
    assert config == {"method": "eagle3", "model": "/d", "num_speculative_tokens": 2}
    check = tune.validation_sweep(2, ((1, 8, 4), (9, 256, 1)))
    assert [e.name for e in check.entries] == ["baseline", "k2", "tuned"]
    tuned = json.loads(check.entries[2].command_line(8000)[-1])  # type: ignore[index]
    assert tuned[SCHEDULE_FIELD] == [[1, 8, 4], [9, 256, 1]] and tuned["num_speculative_tokens"] == 4
    assert parse_tune(_tune(), depths=(3,)).depths == {"k3": 3}


def test_a_list_of_shapes_gives_each_its_depth() -> None:
    shapes = [{"name": "tree16", "depth": 5, "command": "srv --topk 4 --draft-tokens 16 --port {port}"},
              {"depth": 3, "command": "srv --topk 1 --draft-tokens 4 --port {port}"}]
    tune = parse_tune(_tune(speculative=shapes))
    assert dict(tune.depths) == {"tree16": 5, "k3": 3} and not tune.takes_config


@pytest.mark.parametrize(("keys", "key", "what"), [
    ({"depth": [1]}, "depth", "unknown key"),
    ({"depths": [0, 1]}, "depths", "each depth once, from 1 to"),
    ({"depths": [2, 2]}, "depths", "each depth once"),
    ({"depths": "1,2"}, "depths", "expected a list of whole numbers"),
    ({"max_batch": 0}, "max_batch", "expected a whole number >= 1"),
    ({"speculative_config": [1]}, "speculative_config", "expected a mapping"),
    ({"speculative": {"command": ["srv", "--port", "{port}"]}}, "speculative.command", "must use {k} or"),
    ({"speculative": {"name": "x", **SPEC}}, "speculative.name", "is set by the tune"),
    ({"speculative": [{"command": "srv {port}"}]}, "speculative[0].depth", "expected a whole number from 1"),
    ({"speculative": [{"depth": 2, "command": "a {port}"}, {"depth": 2, "command": "b {port}"}]},
     "speculative[1].depth", "depth 2 is given twice"),
    ({"baseline": {"name": "b", **BASE}}, "baseline.name", "is set by the tune"),
    ({"speculative": [{"name": "tuned", "depth": 2, "command": "a {port}"}]}, "speculative[0].name",
     "is the tune's own folder"),
    ({"speculative": [{"name": "validate", "depth": 2, "command": "a {port}"}]}, "speculative[0].name",
     "is the tune's own folder"),
    ({"depths": [1, 2], "speculative": [{"depth": 2, "command": "a {port}"}]}, "depths",
     "applies to a speculative template"),
    ({"speculative": {"command": ["srv", "{k}"], "ready": {"nope": 1}}}, "speculative.ready.nope", "unknown key"),
])
def test_a_mistake_is_one_line_naming_the_key(keys: dict[str, object], key: str, what: str) -> None:
    with pytest.raises(SweepFileError) as info:
        parse_tune(_tune(**keys), "tune.yaml")
    text = str(info.value)
    assert text.startswith("tune.yaml") and key in text and what in text and "\n" not in text, text


def test_depths_flag_is_checked() -> None:
    assert parse_depths("3,1,2") == (1, 2, 3)
    for bad in ("1,x", "0", "1,1", "", "١,٢"):
        with pytest.raises(ValueError, match="--depths"):
            parse_depths(bad)


def test_near_misses_of_the_reserved_names_and_list_depths_are_taken() -> None:
    shapes = [{"name": "tuned2", "depth": 2, "command": "a {port}"}, {"name": "k-validate", "depth": 3,
                                                                     "command": "b {port}"}]
    assert dict(parse_tune(_tune(speculative=shapes)).depths) == {"tuned2": 2, "k-validate": 3}
    with pytest.raises(SweepFileError, match="--depths has nothing to choose from"):
        parse_tune(_tune(speculative=shapes), "tune.yaml", depths=(1,))


def test_a_huge_value_is_named_not_echoed() -> None:
    depths = list(range(100_000))
    with pytest.raises(SweepFileError) as info:
        parse_tune(_tune(depths=depths), "tune.yaml")
    assert len(str(info.value)) < 400 and "characters)" in str(info.value)
    with pytest.raises(ValueError) as flag:
        parse_depths(",".join(map(str, depths)))
    assert len(str(flag.value)) < 400


def _result(schedule: tuple[tuple[int, int, int], ...]) -> TuneResult:
    return TuneResult((), "batch", "", schedule, 3, (0, 1, 3, 5))


def _ctx(release: str | None) -> TuneContext:
    return TuneContext("t.yaml", {}, (1, 10), {"method": "eagle3", "model": "/d"},
                       parse_release(release) if release else None, 256)


def test_each_stated_release_gets_only_a_field_it_has() -> None:
    falls = _result(((1, 4, 5), (5, 40, 3), (41, 120, 1), (121, 256, 0)))
    config, note = vllm_config(falls, _ctx("0.24.0"))
    assert config is not None and config[SCHEDULE_FIELD] == [[1, 4, 5], [5, 40, 3], [41, 120, 1], [121, 256, 0]]
    assert config["num_speculative_tokens"] == 5 and DISABLE_FIELD not in config
    config, note = vllm_config(_result(((1, 256, 3),)), _ctx("0.8.2"))
    assert config == {"method": "eagle3", "model": "/d", "num_speculative_tokens": 3}, note
    for release in ("0.10.0", "0.23.0", "0.8.1"):
        config, note = vllm_config(falls, _ctx(release))
        assert config is None and "no config written" in note, release
        assert not any("vllm serve" in line for line in launch_lines(falls, config))


def _v0_depth(config: dict[str, object], batch: int) -> int:
    """What V0 vLLM (0.8.2-0.9.2) runs a step with ``batch`` requests running under ``config``: its
    SpecDecodeWorker turns speculation off for the step when running_queue_size >= disable_by_batch_size."""
    threshold = config.get(DISABLE_FIELD)
    depth = config["num_speculative_tokens"]
    assert isinstance(depth, int) and (threshold is None or isinstance(threshold, int))
    return 0 if threshold is not None and batch >= threshold else depth


@pytest.mark.parametrize(("schedule", "why"), [
    (((1, 3, 0), (4, 256, 2)), "off at batch 1-3 and on above"),  # the inverse
    (((1, 256, 0),), "off at every batch size"),  # the form cannot say "never" (N >= 2)
    (((1, 4, 5), (5, 40, 3), (41, 120, 1), (121, 256, 0)), "runs 3 depths"),
    (((1, 8, 2), (9, 20, 0), (21, 256, 2)), "on again at batch 21"),
])
def test_the_disable_form_refuses_a_schedule_it_cannot_say(schedule: tuple[tuple[int, int, int], ...],
                                                           why: str) -> None:
    config, note = vllm_config(_result(schedule), _ctx("0.9.0"))
    assert config is None and "no config written" in note and why in note, note
    assert not any("vllm serve" in line for line in launch_lines(_result(schedule), config))


@pytest.mark.parametrize("schedule", [((1, 3, 2), (4, 256, 0)), ((1, 1, 4), (2, 256, 0)), ((1, 256, 3),)])
def test_the_disable_form_says_exactly_what_the_schedule_runs(schedule: tuple[tuple[int, int, int], ...]) -> None:
    """Near misses of the refusals: one depth, then off from N >= 2 up (or never), at every batch size as V0 runs it."""
    config, note = vllm_config(_result(schedule), _ctx("0.9.0"))
    assert config is not None and SCHEDULE_FIELD not in config, note
    for batch in range(1, 257):
        assert _v0_depth(config, batch) == depth_for_batch(schedule, batch, 0), (batch, config)


def test_a_partial_tune_writes_no_config_for_any_release() -> None:
    partial = TuneResult((), "batch", "", (), None, (0, 1, 3), problems=("C=8: k3: 40 of 40 requests failed",))
    for release in (None, "0.24.0", "0.9.0"):
        config, note = vllm_config(partial, _ctx(release))
        assert config is None and "the tune is partial (C=8: k3: 40 of 40 requests failed)" in note, release


def test_the_cli_refuses_before_any_server_starts(tmp_path: Path) -> None:
    tune = tmp_path / "tune.yaml"
    tune.write_text("baseline: {command: 'srv {port}'}\nspeculative:\n  - {depth: 2, command: 'srv2 {port}'}\n")
    for args, what in ((["--validate"], "does not take {speculative_config}"),
                       (["--depths", "0"], "--depths"), (["--vllm-release", "new"], "--vllm-release"),
                       (["--objective", "energy"], "energy per token needs the GPUs' telemetry"),
                       (["--objective", "energy", "--throughput-floor", "1.5"], "--throughput-floor 1.5"),
                       (["--vllm-release", "١.٢٤"], "--vllm-release: expected a vLLM release"),
                       (["--vllm-release", ""], "--vllm-release: expected a vLLM release"),
                       (["--depths", "1,2"], "--depths has nothing to choose from"),
                       (["--depths", ",".join(map(str, range(1, 20_000)))], "characters)")):
        proc = subprocess.run([sys.executable, "-m", "specbench.cli", "tune", str(tune), "--out",
                               str(tmp_path / "out"), *args], capture_output=True, text=True, timeout=60)
        assert proc.returncode == 2 and what in proc.stderr and "Traceback" not in proc.stderr, proc.stderr
        assert len(proc.stderr) < 1000 and proc.stderr.count("\n") == 1, proc.stderr
        assert not (tmp_path / "out").exists()
    huge = tmp_path / "huge.yaml"  # 100,000 depths in the file: a 689 KB error line before #70
    huge.write_text(f"depths: {list(range(100_000))}\nbaseline: {{command: 'srv {{port}}'}}\n"
                    "speculative: {command: 'srv {port} --k {k}'}\n")
    proc = subprocess.run([sys.executable, "-m", "specbench.cli", "tune", str(huge), "--out", str(tmp_path / "out")],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and "key 'depths'" in proc.stderr and len(proc.stderr) < 400, proc.stderr[:1000]

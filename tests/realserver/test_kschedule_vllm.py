"""The schedule ``specbench tune`` writes, read by the installed vLLM's own code.

``vllm/v1/spec_decode/dynamic/utils.py`` (vLLM 0.24.0 and later; the CPU build installed here is
tests/realserver/install_vllm.sh's release): ``validate_and_normalize_dynamic_sd_schedule`` checks a
``num_speculative_tokens_per_batch_size`` and ``build_dynamic_sd_schedule_lookup`` expands it into the K per batch
size the scheduler uses. Our emitted configs must pass the first, the second must give every batch size the depth
our ``depth_for_batch`` (and so the emulator) gives it, and what vLLM refuses we refuse.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from specbench.analysis.verdicts.tune import build_schedule
from specbench.contract.kschedule import KScheduleError, depth_for_batch, parse_k_schedule, speculative_config

from .conftest import _unavailable
from .vllm_server import VLLM_VERSION, vllm_python

pytestmark = pytest.mark.slow

MAX_BATCH = 300
CHECK = r"""
import json, sys
from vllm.v1.spec_decode.dynamic.utils import (build_dynamic_sd_schedule_lookup,
                                               validate_and_normalize_dynamic_sd_schedule)
out = []
for case in json.load(open(sys.argv[1])):
    try:
        if "config" in case:
            cfg = case["config"]
            dense = build_dynamic_sd_schedule_lookup(cfg["num_speculative_tokens_per_batch_size"], case["max_batch"],
                                                     cfg["num_speculative_tokens"])
            out.append({"lookup": dense[1:]})
        else:
            validate_and_normalize_dynamic_sd_schedule(case["raw"])
            out.append({"ok": True})
    except ValueError as exc:
        out.append({"error": str(exc)})
print(json.dumps(out))
"""

# Schedules as the tune builds them: (batch size, K) points from levels, the last range to the server's cap.
POINTS = [
    [(1.0, 5), (2.0, 5), (4.6, 4), (9.7, 3), (29.1, 2), (66.0, 1), (93.0, 1), (230.0, 0)],
    [(1.0, 3), (10.0, 3), (70.0, 3)],
    [(1.0, 0), (3.0, 2), (12.0, 0)],
]
REFUSED = [[[2, 16, 3]], [[1, 16, 3], [16, 32, 2]], [[1, 16, -1]], [], [[32, 64]], [[0, 4, 1]], [[1, 8, 2], [12, 9, 1]]]
TAKEN = [[[17, 32, 2], [1, 16, 3]], [[1, 16, 3], [32, 128, 2], [256, 2048, 0]]]


def _vllm(cases: list[dict[str, object]], tmp_path: Path) -> list[dict[str, object]]:
    python = vllm_python()
    if python is None:
        _unavailable(f"vLLM {VLLM_VERSION} (CPU) is not installed: run tests/realserver/install_vllm.sh")
    assert python is not None
    data = tmp_path / "cases.json"
    data.write_text(json.dumps(cases))
    proc = subprocess.run([str(python), "-c", CHECK, str(data)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_vllm_expands_our_schedules_to_the_depths_we_run(tmp_path: Path) -> None:
    configs = []
    for points in POINTS:
        schedule = build_schedule(points, 256)
        deepest = max(k for _, k in points) or 1
        configs.append(speculative_config({"method": "eagle3", "model": "/m/draft"}, deepest, schedule))
    answers = _vllm([{"config": c, "max_batch": MAX_BATCH} for c in configs], tmp_path)
    for config, answer in zip(configs, answers, strict=True):
        assert "lookup" in answer, (config, answer)
        schedule = parse_k_schedule(config["num_speculative_tokens_per_batch_size"])
        ours = [depth_for_batch(schedule, b, config["num_speculative_tokens"]) for b in range(1, MAX_BATCH + 1)]
        assert answer["lookup"] == ours, config


def test_what_vllm_refuses_we_refuse(tmp_path: Path) -> None:
    answers = _vllm([{"raw": raw} for raw in REFUSED + TAKEN], tmp_path)
    for raw, answer in zip(REFUSED + TAKEN, answers, strict=True):
        try:
            parse_k_schedule(raw)
            ours = True
        except KScheduleError:
            ours = False
        assert ours == ("ok" in answer), (raw, answer)
    assert sum("error" in a for a in answers) == len(REFUSED)


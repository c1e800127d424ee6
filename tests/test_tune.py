"""``specbench tune`` end to end on the built-in emulator: every depth measured, a depth chosen per level against
the cost model's truth, the schedule keyed on the server's batch, ``tuned/`` written, and ``--validate`` launching
the schedule, which the emulator runs (its /metrics show the depth per step falling with the batch).

The tuning profiles (config/emulator/tune-spec.yaml) make the best depth fall with load: at 64 tokens per request
the closed form gives K=5 alone, 3 at C=10 and 1 at C=70 among {0, 1, 3, 5}. A full tune (5 depths, 8 levels,
the 2% criterion) is benchmarks/bench_tune.py; this one is short (three depths, three levels, 1 s windows).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from specbench.analysis.verdicts.tune import schedule_depth
from specbench.config import data_path
from specbench.contract.kschedule import parse_k_schedule, read_speculative_config
from specbench.contract.server_metrics import read_server_metrics
from specbench.emulator.costmodel import at_depth, expected_throughput_for_prompts
from specbench.emulator.profile import load_profile

pytestmark = pytest.mark.slow

SPEED = 20
MAX_TOKENS = 64
LADDER = (1, 10, 70)
DEPTHS = (1, 3, 5)
MAX_BATCH = 128
LOAD = ["--ladder", ",".join(map(str, LADDER)), "--max-tokens", str(MAX_TOKENS), "--min-requests", "10",
        "--min-step-time", "1", "--max-step-time", "15", "--step-ci", "0", "--server-metrics-interval", "0.2"]
# A short tune on a shared machine: the chosen depth's model throughput within this share of the model's best.
# The near-ties are where it can matter (C=70: K=1 is 1.11x off in the model, K=3 1.02x), and the 2% criterion
# on the full ladder is the benchmark's.
NEAR_BEST = 0.90


def _tune_yaml(path: Path, depths: tuple[int, ...] = DEPTHS, telemetry: bool = False) -> Path:
    py = sys.executable
    ready = "ready: {url: 'http://127.0.0.1:{port}/health', interval_s: 0.1}"
    gpus = ", --gpu-telemetry, '1'" if telemetry else ""
    exporter = ["  gpu_metrics: 'http://127.0.0.1:{port}/_emulator/dcgm/metrics'"] if telemetry else []
    path.write_text("\n".join([
        f"depths: [{', '.join(map(str, depths))}]",
        f"max_batch: {MAX_BATCH}",
        "speculative_config: {method: eagle3, model: /emulated/tune-draft}",
        f"params: {{speed: '{SPEED}'}}",
        "baseline:",
        f"  command: [{py}, -m, specbench.emulator, --profile, tune-baseline, --port, '{{port}}', --speed, "
        f"'{{speed}}'{gpus}]",
        f"  {ready}",
        *exporter,
        "speculative:",
        f"  command: [{py}, -m, specbench.emulator, --profile, tune-spec, --port, '{{port}}', --speed, '{{speed}}',"
        f" --speculative-config, '{{speculative_config}}'{gpus}]",
        f"  {ready}",
        *exporter,
    ]) + "\n")
    return path


@pytest.fixture(scope="module")
def tuned(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    root = tmp_path_factory.mktemp("tune")
    out = root / "report"
    proc = subprocess.run([sys.executable, "-m", "specbench.cli", "tune", str(_tune_yaml(root / "tune.yaml")),
                           "--out", str(out), "--validate", "--time-budget", "6m", *LOAD], capture_output=True,
                          text=True, timeout=500)
    assert proc.returncode == 0, proc.stderr[-3000:] + proc.stdout[-3000:]
    return out, proc.stdout


def _truth(depth: int, c: int) -> float:
    rows = [json.loads(line) for line in data_path("prompts", "diverse.jsonl").read_text().splitlines() if line]
    prompts = [row["prompt"] if isinstance(row.get("prompt"), str) else row["messages"] for row in rows]
    profile = load_profile("tune-baseline") if depth == 0 else at_depth(load_profile("tune-spec"), depth)
    return expected_throughput_for_prompts(profile, c, prompts, MAX_TOKENS)


def test_each_level_gets_a_depth_near_the_truths_best(tuned: tuple[Path, str]) -> None:
    out, _ = tuned
    data = json.loads((out / "tuned" / "tune.json").read_text())
    assert data["depths"] == [0, *DEPTHS]
    chosen = {lv["target_c"]: lv["chosen"] for lv in data["levels"]}
    assert sorted(chosen) == list(LADDER)
    for c, depth in chosen.items():
        truth = {k: _truth(k, c) for k in (0, *DEPTHS)}
        assert truth[depth] >= NEAR_BEST * max(truth.values()), (c, depth, truth)
    assert chosen[1] == 5  # alone, the deepest draft is ahead by 9% in the model: no tie to break
    assert chosen[1] > chosen[70]  # and the depth falls with load


def test_the_schedule_is_keyed_on_the_servers_batch_and_vllm_can_read_it(tuned: tuple[Path, str]) -> None:
    out, stdout = tuned
    data = json.loads((out / "tuned" / "tune.json").read_text())
    assert data["keyed_on"] == "batch", data["key_note"]
    schedule = parse_k_schedule(data["schedule"])
    assert schedule[0][0] == 1 and schedule[-1][1] == MAX_BATCH
    for lv in data["levels"]:
        # the server's own batch at each level, never above the concurrency the client held
        assert 0 < lv["batch_mean"] <= lv["target_c"], lv
        assert schedule_depth(schedule, lv["batch_mean"]) == lv["chosen"], (lv, schedule)
    depth, from_file = read_speculative_config((out / "tuned" / "vllm-speculative-config.json").read_text())
    assert depth == max(DEPTHS) and from_file == schedule
    launch = (out / "tuned" / "launch.txt").read_text()
    single = data["best_single"]
    assert f"--speculative-num-steps {single} " in launch and f"--spec-draft-n-max {single}" in launch
    assert "vllm serve MODEL --speculative-config" in launch
    readme = (out / "tuned" / "README.md").read_text()
    assert "## How each level was chosen" in readme and "## Validation" in readme
    assert "tuned: batch 1-" in stdout
    assert stdout.count(" of the budget") == 1 + len(DEPTHS) + 3  # every run, validation included, told its part


def test_validate_runs_the_schedule_and_checks_it_level_by_level(tuned: tuple[Path, str]) -> None:
    out, _ = tuned
    data = json.loads((out / "tuned" / "tune.json").read_text())
    chosen = {lv["target_c"]: lv["chosen"] for lv in data["levels"]}
    check = json.loads((out / "tuned" / "validation.json").read_text())
    assert check["fixed"] == f"k{data['best_single']}"
    assert [lv["target_c"] for lv in check["levels"]] == list(LADDER)
    for lv in check["levels"]:
        assert lv["depth"] == chosen[lv["target_c"]] and lv["delivered_tok_s"] > 0
        assert lv["outcome"] in ("as_predicted", "short", "above", "unknown")
    alone = check["levels"][0]
    assert alone["vs_baseline"]["low"] > 1.5  # K=5 alone: 2.4x speculation off in the model
    # The emulator ran the schedule: draft tokens per drafting pass, from its own counters over each step.
    samples, _ = read_server_metrics(out / "validate" / "tuned" / "server_metrics.jsonl")
    steps = [json.loads(line) for line in (out / "validate" / "tuned" / "steps.jsonl").read_text().splitlines()]
    per_pass = {}
    for step in steps:
        inside = [s["values"] for s in samples if step["start_s"] <= s["t_s"] <= step["end_s"]]
        assert len(inside) >= 3, step
        drafts = inside[-1]["spec_draft_tokens_total"] - inside[0]["spec_draft_tokens_total"]
        passes = inside[-1]["spec_verify_total"] - inside[0]["spec_verify_total"]
        per_pass[step["target_c"]] = drafts / passes
    assert per_pass[1] == pytest.approx(chosen[1])  # every pass alone
    assert per_pass[70] < chosen[1], per_pass  # a full batch drafts less


def test_the_energy_objective_takes_the_least_joules_per_token_that_keeps_the_floor(tmp_path: Path) -> None:
    """--objective energy with the emulator's GPU telemetry: every candidate's energy per token is read from its
    exporter, and each level's depth is the least energy among those shown to keep 90% of the best's throughput."""
    out = tmp_path / "report"
    proc = subprocess.run([sys.executable, "-m", "specbench.cli", "tune", str(_tune_yaml(tmp_path / "t.yaml", (1, 5),
                                                                                          telemetry=True)),
                           "--out", str(out), "--objective", "energy", "--throughput-floor", "0.9", *LOAD[:1],
                           "1,70", *LOAD[2:]], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:] + proc.stdout[-3000:]
    data = json.loads((out / "tuned" / "tune.json").read_text())
    assert data["objective"] == "energy" and data["throughput_floor"] == 0.9
    for lv in data["levels"]:
        assert lv["how"] == "energy", lv
        cands = {c["depth"]: c for c in lv["candidates"]}
        assert all(c["energy_per_token_j"] and c["energy_per_token_j"] > 0 for c in cands.values()), lv
        kept = [c for c in cands.values() if c["depth"] == lv["best"] or (c["vs_best"]["low"] or 0) >= 0.9]
        least = min(c["energy_per_token_j"] for c in kept)
        assert lv["chosen"] in [c["depth"] for c in kept]
        assert cands[lv["chosen"]]["energy_per_token_j"] <= least * 1.02
    assert "Objective: energy" in (out / "tuned" / "README.md").read_text()

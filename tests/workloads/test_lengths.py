"""Length distributions: exact output lengths, prompts met to the drawn input length with real text, and the
emulator charging prefill per uncached prompt token."""

from __future__ import annotations

import statistics

import numpy as np
import pytest

from specbench.contract.lengths import LengthError, parse_length
from specbench.contract.rundir import read_run
from specbench.emulator.profile import load_profile
from specbench.locustfiles.prompts import PromptOrder, load_prompts
from specbench.locustfiles.workload import CHARS_PER_TOKEN, fit_prompt
from tests.conftest import ledger, run_locust


def test_length_forms_and_clear_errors():
    assert parse_length("fixed:512", "--input-len").draw(0, 5, "input") == 512
    uni = parse_length("uniform:128-1024", "--input-len")
    draws = [uni.draw(3, s, "input") for s in range(400)]
    assert min(draws) >= 128 and max(draws) <= 1024 and len(set(draws)) > 100
    assert draws == [uni.draw(3, s, "input") for s in range(400)]  # a pure function of seed and position
    norm = parse_length("normal:512,128", "--input-len")
    assert abs(statistics.mean(norm.draw(0, s, "input") for s in range(2000)) - 512) < 15
    assert parse_length("dataset", "--input-len").draw(0, 1, "input") is None
    for text, flag, expected in [("uniform:9-3", "--input-len", "expected fixed:N"),
                                 ("512", "--output-len", "--output-len: expected fixed:N"),
                                 ("dataset", "--output-len", "'dataset' is for --input-len only")]:
        with pytest.raises(LengthError, match=expected):
            parse_length(text, flag, allow_dataset=flag == "--input-len")


def test_prompts_are_padded_with_the_next_prompts_real_text_or_cut_at_a_word():
    prompts = load_prompts("diverse")
    order = PromptOrder(prompts, seed=0)
    texts = [p.as_text() for p in prompts.prompts]
    short = next(p for p in order.order if p.text is not None and len(p.text) < 400)
    padded = fit_prompt(short, 4000, lambda k: order.at(10 + k).as_text())
    assert padded.text.endswith(short.text) and 3900 <= len(padded.text) <= 4000
    for line in padded.text[: -len(short.text)].strip().split("\n"):
        assert any(line.strip() in t for t in texts), line[:80]  # filler is prompt text, never made up
    cut = fit_prompt(short, 100, lambda k: "")
    assert short.text.startswith(cut.text) and len(cut.text) <= 100 and not cut.text.endswith(" ")


def test_output_lengths_exact_input_lengths_met_and_prefill_charged_per_prompt_token(tmp_path, emulator):
    speed = 20.0
    emu = emulator("baseline", speed=speed)
    out = tmp_path / "run"
    proc = run_locust(emu.url, out, "--ladder", "1", "--input-len", "uniform:64-4096", "--output-len",
                      "uniform:8-40", "--seed", "3", "--min-requests", "40", "--min-step-time", "1",
                      "--max-step-time", "60", "--step-ci", "0", timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    run = read_run(out)
    assert run.meta.settings.input_len == "uniform:64-4096" and run.meta.settings.output_len == "uniform:8-40"
    truth = {e["rid"]: e for e in ledger(emu.url)}
    out_dist = parse_length("uniform:8-40", "--output-len")
    in_dist = parse_length("uniform:64-4096", "--input-len")
    prompts = {p.id: p for p in load_prompts("diverse").prompts}
    met = []
    for rec in run.records:
        entry = truth[rec["request_id"]]
        assert rec["max_tokens"] == out_dist.draw(3, rec["prompt_seq"], "output")
        assert rec["output_tokens"] == rec["max_tokens"] == entry["completion_tokens"]
        assert rec["prompt_tokens"] == entry["prompt_tokens"]
        target = in_dist.draw(3, rec["prompt_seq"], "input")
        if prompts[rec["prompt_id"]].approx_chars < target * CHARS_PER_TOKEN:  # padded (not a long chat)
            met.append(rec["prompt_tokens"] / target)
    # Characters per token vary by text: a padded prompt lands within a few per cent of its drawn length.
    assert len(met) >= 30 and all(0.95 <= m <= 1.08 for m in met), sorted(met)[:3] + sorted(met)[-3:]
    # The cost model: TTFT at C=1 grows with the uncached prompt tokens by prefill_ms_per_token each.
    entries = [truth[r["request_id"]] for r in run.records]
    tokens = np.array([e["prompt_tokens"] - e["cached_tokens"] for e in entries], dtype=float)
    ttft_ms = np.array([(e["first_token_s"] - e["arrival_s"]) * 1000 for e in entries])
    slope = np.polyfit(tokens, ttft_ms, 1)[0]
    expected = load_profile("baseline", speed=speed).prefill_ms_per_token / speed
    assert abs(slope / expected - 1) < 0.3, (slope, expected)

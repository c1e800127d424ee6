"""The analytic cost model and the profile loader: exact formulas, helpful one-line errors."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from specbench.emulator import ProfileError, available_profiles, costmodel, load_profile
from specbench.emulator.textmodel import estimate_prompt_tokens, prompt_key, prompt_tokens, render_chat

from calibrate import SEED_TPS, as_chat
from suiteprompts import load_suite_prompts


def test_step_time_is_a_plus_b_batch_plus_prefill_over_speed() -> None:
    profile = load_profile("baseline", speed=2.0)
    assert costmodel.expected_step_ms(profile, 10, prefill_tokens=100) == pytest.approx((10.34 + 11.2 + 10) / 2)
    spec = load_profile("eagle3")
    assert costmodel.expected_step_ms(spec, 1) == pytest.approx(25.7 + 6.78)


def test_decode_steps_dp_matches_simulation() -> None:
    rng = random.Random(1)
    alpha, k, tokens = 0.7, 3, 100
    total = 0
    for _ in range(4000):
        produced = steps = 0
        while produced < tokens:
            accepted = 0
            while accepted < k and rng.random() < alpha:
                accepted += 1
            produced += 1 + accepted
            steps += 1
        total += steps
    assert total / 4000 == pytest.approx(costmodel.expected_decode_steps(alpha, k, tokens), rel=0.01)
    assert costmodel.mean_step_tokens(0.5, 3) == pytest.approx(1.875)


def test_throughput_regimes() -> None:
    profile = load_profile("baseline", overrides={"prefill_ms_per_token": 0.0})
    n = 512
    solo = costmodel.expected_throughput(profile, 1, n, 0)
    assert solo == pytest.approx(1000 / (10.34 + 1.12))
    two = costmodel.expected_throughput(profile, 2, n, 0)
    assert two == pytest.approx(1000 * 2 * n / ((n + 1) * 10.34 + 1.12 * 2 * n))
    saturated = 1000 * 80 / (10.34 + 1.12 * 80)
    assert costmodel.expected_throughput(profile, 250, n, 0) == pytest.approx(saturated)
    assert costmodel.expected_throughput(profile, 100, n, 0) == costmodel.expected_throughput(profile, 250, n, 0)
    fast = load_profile("baseline", speed=10, overrides={"prefill_ms_per_token": 0.0})
    assert costmodel.expected_throughput(fast, 5, n, 0) == pytest.approx(10 * costmodel.expected_throughput(
        profile, 5, n, 0))


def test_mean_tokens_per_step_is_one_without_speculation_and_harmonic_with() -> None:
    assert costmodel.mean_tokens_per_step(load_profile("baseline"), ["a", "b"], 512) == 1.0
    spec = load_profile("eagle3")
    prompts = ["first prompt", "second prompt", "third prompt"]
    limit = costmodel.mean_tokens_per_step(spec, prompts)
    exact = costmodel.mean_tokens_per_step(spec, prompts, 100000)
    assert exact == pytest.approx(limit, rel=0.002)
    direct = costmodel.expected_throughput_for_prompts(spec, 7, prompts, 300)
    via_mean = costmodel.expected_throughput(spec, 7, 300, costmodel.mean_prompt_tokens(spec, prompts),
                                             costmodel.mean_tokens_per_step(spec, prompts, 300))
    assert direct == pytest.approx(via_mean)


def test_single_prompt_can_win_while_the_diverse_mix_loses_at_c1() -> None:
    prompts = [as_chat(p) for p in load_suite_prompts()[0]]
    base, spec = load_profile("baseline"), load_profile("eagle3")
    singles = [costmodel.expected_throughput_for_prompts(spec, 1, [p], 512) for p in prompts]
    base_c1 = costmodel.expected_throughput_for_prompts(base, 1, prompts, 512)
    assert max(singles) > base_c1 * 1.03
    for level in (1, 2, 5, 10, 30, 70, 100, 250):
        assert (costmodel.expected_throughput_for_prompts(spec, level, prompts, 512)
                < costmodel.expected_throughput_for_prompts(base, level, prompts, 512))


def test_calibrated_profiles_are_within_ten_percent_of_the_seed() -> None:
    prompts = [as_chat(p) for p in load_suite_prompts()[0]]
    for name in ("baseline", "eagle3"):
        profile = load_profile(name)
        for level, seed in SEED_TPS[name].items():
            analytic = costmodel.expected_throughput_for_prompts(profile, level, prompts, 512)
            assert abs(analytic / seed - 1) < 0.10, (name, level, analytic, seed)


def test_emulated_tokenizer_and_template() -> None:
    assert estimate_prompt_tokens("abcd") == 1 and estimate_prompt_tokens("abcde") == 2
    assert estimate_prompt_tokens("") == 1
    messages = [{"role": "system", "content": "S"}, {"role": "user", "content": "Hi"}]
    assert render_chat(messages) == "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n" \
        "<|im_start|>assistant\n"
    assert prompt_key(messages) == "S\nHi"
    assert prompt_tokens(messages) == estimate_prompt_tokens(render_chat(messages))


def test_builtin_profiles_load() -> None:
    assert {"baseline", "eagle3"} <= set(available_profiles())
    for name in available_profiles():
        load_profile(name)
    assert load_profile("eagle3").max_running_requests == 48
    assert load_profile("eagle3-fair").max_running_requests == 80


def test_overrides_dotted_keys_and_speed() -> None:
    overrides = {"faults.error_503": 0.5, "speculative": {"num_steps": 2, "num_draft_tokens": 3}}
    profile = load_profile("eagle3", speed=5, overrides=overrides)
    assert profile.speed == 5 and profile.faults.error_503 == 0.5
    assert profile.speculative.num_steps == 2 and profile.speculative.step_a_ms == 25.7


@pytest.mark.parametrize(("text", "key"), [
    ("max_running_requests: 8\nstep_a_ms: fast\nstep_b_ms: 1\n", "step_a_ms"),
    ("max_running_requests: 8\nstep_a_ms: 1\nstep_b_ms: 1\nstep_c_ms: 1\n", "step_c_ms"),
    ("max_running_requests: 8\nstep_a_ms: 1\nstep_b_ms: 1\nfaults: {error_503: 0.7, error_500: 0.6}\n", "faults"),
    ("max_running_requests: 8\nstep_a_ms: 1\nstep_b_ms: 1\nspeculative: {step_a_ms: 2, step_b_ms: 1, "
     "num_steps: 3, num_draft_tokens: 6, acceptance: {alpha_min: 0.5, alpha_max: 0.6}}\n",
     "speculative.num_draft_tokens"),
    ("max_running_requests: 8\nstep_b_ms: 1\n", "step_a_ms"),
    ("max_running_requests: 8\nstep_a_ms: 1\nstep_b_ms: 1\nrefuse_status: 404\n", "refuse_status"),
    ("max_running_requests: 8\nstep_a_ms: 1\nstep_b_ms: 1\nretry_after_s: -1\n", "retry_after_s"),
    ("max_running_requests: 8\nstep_a_ms: 1\nstep_b_ms: 1\nretry_after_s: soon\n", "retry_after_s"),
])
def test_bad_profiles_name_file_and_key(tmp_path: Path, text: str, key: str) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    with pytest.raises(ProfileError) as info:
        load_profile(str(path))
    message = str(info.value)
    assert str(path) in message and f"'{key}'" in message and "\n" not in message


def test_invalid_yaml_and_unknown_name(tmp_path: Path) -> None:
    path = tmp_path / "broken.yaml"
    path.write_text("a: [1, 2\n")
    with pytest.raises(ProfileError, match="invalid YAML"):
        load_profile(str(path))
    with pytest.raises(ProfileError, match="no built-in profile named 'nope'"):
        load_profile("nope")

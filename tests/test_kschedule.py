"""The depth schedule by vLLM's rules (``contract.kschedule``).

The cases are the facts read in vLLM's released source: ``vllm/v1/spec_decode/dynamic/utils.py``
(``validate_and_normalize_dynamic_sd_schedule``, ``build_dynamic_sd_schedule_lookup``), the same in every
release from 0.24.0 (the first with ``num_speculative_tokens_per_batch_size``) to 0.34.0, and the schedules its
own tests use (``tests/v1/spec_decode/test_dynamic_sd.py``). tests/realserver/test_kschedule_vllm.py runs our
emitted JSON through the installed vLLM's own functions.
"""

from __future__ import annotations

import json
import re

import pytest

from specbench.contract.kschedule import (
    ECHO_LIMIT,
    KScheduleError,
    depth_for_batch,
    disable_depth,
    disable_form,
    echo,
    parse_k_schedule,
    parse_release,
    read_speculative_config,
    release_form,
    speculative_config,
)


@pytest.mark.parametrize(("raw", "what"), [
    ([[2, 16, 3]], "must start at 1"),  # vLLM: test_dynamic_sd_requires_schedule_starting_at_batch_size_one
    ([[1, 16, 3], [16, 32, 2]], "overlap"),  # test_dynamic_sd_rejects_overlapping_ranges
    ([[1, 16, -1]], "K must be >= 0"),  # test_dynamic_sd_rejects_negative_k
    ([], "non-empty list"),  # test_dynamic_sd_rejects_empty_schedule
    ([[32, 64]], "expected [range_start, range_end, K]"),  # test_dynamic_sd_rejects_invalid_schedule_entry
    ([[0, 4, 1]], "must be positive"),
    ([[1, 8, 2], [12, 9, 1]], "start 12 is above its end 9"),
    ([[1, "8", 2]], "expected an integer"),
    ({"1": 3}, "non-empty list"),
])
def test_what_vllm_refuses_is_refused_with_the_entry_named(raw: object, what: str) -> None:
    with pytest.raises(KScheduleError) as info:
        parse_k_schedule(raw)
    assert what in str(info.value)


def test_what_vllm_takes_is_taken_sorted() -> None:
    # Near misses: touching ranges do not overlap, gaps are allowed, the order is free, K = 0 is speculation off.
    assert parse_k_schedule([[17, 32, 2], [1, 16, 3]]) == ((1, 16, 3), (17, 32, 2))
    assert parse_k_schedule([[1, 16, 3], [32, 128, 2], [256, 2048, 0]]) == ((1, 16, 3), (32, 128, 2), (256, 2048, 0))


def test_a_depth_above_num_speculative_tokens_is_refused_though_vllm_would_clamp_it() -> None:
    assert parse_k_schedule([[1, 256, 3]], 3) == ((1, 256, 3),)
    with pytest.raises(KScheduleError, match="K 4 is more than num_speculative_tokens"):
        parse_k_schedule([[1, 256, 4]], 3)  # vLLM: test_dynamic_sd_clamps_k_to_runtime_max (4 -> 3)


def test_the_lookup_carries_the_previous_depth_through_gaps_and_past_the_end() -> None:
    schedule = parse_k_schedule([[1, 16, 3], [32, 128, 2], [256, 2048, 0]])  # vLLM: test_dynamic_sd_uses_...
    got = {b: depth_for_batch(schedule, b, 5) for b in (1, 16, 17, 31, 32, 128, 129, 255, 256, 4096)}
    assert got == {1: 3, 16: 3, 17: 3, 31: 3, 32: 2, 128: 2, 129: 2, 255: 2, 256: 0, 4096: 0}
    assert depth_for_batch((), 7, 5) == 5  # no schedule: the static depth


def test_the_speculative_config_is_read_and_its_errors_name_the_field() -> None:
    text = json.dumps({"method": "ngram", "num_speculative_tokens": 4,
                       "num_speculative_tokens_per_batch_size": [[1, 4, 4], [5, 64, 1]]})
    assert read_speculative_config(text) == (4, ((1, 4, 4), (5, 64, 1)))
    assert read_speculative_config('{"num_speculative_tokens": 2}') == (2, ())
    for bad, what in (("[1]", "expected a JSON object"), ("{", "not JSON"),
                      ('{"num_speculative_tokens": 0}', "num_speculative_tokens: expected an integer >= 1"),
                      ('{"num_speculative_tokens": 2, "num_speculative_tokens_per_batch_size": [[2, 3, 1]]}',
                       "num_speculative_tokens_per_batch_size: the first batch-size range must start at 1")):
        with pytest.raises(KScheduleError) as info:
            read_speculative_config(bad)
        assert what in str(info.value), (bad, str(info.value))


def test_the_emitted_config_keeps_the_users_keys_and_sets_depth_and_schedule() -> None:
    base = {"method": "eagle3", "model": "/m/draft", "num_speculative_tokens": 9, "disable_by_batch_size": 4}
    config = speculative_config(base, 5, [(1, 8, 5), (9, 256, 1)])
    assert config == {"method": "eagle3", "model": "/m/draft", "num_speculative_tokens": 5,
                      "num_speculative_tokens_per_batch_size": [[1, 8, 5], [9, 256, 1]]}
    assert read_speculative_config(json.dumps(config)) == (5, ((1, 8, 5), (9, 256, 1)))
    assert speculative_config(base, 2) == {"method": "eagle3", "model": "/m/draft", "num_speculative_tokens": 2}
    with pytest.raises(KScheduleError):
        speculative_config(base, 2, [(1, 8, 3)])  # the suite never writes a schedule deeper than its config


def test_each_release_gets_the_form_it_has() -> None:
    assert parse_release("v0.24.0rc1") == (0, 24, 0) and parse_release("0.9") == (0, 9, 0)
    with pytest.raises(ValueError, match="expected a vLLM release"):
        parse_release("latest")
    forms = {r: release_form(parse_release(r)) for r in ("0.8.1", "0.8.2", "0.9.2", "0.10.0", "0.16.0", "0.23.0",
                                                         "0.24.0", "0.34.0")}
    assert forms == {"0.8.1": "none", "0.8.2": "disable", "0.9.2": "disable", "0.10.0": "none", "0.16.0": "none",
                     "0.23.0": "none", "0.24.0": "schedule", "0.34.0": "schedule"}
    assert release_form(None) == "schedule"


def test_a_release_is_ascii_digits_and_an_empty_one_is_refused() -> None:
    """'١.٢٤' (Arabic-Indic digits) passes str.isdigit and int() reads it as 1.24; no vLLM release is written so."""
    for bad in ("١.٢٤", "0.٢٤.0", "", "  ", "0.24.x"):
        with pytest.raises(ValueError, match="expected a vLLM release") as info:
            parse_release(bad)
        assert "\n" not in str(info.value)
    assert parse_release(" 0.9.0 ") == (0, 9, 0)  # near miss: ASCII, spaces around


def test_an_echo_of_a_huge_value_is_capped() -> None:
    text = echo(list(range(100_000)))
    assert len(text) < ECHO_LIMIT + 40 and text.endswith("characters)"), text
    assert echo([1, 2, 3]) == "[1, 2, 3]"  # near miss: short values as given


@pytest.mark.parametrize(("schedule", "why"), [
    ((), "there is no schedule"),
    (((1, 256, 0),), "off at every batch size"),
    (((1, 3, 0), (4, 256, 2)), "off at batch 1-3"),
    (((1, 8, 2), (9, 20, 0), (21, 256, 2)), "on again at batch 21 after turning it off at 9"),
    (((1, 8, 3), (9, 256, 2)), "runs 2 depths (K=2, K=3)"),
])
def test_the_disable_form_cannot_say_these(schedule: tuple[tuple[int, int, int], ...], why: str) -> None:
    with pytest.raises(KScheduleError, match=re.escape(why)):
        disable_form(schedule)


@pytest.mark.parametrize(("schedule", "form"), [
    (((1, 3, 2), (4, 256, 0)), (2, 4)),
    (((1, 1, 5), (2, 64, 0)), (5, 2)),  # N = 2, the least vLLM's config takes
    (((1, 256, 3),), (3, None)),
])
def test_the_disable_form_says_these_exactly(schedule: tuple[tuple[int, int, int], ...],
                                             form: tuple[int, int | None]) -> None:
    """V0 vLLM (0.8.2-0.9.2) turns speculation off for a step when running_queue_size >= disable_by_batch_size."""
    assert disable_form(schedule) == form
    for batch in range(1, 300):
        assert disable_depth(*form, batch) == depth_for_batch(schedule, batch, 0), batch

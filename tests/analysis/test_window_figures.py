"""Window and per-request figures on hand-built records whose answers are known exactly."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from specbench.analysis.records.request_metrics import (
    acceptance_length,
    itl_samples_s,
    per_request_tok_s,
    tpot_s,
    ttft_s,
)
from specbench.contract.window import (
    achieved_concurrency,
    batch_throughputs,
    measured_in_window,
    window_throughput,
    window_tokens,
)


def rec(start: float, chunk_ms: list[float], cum: list[int], *, e2e: float, status: str = "ok",
        spec: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"schema": 1, "request_id": f"r{start}", "start_s": start, "e2e_s": e2e, "status": status,
            "chunk_ms": chunk_ms, "chunk_tokens": cum, "output_tokens": cum[-1] if cum else 0,
            "ttft_s": chunk_ms[0] / 1000 if chunk_ms else None, "spec": spec}


# Window [100, 110).
STRADDLER = rec(95.0, [2000, 6000, 12000, 16000], [1, 4, 6, 10], e2e=16.0)  # arrivals 97, 101, 107, 111
INSIDE = rec(102.0, [1000, 3000], [2, 5], e2e=4.0)  # arrivals 103, 105
FAILED = rec(104.0, [1000], [7], e2e=4.0, status="stream_error")  # arrival 105, never counted
LATE = rec(109.5, [600], [3], e2e=1.5)  # arrival 110.1, after the window
RECORDS = [STRADDLER, INSIDE, FAILED, LATE]


def test_straddling_request_counts_only_its_in_window_tokens() -> None:
    # STRADDLER brings 3 tokens at 101 and 2 at 107; INSIDE brings 5; the failed request brings none.
    assert window_tokens(RECORDS, 100.0, 110.0) == 10
    assert window_throughput(RECORDS, 100.0, 110.0) == pytest.approx(1.0)


def test_achieved_concurrency_is_time_in_flight_of_all_statuses_over_window_length() -> None:
    # 10 s (straddler clipped) + 4 s + 4 s (failed, still occupied a user) + 0.5 s, over 10 s.
    assert achieved_concurrency(RECORDS, 100.0, 110.0) == pytest.approx(1.85)


def test_per_request_statistics_use_requests_that_started_and_finished_in_the_window() -> None:
    assert measured_in_window(RECORDS, 100.0, 110.0) == [INSIDE, FAILED]


def test_batch_means_average_to_the_window_throughput() -> None:
    batches = batch_throughputs(RECORDS, 100.0, 110.0, 5)
    assert batches.tolist() == pytest.approx([1.5, 1.0, 1.5, 1.0, 0.0])  # 3@101, 2@103 + 3@105, 2@107
    assert batches.mean() == pytest.approx(window_throughput(RECORDS, 100.0, 110.0))


MULTI = rec(0.0, [100.0, 130.0, 150.0], [2, 5, 6], e2e=0.15)


def test_a_chunk_gap_with_three_tokens_gives_three_itl_samples_of_a_third_of_the_gap() -> None:
    # First chunk (2 tokens at 100 ms) is TTFT, not ITL; 30 ms brought 3 tokens; 20 ms brought 1.
    assert itl_samples_s(MULTI) * 1000 == pytest.approx([10.0, 10.0, 10.0, 20.0])


def test_tpot_spreads_time_after_the_first_token_over_the_remaining_tokens() -> None:
    assert ttft_s(MULTI) == pytest.approx(0.1)
    assert tpot_s(MULTI) == pytest.approx((0.15 - 0.1) / 5)


def test_per_request_speed_is_output_tokens_over_end_to_end_latency() -> None:
    assert per_request_tok_s(MULTI) == pytest.approx(6 / 0.15)


def test_acceptance_length_is_tokens_over_verify_passes_from_either_spec_field() -> None:
    counted = rec(0.0, [10.0], [6], e2e=0.1, spec={"verify_ct": 3})
    reported = rec(0.0, [10.0], [8], e2e=0.1, spec={"accept_length": 4.0})
    plain = rec(0.0, [10.0], [100], e2e=0.1)
    assert acceptance_length([counted]) == pytest.approx(2.0)
    assert acceptance_length([counted, reported, plain]) == pytest.approx((6 + 8) / (3 + 2))
    assert acceptance_length([plain]) is None


def test_no_chunks_give_no_itl_samples() -> None:
    assert len(itl_samples_s(rec(0.0, [], [], e2e=1.0, status="timeout"))) == 0
    assert np.array_equal(itl_samples_s(rec(0.0, [5.0], [4], e2e=1.0)), np.zeros(0))


def _sample(t_s: float, verify: float, by_position: list[float]) -> dict[str, Any]:
    values = {"spec_verify_total": verify} | {f"spec_accepted_pos_{i}": v for i, v in enumerate(by_position)}
    return {"schema": 1, "t_s": t_s, "server": "llamacpp", "values": values, "raw": {}}


def test_acceptance_by_position_counts_from_zero_where_a_fresh_server_listed_no_position() -> None:
    from specbench.analysis.records.server_side import server_accept_by_position

    # llama.cpp lists a position once a draft reached it: before the first draft the family is absent.
    rates = server_accept_by_position([_sample(0.0, 0, []), _sample(1.0, 10, [8, 5]), _sample(2.0, 20, [16, 9, 2])])
    assert rates == pytest.approx((0.8, 0.45, 0.1))
    assert server_accept_by_position([_sample(1.0, 10, [8, 5]), _sample(2.0, 20, [16, 9])]) == pytest.approx((0.8, 0.4))
    # Not exported (no position in the last sample), or no pass in between: no figure, never zeros.
    assert server_accept_by_position([_sample(0.0, 0, []), _sample(1.0, 10, [])]) is None
    assert server_accept_by_position([_sample(0.0, 10, [8]), _sample(1.0, 10, [8])]) is None

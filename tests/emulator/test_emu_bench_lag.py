"""Short version of the lag benchmark: many concurrent streams, achieved step time stays on the model."""

from __future__ import annotations

import pytest

from bench_lag import run_lag

pytestmark = pytest.mark.serial  # judges timing: runs after the parallel part, alone (pyproject.toml)


def test_many_streams_keep_to_the_model() -> None:
    result = run_lag(streams=120, speed=4.0, window_s=2.0, warmup_s=1.0)
    print(result.summary())
    assert result.mean_batch > 119
    assert abs(result.lag) < 0.05
    assert abs(result.client_tps / result.model_tps - 1) < 0.08

"""A clean measured step built in memory, for tests of the sentences a StepRow can make the report print."""

from __future__ import annotations

from dataclasses import replace

from specbench.analysis.records.steprow import StepRow


def clean_row(c: int = 4, **changes: object) -> StepRow:
    """A step at C=c measured in full with nothing to say (no warning, no why line), then ``changes`` applied."""
    base = StepRow(step=0, target_c=c, achieved_c=float(c), window_start_s=0.0, window_end_s=30.0, window_s=30.0,
                   partial=False, requests_ok=100, requests_total=100, failures={}, error_rate=0.0, min_requests=30,
                   throughput_tok_s=1000.0, per_request_tok_s=50.0, ttft_p50_s=0.1, ttft_p99_s=0.2,
                   itl_p50_s=0.01, itl_p99_s=0.02, tpot_p50_s=0.01, tpot_p99_s=0.02, e2e_avg_s=1.0, e2e_p50_s=1.0,
                   e2e_p99_s=2.0, accept_length=None, chunk_counted_requests=0, server_samples=10,
                   server_queued=0.0, server_running=float(c), server_running_max=float(c))
    return replace(base, **changes)  # type: ignore[arg-type]  # field names and types are the caller's

"""``server_gauge_stale`` (#60): near misses of each condition, and what the row keeps.

The real case is pinned against vLLM itself (tests/realserver/test_vllm_draft_model.py): with a draft model its
running gauge read 0 in most reads while 4 streams were in flight and its token counter matched the client's.
"""

from __future__ import annotations

from steprows import clean_row

from specbench.analysis.records.gaugecheck import MIN_HELD, MIN_SAMPLES, STALE_SHARE, stale_gauges
from specbench.analysis.records.server_side import MAX_TOKEN_GAP

EPS = 1e-6
C = 4


def _judge(**changes: object) -> tuple[bool, str]:
    row = clean_row(C, **{"server_token_gap": 0.0, "server_gen_tok_s": 1000.0, **changes})
    (kept,), said = stale_gauges([row])
    left_out = kept.server_running is None
    assert left_out is bool(said)
    if left_out:
        assert kept.server_running_max is None and kept.server_queued is None
        assert kept.throughput_tok_s == row.throughput_tok_s  # nothing else is touched
    return left_out, " ".join(said)


def test_half_the_concurrency_at_the_server_is_silent_just_under_speaks() -> None:
    edge = STALE_SHARE * C
    assert _judge(server_running=edge, server_queued=0.0) == (False, "")
    assert _judge(server_running=edge / 2, server_queued=edge / 2)[0] is False  # waiting counts as at the server
    left_out, text = _judge(server_running=edge * (1 - EPS), server_queued=0.0)
    assert left_out
    assert text.startswith("C=4: the server's running + waiting gauges averaged 2.00 over 10 reads while the client "
                           "held 4.00 requests open, and its generation counter matched the client's tokens (+0.0%)")


def test_a_disagreeing_counter_or_too_few_reads_say_nothing() -> None:
    stale = {"server_running": 0.0, "server_queued": 0.0}
    assert _judge(**stale)[0]
    assert _judge(**stale, server_token_gap=MAX_TOKEN_GAP)[0]  # at the gap's bound the counter still agrees
    assert not _judge(**stale, server_token_gap=MAX_TOKEN_GAP * (1 + EPS))[0]  # the token gap speaks instead
    assert not _judge(**stale, server_token_gap=None)[0]
    assert _judge(**stale, server_samples=MIN_SAMPLES)[0]
    assert not _judge(**stale, server_samples=MIN_SAMPLES - 1)[0]
    assert _judge(**stale, achieved_c=MIN_HELD)[0]  # C=1's achieved 0.998: one request open but between two
    assert not _judge(**stale, achieved_c=MIN_HELD * (1 - EPS))[0]  # an idle server between requests is true

"""The server-counter cross-check judges only spans whose edges no request finished close to.

The case is the one a CI run met (web UI test, C=3, 64-token requests, a finish-time counter, a 1 s window
with two samples): two requests ended within 1 ms of the first sample, counted by the server before it and seen
finished by the client just after it. Over that span the client's two attributions gave 392 and 512 tokens
for the server's 384, so the closer one read -2.0% and raised ``server_token_gap`` on a server that counted
right. Such a span is not judged now; the same requests with calm edges still are, exactly.
"""

from __future__ import annotations

from typing import cast

from specbench.analysis.records.server_side import MAX_TOKEN_GAP, server_step
from specbench.contract.schema import RequestRecord
from specbench.contract.server_metrics import ServerMetricsSample

TOKENS = 64
E2E_S = 0.45


def _record(end_s: float) -> RequestRecord:
    """An ok request of TOKENS tokens, one per chunk, evenly over E2E_S, ending at ``end_s``."""
    chunk_ms = [E2E_S * 1000.0 * (i + 1) / TOKENS for i in range(TOKENS)]
    return cast(RequestRecord, {"status": "ok", "start_s": end_s - E2E_S, "e2e_s": E2E_S, "output_tokens": TOKENS,
                                "chunk_ms": chunk_ms, "chunk_tokens": list(range(1, TOKENS + 1))})


def _sample(t_s: float, counted_requests: int) -> ServerMetricsSample:
    return ServerMetricsSample(schema=1, t_s=t_s, read_s=0.003, server="sglang", raw={},
                               values={"generation_tokens_total": float(TOKENS * counted_requests)})


def _ends(first: float) -> list[float]:
    """Three users finishing in lock-step every 0.45 s or so, from ``first`` on."""
    return [first + k * 0.47 + d for k in range(6) for d in (0.0, 0.001, 0.05)]


def test_edges_at_request_ends_are_not_judged() -> None:
    ends = _ends(-0.47)  # requests end at 0.0 and 0.001 (and 0.05): right on the first sample at 0.0005
    records = [_record(e) for e in ends]
    # finish-time counter: the server counted the two that end at the first sample before it was read
    first = _sample(0.0005, sum(1 for e in ends if e < 0.002))
    last = _sample(1.0, sum(1 for e in ends if e < 1.0))
    side = server_step([first, last], records, -0.1, 1.1)
    assert side is not None and side.gen_tok_s is not None and side.token_gap is None and side.client_tok_s is None


def test_calm_edges_are_judged_and_a_right_counter_agrees_exactly() -> None:
    ends = _ends(-0.3)  # no request ends within 10 ms of 0.0 or 1.0
    records = [_record(e) for e in ends]
    first, last = _sample(0.0, sum(1 for e in ends if e < 0.0)), _sample(1.0, sum(1 for e in ends if e < 1.0))
    side = server_step([first, last], records, -0.1, 1.1)
    assert side is not None and side.token_gap == 0.0
    wrong = _sample(1.0, sum(1 for e in ends if e < 1.0) + 1)  # one request's tokens too many
    side = server_step([first, wrong], records, -0.1, 1.1)
    assert side is not None and side.token_gap is not None and side.token_gap > MAX_TOKEN_GAP


def test_the_server_table_sets_the_gap_beside_the_client_figure_it_was_judged_on(tmp_path) -> None:
    # #61: the server table showed the server's rate over a quiet span beside the client's whole-window tok/s
    # (8,089.6 against 3,647.2) and a gap of +0.0% computed against a third figure. Its client column is now the
    # client's tokens over the same seconds: server / client - 1 is the gap the row shows.
    from synthetic_runs import small_pair, write_run

    from specbench.analysis.records.load import load_run
    from specbench.analysis.records.summary import summarize_run
    from specbench.analysis.reporting.columns import SERVER_COLUMNS

    _, spec = small_pair()
    spec.server_counter_factor = 1.03
    rows = summarize_run(load_run(write_run(tmp_path / "spec", spec))).rows
    judged = [r for r in rows if r.server_token_gap is not None]
    assert judged
    cells = {c.header: c for c in SERVER_COLUMNS}
    for row in judged:
        assert row.server_gen_tok_s is not None and row.server_client_tok_s is not None
        assert row.server_gen_tok_s / row.server_client_tok_s - 1 == row.server_token_gap
        shown = (float(cells["server tok/s"].cell(row)) / float(cells["client tok/s same span"].cell(row)) - 1)
        assert abs(shown - row.server_token_gap) < 0.002, (row.target_c, shown, row.server_token_gap)

"""The decomposition's arithmetic and its fallbacks on hand-made records whose answers are known exactly."""

from __future__ import annotations

from typing import Any

import pytest

from specbench.analysis.verdicts.decompose import decompose_level
from specbench.analysis.verdicts.why import load_why


def _record(tokens: int, pass_ms: float, passes: int | None, spec: dict[str, Any] | None = None,
            category: str = "qa") -> dict[str, Any]:
    """A request whose first token came at 50 ms and whose decode passes each took ``pass_ms``."""
    passes = tokens - 1 if passes is None else passes
    decode_ms = passes * pass_ms
    return {"output_tokens": tokens, "ttft_s": 0.05, "e2e_s": 0.05 + decode_ms / 1000 + 0.002,
            "chunk_ms": [50.0, 50.0 + decode_ms], "chunk_tokens": [1, tokens], "status": "ok",
            "category": category, "spec": spec}


def test_identity_on_known_requests() -> None:
    base = [_record(41, 10.0, None) for _ in range(6)]
    spec = [_record(41, 25.0, 16, {"verify_ct": 16, "source": "meta_info"}),
            _record(41, 25.0, 20, {"verify_ct": 20, "source": "meta_info"})] * 3
    d = decompose_level(4, base, spec)
    assert d is not None
    # tokens per pass: 1 / mean(16/40, 20/40) = 40/18; a pass costs 2.5 steps
    assert d.spec.tokens_per_pass.value == pytest.approx(40 / 18)
    assert d.spec.tokens_per_pass_tok.value == pytest.approx(40 / 18)
    assert d.pass_cost.value == pytest.approx(2.5)
    assert d.product.value == pytest.approx(40 / 18 / 2.5)
    assert d.measured.value == pytest.approx(d.product.value)  # equal pass times: the identity is exact
    assert d.spec.source == "records: verify_ct (meta_info)"


def test_server_acceptance_stands_in_without_per_request_figures() -> None:
    base = [_record(41, 10.0, None) for _ in range(4)]
    spec = [_record(41, 20.0, 20) for _ in range(4)]  # no spec fields at all
    d = decompose_level(1, base, spec, server_accept=(2.0, "counters"))
    assert d is not None
    assert d.spec.tokens_per_pass.value == pytest.approx(2.0) and d.spec.tokens_per_pass.low is None
    assert d.spec.source.startswith("server /metrics accepted/verify counters")
    assert d.pass_cost.value == pytest.approx(2.0)
    assert decompose_level(1, base, spec) is None  # neither source: no decomposition rather than a guess
    assert d.server_tokens_per_pass is None and d.server_gap is None  # the factor itself: nothing to check it by


def test_the_server_own_acceptance_checks_the_records_where_both_exist() -> None:
    """The one independent check: records' passes against the server's counters over the window. Product and
    measured share their times, so with one acceptance for every request they agree by construction."""
    base = [_record(41, 10.0, None) for _ in range(4)]
    spec = [_record(41, 20.0, 16, {"verify_ct": 16}), _record(41, 30.0, 24, {"verify_ct": 24})] * 2
    agreeing = decompose_level(1, base, spec, server_accept=(2.0, "counters"))
    assert agreeing is not None and agreeing.server_tokens_per_pass == 2.0
    assert agreeing.spec.tokens_per_pass_tok.value == pytest.approx(80 / 40)
    assert agreeing.server_gap == pytest.approx(0.0)
    told = decompose_level(1, base, spec, server_accept=(2.5, "counters"))  # the server claims more acceptance
    assert told is not None and told.server_gap == pytest.approx(2.0 / 2.5 - 1)
    same_times = decompose_level(1, base, [_record(41, 20.0, 20)] * 4, server_accept=(1.6, "counters"))
    assert same_times is not None and same_times.product.value == pytest.approx(same_times.measured.value)


def test_why_names_both_when_neither_dominates() -> None:
    base = [_record(41, 10.0, None) for _ in range(4)]
    low = decompose_level(1, base, [_record(41, 20.0, 10, {"verify_ct": 10})] * 4)
    # acceptance 4 -> 2.5 tokens/pass and a pass 2x -> 3.2x a step: log shares about 1/2 each
    high = decompose_level(8, base, [_record(41, 32.0, 16, {"verify_ct": 16})] * 4)
    assert low is not None and high is not None
    line = load_why([low, high], 8)
    assert line is not None and "acceptance fell from 4.00 to 2.50" in line and "2.00x to 3.20x" in line
    assert "the loss under load is both: draft quality 50%, verify cost 50% of it" in line
    assert load_why([low, high], 1) is None  # the lowest level has nothing to compare with

"""SGLang's draft counters of an intermediate generation (issue #39).

Between the generation that named its per-request figures ``spec_accept_token_num``/``spec_draft_token_num`` and the
one that names them ``spec_num_correct_drafts``/``spec_num_proposed_drafts``, SGLang used ``spec_accepted_drafts`` /
``spec_proposed_drafts``; the emulator's ``sglang-drafts`` vintage exports them as Prometheus counters
(``sglang:spec_accepted_drafts_total``, ``sglang:spec_proposed_drafts_total``), beside the verify-pass counter. The
suite maps them onto ``spec_accepted_tokens_total`` and ``spec_draft_tokens_total``, where it reads vLLM's and
llama.cpp's, so the server's acceptance length comes from drafts accepted per verify pass. Before they were mapped
the two counters were kept raw and the vocabulary had neither term.
"""

from __future__ import annotations

import pytest

from specbench.analysis.records.server_side import server_accept_source
from specbench.contract.server_metrics import parse_metrics
from specbench.emulator.metrics import Metrics
from specbench.emulator.metrics_render import render
from specbench.emulator.profile import load_profile
from specbench.emulator.scheduler import Scheduler


def _sample(verify: int, accepted: int, proposed: int, generated: int, t_s: float) -> dict[str, object]:
    profile = load_profile("eagle3", overrides={"vintage": "sglang-drafts"})
    metrics = Metrics(profile, Scheduler(profile))
    part = metrics.parts[0]
    part.verify, part.drafts_accepted, part.drafts_proposed = verify, accepted, proposed
    part.generation_tokens["true"] = generated
    return dict(parse_metrics(render(metrics), t_s))


def test_the_vintage_exports_the_draft_counters() -> None:
    profile = load_profile("eagle3", overrides={"vintage": "sglang-drafts"})
    text = render(Metrics(profile, Scheduler(profile)))
    assert "sglang:spec_accepted_drafts_total" in text and "sglang:spec_proposed_drafts_total" in text
    default = load_profile("eagle3")
    assert "spec_accepted_drafts" not in render(Metrics(default, Scheduler(default)))


def test_draft_counters_are_read_into_the_vocabulary() -> None:
    sample = _sample(verify=20, accepted=30, proposed=60, generated=52, t_s=0.0)
    values = sample["values"]
    assert isinstance(values, dict)
    assert values["spec_accepted_tokens_total"] == 30
    assert values["spec_draft_tokens_total"] == 60
    assert values["spec_verify_total"] == 20
    raw = sample["raw"]
    assert isinstance(raw, dict)
    assert not any("drafts" in key for key in raw), raw


def test_acceptance_length_from_the_draft_counters() -> None:
    first = _sample(verify=20, accepted=30, proposed=60, generated=52, t_s=0.0)
    # 10 more passes with 25 drafts accepted; the token counter (finished requests) moved by a different amount
    last = _sample(verify=30, accepted=55, proposed=90, generated=80, t_s=1.0)
    found = server_accept_source([first, last])  # type: ignore[list-item]
    assert found == (pytest.approx(1 + 25 / 10), "counters")

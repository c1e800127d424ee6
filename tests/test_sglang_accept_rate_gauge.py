"""SGLang's ``sglang:spec_accept_rate`` is not a draft acceptance rate (issue #39).

In SGLang's scheduler (``log_decode_stats``) the gauge is the tokens accepted over the log window, the bonus token
of every verify pass included, over verify passes x ``speculative_num_draft_tokens`` (the draft length counted with
that token): the acceptance length over the draft length. With 3 drafts per pass, a length of 2.5 reads 0.625,
while the share of draft tokens accepted is 1.5 / 3 = 0.5. The emulator's SGLang vintages write the gauge by that
definition; the suite keeps it as ``server_accept_rate`` and no longer files it under ``accept_rate`` (accepted
draft tokens / proposed draft tokens), where it used to land.
"""

from __future__ import annotations

import pytest

from specbench.contract.server_metrics import TERMS, parse_metrics
from specbench.emulator.metrics import Metrics
from specbench.emulator.metrics_render import render
from specbench.emulator.profile import load_profile
from specbench.emulator.scheduler import Scheduler, WindowGauges


@pytest.mark.parametrize("vintage", ["sglang-0.5.23", "sglang-drafts"])
def test_the_gauge_is_not_read_as_a_draft_acceptance_rate(vintage: str) -> None:
    profile = load_profile("eagle3", overrides={"vintage": vintage})
    assert profile.speculative is not None
    draft_len = profile.speculative.num_draft_tokens
    scheduler = Scheduler(profile)
    draft_rate = 1.5 / (draft_len - 1)
    scheduler.window = WindowGauges(running=2, spec_accept_length=2.5, spec_accept_rate=draft_rate)
    values = parse_metrics(render(Metrics(profile, scheduler)), 0.0)["values"]
    assert values["server_accept_rate"] == pytest.approx(2.5 / draft_len)
    assert "accept_rate" not in values
    assert "bonus included" in TERMS["server_accept_rate"].meaning

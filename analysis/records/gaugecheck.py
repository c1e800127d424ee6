"""The server's running and waiting gauges against the client's own concurrency: a stale gauge is left out.

In closed loop every request the client holds open is at the server (running or waiting) but for the moments it
spends on the wire, so over a window the server's running + waiting gauges average close to the client's achieved
concurrency. Far below it, while the server's generation counter agrees with the client's tokens over the same
seconds (the server is up, counted and serving these requests), the gauges are not current: vLLM 0.32 (CPU build)
with a draft model read 0 running in 20 of 25 reads while 4 streams were in flight, and at C=1 read 0 in every read
with a draft model and with n-gram speculation alike, its counters matching the client's tokens exactly
(tests/realserver/test_vllm_draft_model.py). It comes and goes from run to run on a busy 2-core machine (another
run kept the draft model's gauges current and left n-gram's at C=4 stale); why (vLLM's stats path, or its API
process starved of CPU): not confirmed. Such a step's running, its maximum and its
waiting figures are flagged and left out (never averaged in): they would show an idle server, and the verdict's
reasons read them. Without the counter's agreement the two cannot be told apart (a gateway in front of several
servers shows one server's gauges and one server's tokens) and nothing is said here; the token gap speaks then.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from specbench.analysis.records.server_side import MAX_TOKEN_GAP
from specbench.analysis.records.steprow import StepRow

# Below this share of the client's concurrency the gauges are stale: a current gauge misses only requests on the
# wire, a small share of any request's life (a 64-token answer of a 5 ms-a-step model takes ~100 ms; the wire
# and the client's turn-around a millisecond or two).
STALE_SHARE = 0.5
MIN_SAMPLES = 3  # gauge reads in the window before its mean says anything
# At least this many requests held open on average: a fresh gauge then reads 0 at a read only while the one
# request is on the wire or between requests (under a tenth of the time), so a mean under half from 3 or more reads
# is not chance. Below it (open loop at a low rate) an idle server between requests is the truth.
MIN_HELD = 0.9


def stale_gauges(rows: Sequence[StepRow]) -> tuple[list[StepRow], list[str]]:
    """The rows with stale running/waiting figures left out, and one sentence per row left so."""
    kept: list[StepRow] = []
    said: list[str] = []
    for row in rows:
        held = row.achieved_c
        at_server = (row.server_running or 0.0) + (row.server_queued or 0.0)
        if (row.server_running is not None and held is not None and held >= MIN_HELD
                and row.server_samples >= MIN_SAMPLES
                and row.server_token_gap is not None and abs(row.server_token_gap) <= MAX_TOKEN_GAP
                and at_server < STALE_SHARE * held):
            said.append(f"{row.level_text}: the server's running + waiting gauges averaged {at_server:.2f} over "
                        f"{row.server_samples} reads while the client held {held:.2f} requests open, and its "
                        f"generation counter matched the client's tokens ({row.server_token_gap:+.1%}): the gauges "
                        "are not current; its running and waiting figures are left out")
            row = replace(row, server_running=None, server_running_max=None, server_queued=None)
        kept.append(row)
    return kept, said

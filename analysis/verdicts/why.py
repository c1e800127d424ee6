"""Why a level came out as it did, in the servers' own words: one line per level where the data support one.

Built from the server-side figures of each step (``analysis.records.server_side``) and the load processes' CPU:
a server that queued because it capped its running batch, a KV cache near full, acceptance that fell as
load rose, a client that ran out of CPU. Levels without such evidence get no line rather than a guess.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from specbench.analysis.records.checks import row_read_lag_ms
from specbench.analysis.records.summary import StepRow
from specbench.analysis.verdicts.decompose import Decomposition
from specbench.analysis.verdicts.pair_checks import MIN_GAUGE_SAMPLES
from specbench.contract.policy import CLIENT_BOUND_CPU, client_lagged, read_lagged

MIN_QUEUED = 1.0  # mean requests waiting for a slot before queueing counts as a cause
KV_FULL = 0.90
ACCEPT_DROP = 0.90  # acceptance length below this share of its value at the lowest level
RATIO_MOVED = 0.05  # the decomposed ratio moved by more than this share since the lowest level
FACTOR_HELD = 0.05  # a factor that moved less than this share "held"
MAIN_SHARE = 2 / 3  # a factor carrying this share of the ratio's (log) change is "the" cause


def _plural(n: float, word: str) -> str:
    return f"{n:.0f} {word}" if round(n) == 1 else f"{n:.0f} {word}s"


def _queue_reason(name: str, row: StepRow, other: StepRow, declared_cap: int | None) -> str | None:
    """'spec queued 12 requests on average: capped at 48 running', only where the data show a cap.

    A queue gauge also counts the instant between one request's end and the next one's admission, so a mean of
    one or two waiting is no cause by itself: the line needs the server to have run fewer than C while requests
    waited (its running gauge's maximum in the window below C) or a declared cap below C (``max_running_requests``
    in meta.json). A server whose running reached C had no cap in the way, whatever its queue gauge said. The
    queue figure counts only on ``MIN_GAUGE_SAMPLES`` samples, as the cap check's does.
    """
    queued = row.server_queued
    if queued is None or queued < MIN_QUEUED or row.server_samples < MIN_GAUGE_SAMPLES:
        return None
    if other.server_queued is not None and other.server_queued >= queued / 2:
        return None
    held_below = row.server_running_max is not None and row.server_running_max < row.target_c
    declared_below = declared_cap is not None and declared_cap < row.target_c
    if not (held_below or declared_below):
        return None
    if held_below:
        assert row.server_running_max is not None
        cap = f"capped at {row.server_running_max:.0f} running"
        if declared_cap is not None:
            cap += f" (max_running_requests {declared_cap})"
    else:
        cap = f"capped at {declared_cap} running (max_running_requests)"
    return f"{name} queued {_plural(queued, 'request')} on average: {cap}"


def _side(name: str, row: StepRow, other: StepRow, declared_cap: int | None) -> list[str]:
    found = []
    queue = _queue_reason(name, row, other, declared_cap)
    if queue:
        found.append(queue)
    if row.server_kv_usage is not None and row.server_kv_usage >= KV_FULL:
        found.append(f"{name} KV cache {row.server_kv_usage:.0%} full")
    if row.client_cpu_max is not None and row.client_cpu_max > CLIENT_BOUND_CPU:
        found.append(f"{name}'s load process used {row.client_cpu_max:.0%} of a core: the client may set the pace")
    if client_lagged(row.send_lag_p90_ms, row.ttft_p50_s):
        found.append(f"{name}'s requests went on the wire late (send lag p90 {row.send_lag_p90_ms:.0f} ms): the client "
                     "may set the pace")
    if read_lagged(lag := row_read_lag_ms(row), row.ttft_p50_s):
        found.append(f"{name}'s load process read streams late (read lag p90 {lag:.0f} ms): its "
                     "TTFT and ITL carry the client's delay")
    return found


def accept_length(row: StepRow) -> float | None:
    """The server's acceptance length when it reports one, else the one the records give."""
    return row.server_accept_length if row.server_accept_length is not None else row.accept_length


def level_why(base: StepRow, spec: StepRow, spec_rows: Sequence[StepRow], *, acceptance: bool = True,
              caps: tuple[int | None, int | None] = (None, None)) -> str | None:
    """The reasons for one level, joined by '; ', or None when the data show none.

    ``acceptance=False`` leaves out the server's acceptance drop, for levels whose decomposition line
    (``load_why``) already tells how acceptance moved. ``caps``: the baseline's and the spec server's declared
    ``max_running_requests`` (None where not declared).
    """
    reasons = [*_side("spec", spec, base, caps[1]), *_side("baseline", base, spec, caps[0])]
    measured = [r for r in spec_rows if r.window_s and accept_length(r) is not None]
    first = min(measured, key=lambda r: r.target_c) if measured else None
    now = accept_length(spec)
    if acceptance and first is not None and now is not None and first.target_c < spec.target_c:
        then = accept_length(first)
        if then and now < ACCEPT_DROP * then:
            reasons.append(f"spec acceptance length {now:.2f}, down from {then:.2f} at C={first.target_c}")
    return "; ".join(reasons) or None


def well_measured(base: StepRow, spec: StepRow) -> bool:
    """Both runs measured their step's minimum of ok requests (``min_requests``; else the step is flagged
    ``few_requests``). A load clause compares two levels' decompositions; one resting on a request or two (a level
    a time budget cut short) can point the other way from the level's measured ratio, so such levels take no part.
    """
    return base.requests_ok >= base.min_requests and spec.requests_ok >= spec.min_requests


def _acceptance_text(first: Decomposition, now: Decomposition) -> str:
    a, b = first.spec.tokens_per_pass, now.spec.tokens_per_pass
    assert a.value is not None and b.value is not None
    span = f"from C={first.target_c} to C={now.target_c}"
    if abs(b.value / a.value - 1) < FACTOR_HELD:
        widths = [w for w in (a.half_width, b.half_width) if w is not None]
        spread = f" (+-{max(widths):.2f})" if widths else ""
        return f"acceptance held at {b.value:.2f} tokens/pass {span}{spread}"
    way = "fell" if b.value < a.value else "rose"
    return f"acceptance {way} from {a.value:.2f} to {b.value:.2f} tokens/pass {span}"


def _cost_text(first: Decomposition, now: Decomposition) -> str:
    a, b = first.pass_cost.value, now.pass_cost.value
    assert a is not None and b is not None
    if abs(b / a - 1) < FACTOR_HELD:
        return f"a verify pass stayed at {b:.2f}x a baseline step ({a:.2f}x at C={first.target_c})"
    return f"a verify pass went from {a:.2f}x to {b:.2f}x a baseline step"


def _cause(draft: float, verify: float, change: str) -> str:
    total = draft + verify
    draft_share, verify_share = draft / total, verify / total
    if verify_share >= MAIN_SHARE:
        return f"the {change} under load is verify cost, not draft quality"
    if draft_share >= MAIN_SHARE:
        return f"the {change} under load is draft quality, not verify cost"
    return f"the {change} under load is both: draft quality {draft_share:.0%}, verify cost {verify_share:.0%} of it"


def load_why(decompositions: Sequence[Decomposition], target_c: int) -> str | None:
    """Whether draft yield or verify cost moved the speed ratio from the lowest level to this one.

    log(ratio) = log(tokens per pass) - log(pass cost), so the change since the lowest decomposed level splits
    exactly into the two; the larger share (two thirds or more) is named, else both with their shares. None at
    the lowest level, where the ratio moved less than ``RATIO_MOVED``, or without figures.
    """
    usable = [d for d in decompositions if d.spec.tokens_per_pass.value and d.pass_cost.value]
    now = next((d for d in usable if d.target_c == target_c), None)
    if now is None or not usable:
        return None
    first = min(usable, key=lambda d: d.target_c)
    if first.target_c >= target_c or first.product.value is None or now.product.value is None:
        return None
    moved = now.product.value / first.product.value
    if abs(moved - 1) < RATIO_MOVED:
        return None
    tpp_now, tpp_first = now.spec.tokens_per_pass.value, first.spec.tokens_per_pass.value
    cost_now, cost_first = now.pass_cost.value, first.pass_cost.value
    assert tpp_now and tpp_first and cost_now and cost_first  # usable keeps only those with both figures
    draft = math.log(tpp_now / tpp_first)
    verify = -math.log(cost_now / cost_first)
    text = (f"{_acceptance_text(first, now)} while {_cost_text(first, now)}: "
            f"{_cause(draft, verify, 'loss' if moved < 1 else 'gain')}")
    if now.spec.source.startswith("server"):
        text += f" (passes from the {now.spec.source.split(':')[0]})"
    return text

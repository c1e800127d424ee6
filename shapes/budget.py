"""A time budget for the ladder: duration parsing, each step's share, and what the budget buys.

Pure functions (no Locust). The rule: a step may run for its part of the time left in the budget (capped by
``--max-step-time``, less a reserve for the final drain): each level left first gets what it needs, judged from
the lifetimes the closed steps measured, and the rest is shared equally; so a step that reaches its
``--step-ci`` target early passes its unused time on to the higher levels, where requests live longest.
What a level's share buys is forecast from the last closed step (the pilot): the 95% half-width of a
stationary mean shrinks as 1/sqrt(window), so a window W with half-width h gives ``W * (h / target)**2`` for
the target and ``h * sqrt(W / share)`` for a share.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from specbench.contract.policy import DRAIN_RESERVE
from specbench.contract.settings import SettingsError, parse_duration
from specbench.shapes.books import WARMUP_STABLE_S

BudgetError = SettingsError  # a duration that cannot be read; the message names the flag and what was expected
__all__ = ["BudgetError", "budget_grace_s", "describe_forecast", "describe_plan", "fmt_duration", "halfwidth_for",
           "level_needs", "parse_duration", "step_lifetime", "step_share", "time_for"]


def fmt_duration(seconds: float) -> str:
    """Seconds as '1h02m', '6m30s' or '45s'."""
    s = max(0, round(seconds))
    if s >= 3600:
        return f"{s // 3600}h{(s % 3600) // 60:02d}m"
    if s >= 60:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s}s"


def step_share(budget_s: float, elapsed_s: float, levels_left: int, max_step_time: float,
               needs: Sequence[float] = ()) -> float:
    """Seconds the next step may run: what is left of the budget (less the drain reserve) per level left.

    With ``needs`` (each level left's expected time, this step's first: ``level_needs``) every level gets its
    need first and the rest is shared equally: an equal split starves the top levels, whose requests live
    longest (a demo's speculative C=250 ran out of budget before one request of its window could finish, while
    each lower level had used more than it needed, #76). Short of time, this step gets its need and no more
    (at most the equal split's part), so the levels in ladder order get a window each until the budget runs out:
    a part of every need for every level leaves each short of one."""
    left = budget_s * (1 - DRAIN_RESERVE) - elapsed_s
    n = max(1, levels_left)
    share = left / n
    if len(needs) == levels_left and sum(needs) > 0 and left > 0:
        spare = left - sum(needs)
        share = needs[0] + spare / n if spare >= 0 else min(needs[0], share)
    return max(1.0, min(max_step_time, share))


def step_lifetime(step: Mapping[str, Any]) -> tuple[int, float] | None:
    """(C, its requests' median lifetime) of a closed closed-loop step; None without an ok request or a C (open
    loop). Not Little's law over the window's count: a window shorter than a lifetime counts few of them."""
    life, c = step.get("lifetime_p50_s"), step.get("target_c")
    if not life or not c or step.get("target_rate"):
        return None
    return int(c), float(life)


def level_needs(levels: Sequence[int], closed: Sequence[Mapping[str, Any]], min_requests: Callable[[int], int],
                min_step_time: float) -> list[float]:
    """Each level's expected step time from the closed steps' lifetimes: a warm-up of one lifetime (at least the
    in-flight count's stable time), then a window long enough for its minimum of requests to start and end inside
    it (at C at a time, one lifetime each), for two lifetimes and for ``--min-step-time``. A lifetime at a higher C
    follows the line through the last two measured levels (a batched server's pass grows with its batch, and past
    its cap the queue grows with C: the demo's C=1 and C=2 put C=250 at 17.7 s where it measured 18.7), never
    below the last one's; with one level measured, the line through the origin (every request beyond it queued:
    an upper bound, so the lower levels take no more than they need while the top is unknown). [] without a
    measured step."""
    known = [found for step in closed if (found := step_lifetime(step)) is not None]
    if not known:
        return []
    (c_b, life_b) = known[-1]
    slope = life_b / c_b  # one level measured: the bound of a server that queues every request beyond it
    if len(known) >= 2 and known[-2][0] < c_b:
        slope = max(0.0, (life_b - known[-2][1]) / (c_b - known[-2][0]))
    needs = []
    for c in levels:
        life = max(life_b, life_b + slope * (c - c_b))
        # a request measured must start and end inside the window: C at a time, each one lifetime long
        window = max(min_step_time, 2 * life, life + min_requests(c) * life / max(1, c))
        needs.append(max(life, WARMUP_STABLE_S) + window)
    return needs


def budget_grace_s(budget_s: float) -> float:
    """How long past the budget's end the final drain may wait for requests in flight: 10% of the budget, at
    least 5 s (the last step's requests are usually a few seconds long and their records finish its window)."""
    return max(5.0, 0.1 * budget_s)


def time_for(target: float, window_s: float, halfwidth: float) -> float:
    """Window seconds for a relative half-width ``target``, from a pilot window and its half-width."""
    if not math.isfinite(halfwidth) or halfwidth <= 0 or window_s <= 0:
        return math.inf
    return window_s * (halfwidth / target) ** 2


def halfwidth_for(window_s: float, pilot_window_s: float, pilot_halfwidth: float) -> float:
    """Relative half-width a window of ``window_s`` seconds should reach, from the pilot."""
    if not math.isfinite(pilot_halfwidth) or window_s <= 0 or pilot_window_s <= 0:
        return math.inf
    return pilot_halfwidth * math.sqrt(pilot_window_s / window_s)


def describe_plan(levels: list[int], budget_s: float, max_step_time: float, step_ci: float) -> str:
    """The line printed before the ladder starts: the budget, each level's first share, the rule."""
    share = step_share(budget_s, 0.0, len(levels), max_step_time)
    target = f"+-{step_ci:.0%}" if step_ci > 0 else "its minimums"
    return (f"time budget {fmt_duration(budget_s)} for {len(levels)} levels ({', '.join(map(str, levels))}): "
            f"each step at most {fmt_duration(share)} to start with (warm-up included, "
            f"{DRAIN_RESERVE:.0%} kept for the final drain); a step ends once it reaches {target}, "
            f"and its unused time goes to the levels after it")


def describe_forecast(next_c: int, share_s: float, pilot_c: int, pilot_window_s: float,
                      pilot_halfwidth: float, step_ci: float) -> str | None:
    """'C=250 needs about 6m for +-3%; its share 3m allows about +-4.2%' from the last closed step."""
    if not math.isfinite(pilot_halfwidth) or step_ci <= 0:
        return None
    need = time_for(step_ci, pilot_window_s, pilot_halfwidth)
    allows = halfwidth_for(share_s, pilot_window_s, pilot_halfwidth)
    return (f"budget: C={next_c} needs about {fmt_duration(need)} of window for +-{step_ci:.0%} "
            f"(pilot: C={pilot_c}, +-{pilot_halfwidth:.1%} in {fmt_duration(pilot_window_s)}); its share "
            f"{fmt_duration(share_s)} allows about +-{allows:.1%}")

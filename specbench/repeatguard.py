"""compare --repeats: what keeps the repeats one comparison (#70).

Why: the answer over the repeats merges each level's repeats into one ratio, which is only true when every repeat
measured the same servers within the time given. Two guards, both before a server sees load it should not:

- the budget: every run of the plan (each server, each repeat and, with ``--interleave level``, each level) gets
  its share of ``--time-budget`` less what a Locust child costs beyond its steps (``RUN_COST_S``: its start, its
  final drain, its files); a plan whose share cannot hold each of its levels' windows (the warm-up and
  ``--min-step-time``, #76: a repeat measured in a shorter window than the others is not the same measure) is
  refused before any server is asked, and a share that falls short during the job (a machine slower than
  ``RUN_COST_S`` allows) stops the job before a run that would refuse it;
- the server's identity: what preflight reads (kind, version, model, speculative settings) is read again before
  each run and from each run's own meta.json, and compared with the first; a change stops the job, the run that
  saw it is dropped, and the report says so.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from specbench.contract.optionvalues import SettingsError
from specbench.contract.policy import DRAIN_RESERVE, MIN_STEP_SHARE_S
from specbench.contract.servertext import RUNTIME_FIGURES, plain
from specbench.contract.settings import SuiteSettings, check_budget_fits, duration_arg
from specbench.shapes.books import WARMUP_STABLE_S

# Seconds one Locust run costs beyond its steps' share: the child's start (imports, the server's identity), its
# final drain and its files. Measured on this 2-core machine beside other test runs: 2.3 to 4.3 s a run.
RUN_COST_S = 3.0
IDENTITY_KEYS = ("kind", "version", "model", "speculative")  # what a repeat must share with the first


def run_need_s(levels_per_run: int, step_s: float = MIN_STEP_SHARE_S) -> float:
    """The least share one run can use: each of its levels ``step_s`` (at least ``MIN_STEP_SHARE_S``, the child's
    own check, ``contract.optionchecks.check_budget_fits``) after the drain reserve."""
    return max(MIN_STEP_SHARE_S, step_s) * levels_per_run / (1 - DRAIN_RESERVE)


def step_need_s(settings: SuiteSettings) -> float:
    """What one level's step needs to measure its window: the warm-up (``--warmup-time``, or the in-flight count's
    stable time when it is left automatic) and ``--min-step-time``."""
    return (settings.warmup_time or WARMUP_STABLE_S) + settings.min_step_time


def runs_of(servers: int, repeats: int, levels: int, per_level: bool) -> tuple[int, int]:
    """(runs in the plan, levels in each run): one run per level with ``--interleave level`` (and more than one
    level), else one per ladder (``specbench.repeatrun.plan``)."""
    if per_level and levels > 1:
        return servers * repeats * levels, 1
    return servers * repeats, levels


def run_share(budget_left_s: float, runs_left: int) -> float:
    """A run's share of what is left: an equal part, less what the run costs beyond its steps."""
    return budget_left_s / max(1, runs_left) - RUN_COST_S


def check_repeats_budget(budget_s: float, servers: int, repeats: int, levels: int, per_level: bool,
                         step_s: float = MIN_STEP_SHARE_S) -> None:
    """Refuse, in one line naming ``--time-budget``, a plan whose runs would each get less than a run needs
    (``step_s`` a level: ``step_need_s``)."""
    if budget_s <= 0:
        return
    runs, per_run = runs_of(servers, repeats, levels, per_level)
    need = run_need_s(per_run, step_s)
    share = run_share(budget_s, runs)
    if share >= need:
        return
    least = math.ceil(runs * (need + RUN_COST_S))
    what = (f"{servers} servers x {repeats} repeats x {levels} levels, each level its own run" if per_run == 1
            and levels > 1 else f"{servers} servers x {repeats} repeats, {per_run} level(s) a run")
    raise SettingsError(f"--time-budget: {budget_s:g} s for {runs} runs ({what}) gives each "
                        f"{max(0.0, math.floor(share * 100) / 100):.2f} s after {RUN_COST_S:g} s to start and stop "
                        f"Locust; a run needs at least {need:.2f} s ({max(MIN_STEP_SHARE_S, step_s):g} s a level: "
                        f"its warm-up and --min-step-time): give at least {least} s, fewer repeats or fewer levels")


def check_compare_budget(budget_s: float, servers: int, repeats: int, settings: SuiteSettings, *, per_level: bool,
                         refine: int) -> None:
    """compare's up-front check of ``--time-budget``: with ``--repeats``, every run of the plan, each of its levels
    its warm-up and minimum window (``check_repeats_budget``); one pass, each ladder's first share after the
    refinement's reserve, as its child will check it."""
    from specbench.compare import ladder_share

    levels = len(settings.rate_ladder or settings.ladder)
    if repeats > 1:
        check_repeats_budget(budget_s, servers, repeats, levels, per_level, step_need_s(settings))
        return
    share = ladder_share(budget_s, servers, refine)
    check_budget_fits(share, levels, f"--time-budget (a ladder's share, {duration_arg(share)})")


def identity_of(server: Mapping[str, Any]) -> dict[str, Any]:
    """What a repeat must share with the first: ``IDENTITY_KEYS``, the speculative settings without the figures the
    server reports as it runs (``RUNTIME_FIGURES``: an acceptance length moves with the load, not the server)."""
    found = {k: server.get(k) for k in IDENTITY_KEYS}
    spec = found["speculative"]
    if isinstance(spec, Mapping):
        found["speculative"] = {k: v for k, v in spec.items() if k not in RUNTIME_FIGURES}
    return found


def identity_changes(first: Mapping[str, Any], now: Mapping[str, Any]) -> list[str]:
    """What differs, each as 'model a -> b' (server text made plain); empty: the same server. A server that
    answered none of the pages that say who it is (down, or still restarting) is one change, said as such."""
    was, is_ = identity_of(first), identity_of(now)
    if was != is_ and is_["model"] is None and is_["version"] is None and is_["speculative"] is None:
        return ["it did not say who it is: down, or still restarting?"]
    return [f"{key} {_shown(was[key])} -> {_shown(is_[key])}" for key in IDENTITY_KEYS if was[key] != is_[key]]


def _shown(value: Any) -> str:
    if value is None:
        return "none"
    if isinstance(value, Mapping):
        return "{" + ", ".join(f"{k}={plain(v)}" for k, v in sorted(value.items())) + "}"
    return plain(value)

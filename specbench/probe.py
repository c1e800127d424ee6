"""The paired output-equivalence probe (#76): enough answers at low load to catch a server that changes few tokens.

Why: the per-level check's noise floor is what the ladder's levels leave (a dozen or two answers in a budgeted
run), too few to tell a speculative server that changes 0.5% of tokens from noise. The probe asks for the answers
the test needs, after the ladders, with the job's settings and prompt order, in one phase of two kinds of run at
the same time (other servers: neither's load touches the other):

* the baseline: a two-level ladder, ``REFERENCE_C`` (the reference answers) then ``PROBE_C`` (the repeat: the
  baseline's own noise at the speculative pass's load, at another batch shape than its reference, so that a
  batch-variant baseline does not repeat its own changes);
* each speculative server: one level, ``PROBE_C``.

Each level restarts the prompt order, so every level answers the same prompts from the first on; the analysis
pairs them by prompt position (``analysis.verdicts.equivalence_probe``: an exact sign test on the prompts that
only speculation, or only the repeat, changed). Each server's probe runs into ``RUN/probe`` (``RunDir.probe``),
never merged into the run. With a ``--time-budget`` ``PROBE_SHARE`` of it is reserved up front, which the phases
before the probe (refinement, top-up, end check) leave alone; the probe runs last with what is left, and its size
is what fits there at the rates the ladders measured at these levels. Without a budget, ``PROBE_PROMPTS``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from specbench.contract.rundir import RunDir
from specbench.contract.runformat import RunFormatError
from specbench.refine import ROUND_OVERHEAD_S

PROBE_SHARE = 0.25  # of a --time-budget kept for the probe where it runs (it also gets what the rest leave)
PROBE_PROMPTS = 64  # answers per level without a budget: a server changing 18% of answers is caught 98 times in 100
REFERENCE_C, PROBE_C = 4, 8  # low load (for answers enough in a short budget), two batch shapes for the baseline
MIN_PROMPTS = 20  # fewer fit in the budget: the probe is not run (it could not tell a sixth of answers changed)

#: Runs a ladder of ``levels`` on the named server into ``sub`` with these options added to the job's; returns
#: the Locust exit code.
ProbeRunner = Callable[[str, Sequence[int], Path, list[str]], int]


def probe_wanted(baseline_dir: Path, rate_mode: bool) -> bool:
    """Whether the job keeps answers worth comparing: closed loop, temperature 0, --check-output on (from the
    baseline run's meta.json, as the run itself resolved its options)."""
    meta = RunDir(baseline_dir).meta_json() or {}
    settings = meta.get("settings")
    if not isinstance(settings, dict):
        return False
    return (not rate_mode and bool(settings.get("check_output")) and settings.get("temperature", 0) == 0
            and not settings.get("trace"))


def level_rate(run_dir: Path, c: int) -> float | None:
    """Requests per second the ladder's run answered at level ``c`` (or, scaled by concurrency, at the level nearest
    to it); None without two answers at any level."""
    try:
        records = RunDir(run_dir).read().records
    except (RunFormatError, OSError):
        return None
    ends: dict[int, list[float]] = {}  # when each answer finished, by level
    for r in records:
        if r["status"] == "ok" and (c_r := r.get("target_c")) is not None and r.get("target_rate") is None:
            ends.setdefault(int(c_r), []).append(r["start_s"] + r["e2e_s"])
    rates = {level: (len(t) - 1) / (max(t) - min(t)) for level, t in ends.items() if len(t) >= 3 and max(t) > min(t)}
    if not rates:
        return None
    near = min(rates, key=lambda level: (abs(math.log(level / c)), level))
    return rates[near] * c / near


@dataclass(frozen=True)
class ProbePlan:
    """How many prompts each probe level answers, and the longest step of each server's run (None: no cap)."""

    prompts: int
    base_step_s: float | None = None
    spec_step_s: float | None = None


def plan_probe(order: Sequence[str], dirs: dict[str, Path], left_s: float | None) -> ProbePlan:
    """``PROBE_PROMPTS`` without a budget; else what fits in the time left (less a run's start-up) at the rates the
    ladders measured: the baseline answers every prompt twice, one level after the other, each speculative server
    once, beside it. A step is capped at the time its share of the prompts should take, and a tenth more."""
    if left_s is None:
        return ProbePlan(PROBE_PROMPTS)
    run_s = left_s - ROUND_OVERHEAD_S
    r_ref, r_rep = level_rate(dirs[order[0]], REFERENCE_C), level_rate(dirs[order[0]], PROBE_C)
    if run_s <= 0 or r_ref is None or r_rep is None:
        return ProbePlan(0)
    fits = [run_s / (1 / r_ref + 1 / r_rep)]
    for name in order[1:]:
        rate = level_rate(dirs[name], PROBE_C)
        fits.append(0.0 if rate is None else run_s * rate)
    prompts = int(min(fits))
    longest = max(1 / r_ref, 1 / r_rep) / (1 / r_ref + 1 / r_rep)
    return ProbePlan(prompts, max(1.0, 1.1 * run_s * longest), max(1.0, run_s))


def probe_options(prompts: int, level: int, step_s: float | None) -> list[str]:
    """A probe level: ends once it has answered ``prompts`` (the warm-up's ``level`` requests count among its
    answers), not on precision, or at ``step_s``."""
    opts = ["--step-ci", "0", "--min-requests", str(max(1, prompts - level)), "--min-step-time", "1"]
    return opts if step_s is None else [*opts, "--max-step-time", f"{step_s:.1f}"]


def run_probe(order: Sequence[str], dirs: dict[str, Path], run: ProbeRunner, left_s: float | None,
              stop: Callable[[], None] = lambda: None) -> int:
    """The baseline's two levels beside each speculative server's one; the first failed run's exit code (130:
    interrupted, after ``stop`` has stopped the runs the other threads wait on), else 0."""
    plan = plan_probe(order, dirs, left_s)
    prompts = plan.prompts
    if prompts < MIN_PROMPTS:
        print(f"output-equivalence probe: not run (about {prompts} prompts fit in what is left of the budget, "
              f"{MIN_PROMPTS} needed; the per-level check stands alone)", flush=True)
        return 0
    base, specs = order[0], list(order[1:])
    print(f"output-equivalence probe: about {prompts} prompts to {base} at C={REFERENCE_C} and again at C={PROBE_C}, "
          f"beside {', '.join(specs)} at C={PROBE_C}", flush=True)
    runs = [(base, [REFERENCE_C, PROBE_C], plan.base_step_s), *((name, [PROBE_C], plan.spec_step_s) for name in specs)]
    pool = ThreadPoolExecutor(max_workers=len(runs))
    try:
        codes = list(pool.map(lambda job: run(job[0], job[1], RunDir(dirs[job[0]]).probe().path,
                                              probe_options(prompts, job[1][-1], job[2])), runs))
    except KeyboardInterrupt:  # raised in this thread only: the others wait on their runs until they stop
        stop()
        print("output-equivalence probe: interrupted", flush=True)
        return 130
    finally:
        pool.shutdown(wait=True)
    return next((c for c in codes if c not in (0, 3)), 0)

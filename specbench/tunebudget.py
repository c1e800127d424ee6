"""How ``specbench tune`` shares ``--time-budget`` between its runs (#76).

Every run, tune and validation alike, is planned from the start: each ladder gets an equal share of what is
left once the time the runs left will spend outside their ladders (server starts and stops, preflight) and the
reports' reserve are set aside. That outside time is learned as the job goes: each run's wall time beyond the
ladder share it was given, averaged. Before the first run it is guessed on the high side, ``FIRST_GUESS`` of an
equal share: a guess too high only hands the later runs, the validation's last, more than the first; one too
low would take from them (and a guess in seconds would starve the first run of a short budget). Handing each
run "an equal part of what is left" with nothing set aside, as before, gave the last runs least: 39 to 35 s
for the tune runs, then 30, 28 and 24 s for the validation's three, whose C=64 windows then finished two
requests or none.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from specbench.contract.optionvalues import duration_arg
from specbench.shapes.budget import fmt_duration

# Of a --time-budget, kept for what follows the last run: the reports and the choice (10 s over a 10-minute budget
# on 2 cores without it, benchmarks/bench_tune.py); kept once more, with --validate, for the tune's report and
# choice between the tune runs and the validation's.
REPORT_RESERVE_S = 20.0
FIRST_GUESS = 0.25  # before any run has finished: a run's time outside its ladder, as a share of an equal share


@dataclass
class TuneBudget:
    """The plan for one job's --time-budget (``total_s`` 0: none) over ``runs`` runs, ``reports`` reports."""

    total_s: float
    runs: int
    reports: int  # 1, or 2 with --validate (the tune's, then the validation's)
    began: float = field(default_factory=time.monotonic)
    outside: list[float] = field(default_factory=list)  # each finished run's seconds beyond its ladder share
    shares: list[float] = field(default_factory=list)  # each run's ladder share, in order

    def share(self, runs_left: int, reports_left: int, now: float | None = None) -> float:
        """The next run's ladder share: an equal part of what is left after the runs' outside time and the
        reports' reserve."""
        now = time.monotonic() if now is None else now
        left = self.total_s - (now - self.began) - reports_left * REPORT_RESERVE_S
        per_run = (sum(self.outside) / len(self.outside) if self.outside
                   else FIRST_GUESS * (self.total_s - self.reports * REPORT_RESERVE_S) / max(1, self.runs))
        return max(1.0, (left - runs_left * per_run) / max(1, runs_left))

    def options(self, name: str, runs_left: int, reports_left: int) -> tuple[list[str], float]:
        """``--time-budget`` for the next run, said on one line, and its start; ([], start) without a budget."""
        start = time.monotonic()
        if not self.total_s:
            return [], start
        share = self.share(runs_left, reports_left, start)
        self.shares.append(share)
        print(f"{name}: {fmt_duration(share)} of the budget", flush=True)
        return ["--time-budget", duration_arg(share)], start

    def finished(self, start: float, now: float | None = None) -> None:
        """A run that began at ``start`` has ended: learn its time outside its ladder."""
        now = time.monotonic() if now is None else now
        if self.total_s and self.shares:
            self.outside.append(max(0.0, now - start - self.shares[-1]))


__all__ = ["FIRST_GUESS", "REPORT_RESERVE_S", "TuneBudget"]

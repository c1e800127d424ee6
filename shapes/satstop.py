"""``--stop-after-saturation N``: end a closed-loop ladder N levels after the server saturated (#27).

The ladder notes each closed step's throughput (with its 95% half-width) and median TTFT, and before starting
the next level asks ``analysis.verdicts.saturation.find_saturation``: once a level is at the maximum throughput within
noise while TTFT grows above it, the levels more than N beyond it are skipped. The decision waits for the
step's books to close (its last requests finish, about one request lifetime, while the users keep the level's
load), so it judges the same exact figures the report does. ``specbench compare`` then measures on every
server the levels any server ran, so the comparison stays paired.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence

from specbench.analysis.verdicts.saturation import LoadPoint, Saturation, find_saturation
from specbench.contract.schema import RequestRecord, StepRecord
from specbench.contract.settings import SuiteSettings

HOLD_MAX_S = 30.0  # longest wait for a step's books before deciding without it


class SaturationStop:
    """The skip rule's state for one run of the ladder."""

    def __init__(self, after: int) -> None:
        self.after = after
        self.points: dict[int, LoadPoint] = {}
        self.skipped: tuple[int, ...] = ()
        self.saturation: Saturation | None = None

    @staticmethod
    def from_settings(settings: SuiteSettings) -> SaturationStop | None:
        """The rule for a run's validated settings; None when it is off (-1)."""
        after = settings.stop_after_saturation
        return SaturationStop(after) if after >= 0 else None

    def note(self, step: StepRecord, records: Sequence[RequestRecord], halfwidth: float | None) -> None:
        """A closed closed-loop step's throughput, its interval and the median TTFT of its window."""
        tok, t0, t1 = step.get("throughput_tok_s"), step.get("steady_start_s"), step.get("end_s")
        if step.get("target_rate") is not None or not tok or t0 is None or t1 is None:
            return
        ttfts = [ttft for r in records if r.get("step") == step["index"] and r["status"] == "ok"
                 and (ttft := r.get("ttft_s")) is not None and r["start_s"] >= t0 and r["start_s"] + r["e2e_s"] <= t1]
        half = halfwidth if halfwidth is not None else None
        self.points[step["target_c"]] = LoadPoint(
            step["target_c"], tok, tok * (1 - half) if half is not None else None,
            tok * (1 + half) if half is not None else None, statistics.median(ttfts) if ttfts else None)

    def levels_to_skip(self, levels: Sequence[int], index: int) -> tuple[int, ...]:
        """The levels after ``index`` to skip, none while the rule does not apply (an unsorted ladder: never)."""
        if list(levels) != sorted(levels) or index + 1 >= len(levels):
            return ()
        found = find_saturation("server", list(self.points.values()))
        if found.target_c is None or found.target_c not in levels:
            return ()
        if index >= levels.index(found.target_c) + self.after:
            self.saturation = found
            self.skipped = tuple(levels[index + 1:])
        return self.skipped

"""The current ladder step as every load process sees it, and the messages that keep it in step.

The shape runs on the master (or the local runner) and decides step boundaries; it tells every process the
current step with a Locust message, so each record carries the global step index even on a worker that
holds only a share of the users. Users tell the master when a request starts and send its record when it
finishes, so the master can wait for stragglers before it closes a step's books; the master is the only
writer of records.jsonl. The messages' names are declared once, below both sides (``contract.messages``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from specbench.contract.schema import Phase

# ``extra=`` of a progress line that belongs in the run's log but not on a ``--console progress`` terminal,
# which shows one line per step (its figures) rather than a line at each start as well
LOG_ONLY: dict[str, Any] = {"console": False}


@dataclass
class LiveStep:
    """The step a process believes is current; ``index`` None outside a ladder."""

    index: int | None = None
    target_c: int | None = None
    steady_start_s: float | None = None  # set when warm-up ends
    end_s: float | None = None  # set when the measured window ends
    draining: bool = False  # the ladder is over: finish what is in flight, start nothing new
    target_rate: float | None = None  # open loop: requests/s of the step (None: closed loop)

    def to_message(self) -> dict[str, Any]:
        return {"index": self.index, "target_c": self.target_c, "steady_start_s": self.steady_start_s,
                "end_s": self.end_s, "draining": self.draining, "target_rate": self.target_rate}

    def update(self, data: dict[str, Any]) -> None:
        self.index = data.get("index")
        self.target_c = data.get("target_c")
        self.steady_start_s = data.get("steady_start_s")
        self.end_s = data.get("end_s")
        self.draining = bool(data.get("draining", False))
        self.target_rate = data.get("target_rate")

    def phase_for(self, step: int | None, start_s: float, finish_s: float) -> Phase | None:
        """How a request looked from here when it finished: warm-up, measured, or straddling a step end."""
        if step is None:
            return None
        if step != self.index:
            return "transition"
        if self.end_s is not None and finish_s > self.end_s:
            return "transition"
        if self.steady_start_s is not None and start_s >= self.steady_start_s:
            return "measured"
        return "warmup"

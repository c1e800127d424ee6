"""``GET /metrics`` in Prometheus text format, with the metric names and label sets of the emulated release.

Gauges come from the scheduler's last log window (refreshed every ``metrics_interval_steps`` steps, like
SGLang's decode log, and zeroed when the server goes idle); counters and histograms are updated when a
request finishes, from its ledger record. A release with several data-parallel ranks (SGLang) or engines
(vLLM) reports each its share (requests are dealt to them in turn, gauges split so the parts add up to the
truth; an idle SGLang rank, ``Vintage.idle_ranks``, is dealt none and its live gauges read 0); duplicated
tensor-parallel ranks and priority series repeat it. This module only counts; the text of
each release is ``emulator.metrics_render``'s, which reads these counters.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field
from typing import Any

from .profile import Profile
from .scheduler import Scheduler

__all__ = ["Histogram", "Metrics", "PartCounts", "accepted_by_position"]

_LATENCY_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0)


class Histogram:
    def __init__(self, buckets: tuple[float, ...]) -> None:
        self.buckets, self.counts = buckets, [0] * (len(buckets) + 1)
        self.total, self.count = 0.0, 0

    def observe(self, value: float) -> None:
        self.counts[bisect.bisect_left(self.buckets, value)] += 1
        self.total += value
        self.count += 1


@dataclass
class PartCounts:
    """Counters of one data-parallel rank or engine (the whole server when it has one)."""

    prompt_tokens: dict[str, int] = field(default_factory=lambda: {"true": 0, "false": 0})
    generation_tokens: dict[str, int] = field(default_factory=lambda: {"true": 0, "false": 0})
    cached_tokens: dict[str, int] = field(default_factory=lambda: {"true": 0, "false": 0})
    requests: int = 0
    succeeded: int = 0
    aborted: int = 0
    verify: int = 0  # target passes (SGLang's verify calls)
    drafting: int = 0  # the passes that verified a proposal (vLLM's and llama.cpp's drafts counter)
    drafts_proposed: int = 0
    drafts_accepted: int = 0
    # accepted_per_pos[i]: verify passes whose draft token at position i was accepted (a pass that accepted
    # ``a`` drafts counts at positions 0..a-1), as vLLM's and llama.cpp's per-position counter.
    accepted_per_pos: list[int] = field(default_factory=list)


def accepted_by_position(histogram: list[int]) -> list[int]:
    """Passes that accepted the draft at each position, from a histogram of accepted drafts per pass.

    ``histogram[a]`` passes accepted ``a`` drafts; acceptance stops at the first rejected draft, so position ``i``
    was accepted by every pass that accepted more than ``i``.
    """
    return [sum(histogram[i + 1:]) for i in range(max(0, len(histogram) - 1))]


class Metrics:
    """Counters fed by ledger records plus the scheduler's gauges, rendered on demand."""

    def __init__(self, profile: Profile, scheduler: Scheduler) -> None:
        self.profile, self.scheduler = profile, scheduler
        positions = profile.speculative.num_steps if profile.speculative is not None else 0
        self.parts = [PartCounts(accepted_per_pos=[0] * positions) for _ in range(profile.wire.parts)]
        self._dealt = 0
        # The same counts split by the request's priority ("" for none): SGLang's tokenizer counters with
        # --enable-priority-scheduling, where each priority is its own part and "" is no total.
        self.by_priority: dict[str, PartCounts] = {"": PartCounts(accepted_per_pos=[0] * positions)}
        self.ttft = Histogram(_LATENCY_BUCKETS)
        self.e2e = Histogram(_LATENCY_BUCKETS)
        self.refused: dict[str, int] = {}  # requests refused at once, by reason (vllm:admission_rejections_total)

    def total(self, name: str) -> int:
        """A counter summed over the parts (dict counters over both streaming labels)."""
        values = [getattr(p, name) for p in self.parts]
        return sum(sum(v.values()) if isinstance(v, dict) else v for v in values)

    def observe(self, record: dict[str, Any]) -> None:
        """Count one finished request (called with its ledger record) on the next part in turn, and under its
        priority ("" when it gave none)."""
        active = len(self.parts) - self.profile.wire.idle_ranks  # an idle DP rank is sent nothing
        part = self.parts[self._dealt % active]
        self._dealt += 1
        priority = record.get("priority")
        key = "" if priority is None else str(priority)
        if key not in self.by_priority:
            self.by_priority[key] = PartCounts(accepted_per_pos=[0] * len(part.accepted_per_pos))
        self._count(part, record)
        self._count(self.by_priority[key], record)
        if record.get("refused"):
            self.refused[record["refused"]] = self.refused.get(record["refused"], 0) + 1
        if record["status"] != 200:
            return
        if record["first_token_s"] is not None:
            self.ttft.observe(record["first_token_s"] - record["arrival_s"])
        self.e2e.observe(record["finished_s"] - record["arrival_s"])

    @staticmethod
    def _count(part: PartCounts, record: dict[str, Any]) -> None:
        part.requests += 1
        if record["status"] != 200 or record["finish_reason"] in (None, "abort"):
            part.aborted += 1
        if record["status"] != 200:
            return
        if record["finish_reason"] not in (None, "abort"):
            part.succeeded += 1
        streaming = "true" if record["stream"] else "false"
        part.prompt_tokens[streaming] += record["prompt_tokens"]
        part.generation_tokens[streaming] += record["completion_tokens"]
        part.cached_tokens[streaming] += record["cached_tokens"]
        spec = record.get("spec")
        if spec:
            part.verify += spec["spec_verify_ct"]
            part.drafting += spec.get("drafting_steps", spec["spec_verify_ct"])
            part.drafts_proposed += spec["spec_num_proposed_drafts"]
            part.drafts_accepted += spec["spec_num_correct_drafts"]
            for i, n in enumerate(accepted_by_position(spec["spec_correct_drafts_histogram"])):
                part.accepted_per_pos[i] += n

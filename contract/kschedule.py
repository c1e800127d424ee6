"""A speculative depth per batch size: the schedule ``specbench tune`` writes and the emulator runs.

The facts, read in vLLM's released source (PyPI wheels 0.22.1 to 0.34.0; docs/guides/tuning.md says more):

* ``num_speculative_tokens_per_batch_size`` in ``--speculative-config`` is first in vLLM 0.24.0 (absent in
  0.23.0): a list of ``[range_start, range_end, K]``, both ends inclusive (``vllm/config/speculative.py``).
* ``vllm/v1/spec_decode/dynamic/utils.py`` checks it when the scheduler starts: a non-empty list of 3-item
  entries, start >= 1, end >= 1, start <= end, K >= 0 (0: no drafts), sorted by start no two ranges overlap, and
  the first starts at 1. Gaps are allowed: a batch size in a gap takes the previous range's K, one above the last
  range the last K. A K above ``num_speculative_tokens`` is clamped there; the docs require K <= it, and so do we.
* The batch size is the number of requests scheduled in the step (at most ``max_num_seqs``).
* The older ``disable_by_batch_size`` was a ``--speculative-config`` key from 0.8.2 to 0.16.0 (with an effect only
  in the V0 engine, to 0.9.2), and a flag ``--speculative-disable-by-batch-size`` from 0.4.3 to 0.8.2; 0.17.0
  removed it (passing it is an error). The V0 ``SpecDecodeWorker`` turns speculation off for a whole step when
  the scheduler's running queue (``running_queue_size``, ``len(scheduler.running)``) holds at least N requests,
  and the config refuses N < 2. So it says one thing only: one depth below N running requests, none from N up
  (``disable_form``).
"""

from __future__ import annotations

import itertools
import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

Schedule = tuple[tuple[int, int, int], ...]

SCHEDULE_FIELD = "num_speculative_tokens_per_batch_size"
DISABLE_FIELD = "disable_by_batch_size"
SCHEDULE_SINCE = (0, 24, 0)  # first vLLM release with SCHEDULE_FIELD
DISABLE_JSON = ((0, 8, 2), (0, 16, 0))  # releases whose --speculative-config takes DISABLE_FIELD
DISABLE_WORKS_UNTIL = (0, 9, 2)  # the last release in which it had an effect (the V0 engine)


ECHO_LIMIT = 80  # characters of a user's value repeated in an error line
_DIGITS = re.compile(r"[0-9]+")


class KScheduleError(ValueError):
    """A schedule that vLLM would refuse; the message says which entry and why."""


def _integer(value: Any, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise KScheduleError(f"{where}: expected an integer, got {value!r}")
    return value


def _entry(item: Any, where: str, num_speculative_tokens: int | None) -> tuple[int, int, int]:
    if not isinstance(item, (list, tuple)) or len(item) != 3:
        raise KScheduleError(f"{where}: expected [range_start, range_end, K], got {item!r}")
    low, high, depth = (_integer(v, where) for v in item)
    if low < 1 or high < 1:
        raise KScheduleError(f"{where}: batch-size range ({low}, {high}) must be positive")
    if high < low:
        raise KScheduleError(f"{where}: range start {low} is above its end {high}")
    if depth < 0:
        raise KScheduleError(f"{where}: K must be >= 0, got {depth}")
    if num_speculative_tokens is not None and depth > num_speculative_tokens:
        raise KScheduleError(f"{where}: K {depth} is more than num_speculative_tokens ({num_speculative_tokens})")
    return low, high, depth


def parse_k_schedule(raw: Any, num_speculative_tokens: int | None = None) -> Schedule:
    """Check a raw schedule (a list of [start, end, K]) by vLLM's rules; returns it sorted by start.

    With ``num_speculative_tokens``, a K above it is refused (vLLM would clamp it silently).
    """
    if not isinstance(raw, (list, tuple)) or not raw:
        raise KScheduleError(f"expected a non-empty list of [range_start, range_end, K], got {raw!r}")
    entries = [_entry(item, f"entry {i}", num_speculative_tokens) for i, item in enumerate(raw)]
    ordered = sorted(entries)
    for (lo1, hi1, _), (lo2, _, _) in itertools.pairwise(ordered):
        if lo2 <= hi1:
            raise KScheduleError(f"batch-size ranges overlap: {lo1}-{hi1} and one starting at {lo2}")
    if ordered[0][0] != 1:
        raise KScheduleError(f"the first batch-size range must start at 1, got {ordered[0][0]}")
    return tuple(ordered)


def depth_for_batch(schedule: Sequence[tuple[int, int, int]], batch: int, default: int) -> int:
    """The K vLLM's lookup gives ``batch`` requests: its range's K; in a gap the previous range's, above the last
    range the last one's; ``default`` (the static depth) without a schedule."""
    depth = default
    for low, _, k in schedule:  # sorted by start, the first at 1
        if low > batch:
            break
        depth = k
    return depth


def read_speculative_config(text: str) -> tuple[int, Schedule]:
    """A ``--speculative-config`` JSON object: (num_speculative_tokens, its schedule or ())."""
    try:
        config = json.loads(text)
    except json.JSONDecodeError as exc:
        raise KScheduleError(f"not JSON ({exc.msg} at character {exc.pos})") from None
    if not isinstance(config, dict):
        raise KScheduleError(f"expected a JSON object, got {type(config).__name__}")
    depth = config.get("num_speculative_tokens")
    if isinstance(depth, bool) or not isinstance(depth, int) or depth < 1:
        raise KScheduleError(f"num_speculative_tokens: expected an integer >= 1, got {depth!r}")
    raw = config.get(SCHEDULE_FIELD)
    if raw is None:
        return depth, ()
    try:
        return depth, parse_k_schedule(raw, depth)
    except KScheduleError as exc:
        raise KScheduleError(f"{SCHEDULE_FIELD}: {exc}") from None


def speculative_config(base: Mapping[str, Any], depth: int, schedule: Sequence[tuple[int, int, int]] = ()
                       ) -> dict[str, Any]:
    """vLLM's ``--speculative-config`` object: ``base`` (method, draft model, ...) at ``depth`` draft tokens, with
    the schedule where one is given (checked here first, so the suite never writes one vLLM refuses)."""
    config = {key: value for key, value in base.items()
              if key not in ("num_speculative_tokens", SCHEDULE_FIELD, DISABLE_FIELD)}
    config["num_speculative_tokens"] = depth
    if schedule:
        config[SCHEDULE_FIELD] = [list(entry) for entry in parse_k_schedule(list(schedule), depth)]
    return config


def echo(value: object, limit: int = ECHO_LIMIT) -> str:
    """A user's value as an error line repeats it: its repr, cut to about ``limit`` characters (a 100,000-item list
    is named, not printed)."""
    text = repr(value)
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text):,} characters)"


def parse_release(text: str) -> tuple[int, int, int]:
    """'0.24', 'v0.24.0', '0.24.0rc1' -> (0, 24, 0); raises ValueError on anything else (ASCII digits only:
    str.isdigit also takes '١٢', which is no release)."""
    core = text.strip().lower().removeprefix("v").split("rc")[0].split("+")[0].split(".dev")[0]
    parts = core.split(".")
    if not 2 <= len(parts) <= 3 or not all(_DIGITS.fullmatch(p) for p in parts):
        raise ValueError(f"expected a vLLM release such as 0.24.0, got {echo(text)}")
    numbers = [int(p) for p in parts] + [0] * (3 - len(parts))
    return numbers[0], numbers[1], numbers[2]


def release_form(release: tuple[int, int, int] | None) -> str:
    """Which depth-by-load setting a vLLM release takes: "schedule", "disable" (disable_by_batch_size, with an
    effect), "none" (neither, or the key is accepted but does nothing). None (not stated): "schedule"."""
    if release is None or release >= SCHEDULE_SINCE:
        return "schedule"
    if DISABLE_JSON[0] <= release <= DISABLE_WORKS_UNTIL:
        return "disable"
    return "none"


def disable_form(schedule: Sequence[tuple[int, int, int]]) -> tuple[int, int | None]:
    """The schedule as ``disable_by_batch_size`` can say it: (K, N), K below N running requests and none from N
    up (N None: K at every batch size). KScheduleError, saying why, for a schedule the form cannot say: none, off
    at batch 1 (N >= 2), on again after off, or more than one depth."""
    if not schedule:
        raise KScheduleError("there is no schedule")
    on = [entry for entry in schedule if entry[2] > 0]
    off = [entry for entry in schedule if entry[2] == 0]
    if not on:
        raise KScheduleError("the schedule turns speculation off at every batch size; the form cannot (it needs "
                             "N >= 2): run vLLM without --speculative-config")
    if schedule[0][2] == 0:
        raise KScheduleError(f"the schedule turns speculation off at batch 1-{schedule[0][1]} and on above; the form "
                             "can only turn it off from a batch size upward")
    if off and off[0][0] < on[-1][0]:
        raise KScheduleError(f"the schedule turns speculation on again at batch {on[-1][0]} after turning it off "
                             f"at {off[0][0]}; the form turns it off once, for every larger batch")
    depths = sorted({k for _, _, k in on})
    if len(depths) > 1:
        raise KScheduleError(f"the schedule runs {len(depths)} depths ({', '.join(f'K={k}' for k in depths)}); the "
                             "form runs one depth until it turns speculation off")
    return depths[0], off[0][0] if off else None


def disable_depth(depth: int, threshold: int | None, batch: int) -> int:
    """The depth V0 vLLM runs a step with ``batch`` requests running under (K, N) of ``disable_form``."""
    return 0 if threshold is not None and batch >= threshold else depth


__all__ = ["DISABLE_FIELD", "ECHO_LIMIT", "SCHEDULE_FIELD", "SCHEDULE_SINCE", "KScheduleError", "Schedule",
           "depth_for_batch", "disable_depth", "disable_form", "echo", "parse_k_schedule", "parse_release",
           "read_speculative_config", "release_form", "speculative_config"]

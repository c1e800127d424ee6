"""vLLM's depth per batch size, as the emulated server takes and runs it (the emulator's own reading, written
apart from the suite's ``contract.kschedule`` so that the suite's output is checked against an independent one).

vLLM (0.24.0 and later) takes ``num_speculative_tokens_per_batch_size`` in ``--speculative-config``: ranges
``[start, end, K]``, both ends inclusive. At start-up it refuses an empty list, an entry that is not three
numbers, a range that is not positive or runs backwards, a negative K, overlapping ranges and a first range that
does not start at 1; then it expands the ranges into one K per batch size, a gap and the sizes past the last range
taking the K before them. The emulator does the same, and also refuses a K above the launch depth (vLLM clamps it).
"""

from __future__ import annotations

import json
from typing import Any

__all__ = ["DepthScheduleError", "check_schedule", "depth_at", "launch_depth"]

FIELD = "num_speculative_tokens_per_batch_size"


class DepthScheduleError(ValueError):
    """The schedule or config a vLLM server would refuse at start-up."""


def check_schedule(raw: Any, most: int | None = None) -> tuple[tuple[int, int, int], ...]:
    """The ranges sorted by start, or DepthScheduleError saying what vLLM would say."""
    if not isinstance(raw, list) or len(raw) == 0:
        raise DepthScheduleError(f"expected a non-empty list of [range_start, range_end, K], got {raw!r}")
    ranges = [_entry(item, most) for item in raw]
    ranges.sort(key=lambda r: r[0])
    covered = 0
    for start, end, _ in ranges:
        if start <= covered:
            raise DepthScheduleError(f"batch-size ranges overlap at {start}")
        covered = end
    if ranges[0][0] != 1:
        raise DepthScheduleError(f"the first batch-size range must start at 1, not {ranges[0][0]}")
    return tuple(ranges)


def _entry(item: Any, most: int | None) -> tuple[int, int, int]:
    if not isinstance(item, (list, tuple)) or len(item) != 3 or not all(
            isinstance(v, int) and not isinstance(v, bool) for v in item):
        raise DepthScheduleError(f"each entry must be three whole numbers [range_start, range_end, K], got {item!r}")
    start, end, depth = item
    if start <= 0 or end <= 0:
        raise DepthScheduleError(f"batch-size range ({start}, {end}) must be positive")
    if start > end:
        raise DepthScheduleError(f"range start {start} is above its end {end}")
    if depth < 0:
        raise DepthScheduleError(f"K must be >= 0, got {depth}")
    if most is not None and depth > most:
        raise DepthScheduleError(f"K {depth} is more than num_speculative_tokens ({most})")
    return start, end, depth


def depth_at(ranges: tuple[tuple[int, int, int], ...], batch: int, fixed: int) -> int:
    """Draft tokens for a step of ``batch`` running requests: the K of the last range starting at or below it
    (its own range, or the one before a gap); ``fixed`` without ranges."""
    below = [depth for start, _, depth in ranges if start <= max(batch, 1)]
    return below[-1] if below else fixed


def launch_depth(text: str) -> tuple[int, tuple[tuple[int, int, int], ...]]:
    """``--speculative-config JSON``: (num_speculative_tokens, its schedule or ()); other keys are not read."""
    try:
        config = json.loads(text)
    except json.JSONDecodeError as exc:
        raise DepthScheduleError(f"not JSON ({exc.msg} at character {exc.pos})") from None
    if not isinstance(config, dict):
        raise DepthScheduleError("expected a JSON object")
    depth = config.get("num_speculative_tokens")
    if not isinstance(depth, int) or isinstance(depth, bool) or depth < 1:
        raise DepthScheduleError(f"num_speculative_tokens: expected an integer >= 1, got {depth!r}")
    if config.get(FIELD) is None:
        return depth, ()
    try:
        return depth, check_schedule(config[FIELD], depth)
    except DepthScheduleError as exc:
        raise DepthScheduleError(f"{FIELD}: {exc}") from None

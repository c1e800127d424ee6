"""First tokens the kernel dated with later chunks (``contract.window.merged_firsts``), and the live step flag
they raise on the kernel's clock (``shapes.books.read_late``): at the limit silent, just over it flagged, on the
event loop's clock never for this reason.

Why: bytes that wait unread in a socket are merged by the kernel and dated by the last segment's arrival
(measured on loopback: five 40-byte writes 10 ms apart, read 45 ms late in 40-byte reads, carried one stamp), so
a first token read only after the next chunk had come has that chunk's time exactly.
"""

from __future__ import annotations

import pytest

from specbench.contract.policy import READ_LAG_FLOOR_MS
from specbench.contract.window import MergedFirsts, merged_firsts
from specbench.shapes.books import read_late


def _record(i: int, interval_ms: float, folded: int = 0, status: str = "ok", chunks: int = 5) -> dict:
    """A stream of ``chunks`` chunks ``interval_ms`` apart whose first ``folded`` later chunks carry its time."""
    first = 100.0 + i
    chunk_ms = [first + k * interval_ms for k in range(chunks)]
    for k in range(1, folded + 1):
        chunk_ms[k] = first
    return {"status": status, "start_s": 1000.0 + i, "ttft_s": first / 1000.0, "e2e_s": 1.0, "chunk_ms": chunk_ms,
            "chunk_tokens": list(range(1, chunks + 1))}


def test_the_share_and_how_late_come_from_chunk_times_equal_to_the_first() -> None:
    records = [_record(i, 40.0, folded=2 if i < 2 else 1 if i < 3 else 0) for i in range(10)]
    records += [_record(20, 40.0, folded=1, status="truncated"), _record(21, 40.0, chunks=1)]
    merged = merged_firsts(records)
    assert merged is not None and merged.share == pytest.approx(0.3)
    # one 40 ms interval per folded chunk: seven zeros, 40, 80, 80; the p90 falls between the last two
    assert merged.late_p90_ms == pytest.approx(80.0)
    fewer = merged_firsts(records[1:10])  # nine streams: seven zeros, 40, 80; p90 at 7.2 of 0..8
    assert fewer is not None and fewer.late_p90_ms == pytest.approx(40.0 + 0.2 * 40.0)
    assert merged_firsts([_record(0, 40.0, chunks=1)]) is None
    assert merged_firsts([]) is None
    assert merged_firsts([_record(0, 40.0)]) == MergedFirsts(share=0.0, late_p90_ms=0.0)


def test_at_the_limit_the_step_is_silent_just_over_it_is_flagged_on_the_kernels_clock_only() -> None:
    """Every first token dated with the next chunk: how late is one interval, against the 10 ms floor (the
    requests' TTFT is 0.1 s, whose 5% is less)."""
    at = [_record(i, READ_LAG_FLOOR_MS, folded=1) for i in range(50)]
    over = [_record(i, READ_LAG_FLOOR_MS * 1.001, folded=1) for i in range(50)]
    assert not read_late(at, None, "kernel")  # type: ignore[arg-type]  # records as the books hold them
    assert read_late(over, None, "kernel")  # type: ignore[arg-type]
    assert not read_late([_record(i, 100.0, folded=4) for i in range(50)], None, "user")  # type: ignore[arg-type]

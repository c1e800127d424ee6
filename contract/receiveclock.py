"""Which clock a run's chunk times are on: the kernel's receive stamps where the platform gives them, else the
load process's event loop.

Linux stamps each TCP segment when it reaches the socket (``SO_TIMESTAMPNS``; a ``recvmsg`` returns the stamp
of the last segment it read as ancillary data), so a chunk read late by a busy load process still carries the
time it arrived. Python's socket module does not name the option; its number (35, also the control message's
type) is asm-generic's, as on x86-64 and arm64; a few other architectures number it differently, and read
without stamps. TLS sockets give no ancillary data. The load side (``locustfiles.transport``) and the books
(``shapes``) both ask here, so a step's line says the clock its users measured on.

Asked is not given: a kernel may refuse the option (``setsockopt`` fails with ENOPROTOOPT: a sandbox such as
gVisor, another architecture's number) or accept it and stamp nothing. Then the load process dates chunks on its
own clock, a request whose chunks were not all stamped says so (``receive_clock`` "user" or "mixed" in its
record), and a step and meta.json say the clock that dated their chunks (``clock_of``), never "kernel" for
chunks no stamp dated.
"""

from __future__ import annotations

import math
import os
import platform
import sys
import time
from collections.abc import Iterable, Mapping
from typing import Any
from urllib.parse import urlsplit

#: whether this platform stamps TCP segments on receipt for ``recvmsg``
KERNEL_STAMPS = sys.platform.startswith("linux") and platform.machine() in ("x86_64", "aarch64", "arm64")
SO_TIMESTAMPNS = SCM_TIMESTAMPNS = 35
#: Tests only (documented in docs/development.md): a socket option number asked for instead of SO_TIMESTAMPNS,
#: so a test meets the kernel's own answers: an unknown number (9999) is refused with ENOPROTOOPT, an option that
#: exists but stamps nothing (SO_KEEPALIVE, 9) is accepted and every read comes without a stamp.
TEST_OPTION_ENV = "SPECBENCH_TEST_TIMESTAMP_OPTION"


def receive_clock(asked: str, base_url: str) -> str:
    """The clock a run's chunk times are on: "kernel" where asked and given (Linux, plain TCP), else "user"."""
    return "kernel" if asked == "kernel" and KERNEL_STAMPS and urlsplit(base_url).scheme == "http" else "user"


def stamp_option() -> int:
    """The option the load side asks the kernel for: SO_TIMESTAMPNS, unless a test names another
    (``TEST_OPTION_ENV``)."""
    text = os.environ.get(TEST_OPTION_ENV, "")
    return int(text) if text.isdigit() else SO_TIMESTAMPNS


def clock_of(clocks: Iterable[str | None]) -> str | None:
    """The clock that dated a set of chunks, from the clocks of its parts: the one they share, "mixed" where they
    differ (kernel stamps for some, the load process's clock for others); None where no part says."""
    named = {c for c in clocks if c}
    if not named:
        return None
    return named.pop() if len(named) == 1 else "mixed"


def step_clock(asked: str, records: Iterable[Mapping[str, Any]]) -> str:
    """A step's chunk clock: on the kernel's clock (``asked`` "kernel"), what dated the chunks of its records
    (a record's ``receive_clock`` where not all its chunks carried a stamp, else "kernel"); ``asked`` where no
    record has a chunk."""
    if asked != "kernel":
        return asked
    return clock_of(r.get("receive_clock") or "kernel" for r in records if r.get("chunk_ms")) or asked


#: how long the wall-to-perf_counter offset is kept before it is measured again (the wall clock slews by ppm)
OFFSET_TTL_S = 1.0
#: a reading of both clocks counts when the perf_counter reads around the wall clock's are this close
OFFSET_BRACKET_S = 20e-6


class _WallOffset:
    """``time.time() - time.perf_counter()``, measured so a pause of the process cannot skew it: the wall clock
    is read between two perf_counter reads, and a reading counts only when those are within ``OFFSET_BRACKET_S``
    (a process descheduled between two clock reads would otherwise move every stamp by the pause)."""

    __slots__ = ("offset_s", "taken_s")

    def __init__(self) -> None:
        self.offset_s = 0.0
        self.taken_s = -math.inf

    def __call__(self) -> float:
        before = time.perf_counter()
        if before - self.taken_s < OFFSET_TTL_S:
            return self.offset_s
        best = math.inf
        for _ in range(5):
            p1 = time.perf_counter()
            wall = time.time()
            p2 = time.perf_counter()
            if p2 - p1 < best:
                best, self.offset_s = p2 - p1, wall - (p1 + p2) / 2
            if best <= OFFSET_BRACKET_S:
                break
        self.taken_s = before
        return self.offset_s


wall_offset = _WallOffset()


def perf_time(wall_s: float) -> float:
    """An epoch time (a kernel stamp) on the ``time.perf_counter`` scale of this process."""
    return wall_s - wall_offset()

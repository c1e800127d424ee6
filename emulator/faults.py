"""Deterministic fault selection: which request gets which misbehaviour, and what each looks like.

The n-th request the emulator receives (counting from 0) gets at most one fault, chosen by a BLAKE2b
hash of (fault seed, n) against the profile's cumulative fractions. The set of faulted request numbers
is therefore fixed by the seed, whatever the interleaving of concurrent clients.

Stream-only faults (``cut_stream``, ``malformed_chunk``, ``stream_error``, ``stall``) are ignored for
non-streaming requests; they strike at the first chunk that reaches half of the request's tokens.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from .profile import Faults

__all__ = ["HTTP_FAULTS", "STREAM_FAULTS", "FaultPicker", "HttpFault", "http_fault"]

STREAM_FAULTS = frozenset({"cut_stream", "malformed_chunk", "stream_error", "stall", "abort"})


@dataclass(frozen=True)
class HttpFault:
    """An error answered before any generation, in SGLang's flat HTTPException shape."""

    status: int
    err_type: str
    message: str


HTTP_FAULTS: dict[str, HttpFault] = {
    "error_503": HttpFault(503, "503", "Service unavailable (emulated fault)."),
    "error_500": HttpFault(500, "InternalServerError", "Internal server error (emulated fault)."),
    "error_429": HttpFault(429, "429", "Too many requests (emulated fault)."),
}


def http_fault(kind: str | None) -> HttpFault | None:
    return HTTP_FAULTS.get(kind or "")


class FaultPicker:
    """Maps a request number to a fault name (or None) from the profile's fault fractions."""

    def __init__(self, faults: Faults) -> None:
        self._seed = faults.seed
        self._bounds: list[tuple[float, str]] = []
        total = 0.0
        for kind, fraction in faults.kinds():
            if fraction > 0:
                total += fraction
                self._bounds.append((total, kind))

    @property
    def active(self) -> bool:
        return bool(self._bounds)

    def pick(self, request_number: int, *, stream: bool) -> str | None:
        if not self._bounds:
            return None
        key = f"{self._seed}:{request_number}".encode()
        unit = int.from_bytes(hashlib.blake2b(key, digest_size=8).digest(), "big") / 2.0**64
        for bound, kind in self._bounds:
            if unit < bound:
                return None if (kind in STREAM_FAULTS and not stream) else kind
        return None

"""The truth ledger: what the emulator really did for every request, for tests to compare against.

A record is appended just before the last bytes of its response are written, so a client that has
seen the end of a response always finds the record. Fields (all times are ``time.time()`` seconds):

``rid`` (the id the client got back), ``route``, ``stream``, ``priority`` (the request's SGLang priority, or
null when it gave none), ``status`` (HTTP status),
``arrival_s`` (request body read), ``scheduled_s`` (start of the step the request joined, or null),
``left_batch_s`` (end of its last step, when the scheduler took it out of the running batch, or null),
``first_token_s`` (the moment just before the first chunk with output tokens was written to the socket),
``finished_s``, ``prompt_tokens``, ``cached_tokens``, ``max_new_tokens``, ``completion_tokens`` (output tokens
written to the client), ``finish_reason`` ("length" | "stop" | "abort" | null), ``tokens_per_chunk`` (output
tokens in each chunk as written; coalesced when the client reads slowly), ``tokens_per_step`` (tokens the scheduler
produced in each step, the first being the prefill token), ``spec`` (null without speculation, else
SGLang's ``spec_*`` figures plus ``alpha``, the prompt's draft acceptance probability, and ``drafting_steps``, the
passes that verified a proposal: all of them unless ``speculative.no_draft_share``), ``output_change``
(null, or the answer's first changed token under the ``lossy`` / ``batch_variance`` knobs: ``position``,
``from_id``, ``to_id``, ``cause`` "lossy" | "batch", ``batch``; ``emulator.divergence``), ``fault``
(null or the fault's name) and ``error`` (null or the error message). With ``ledger_text`` (``--ledger-text``)
also ``prompt_text`` (the prompt as the emulator keys it: the text, or a chat's message contents joined by
newlines) and ``output_text`` (the answer text written to the client). With ``ledger_chunk_times``
(``--ledger-chunk-times``) also ``chunk_ms``: when each chunk of ``tokens_per_chunk`` was written, in ms after
``arrival_s``. With ``--ledger-file PATH`` every record is also appended to that JSONL file as it is made.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

__all__ = ["Ledger"]

_MAX_RECORDS = 200_000


class Ledger:
    """Thread-safe, bounded list of finished-request records (plain JSON-ready dicts)."""

    def __init__(self, max_records: int = _MAX_RECORDS, path: Path | None = None) -> None:
        self._lock = threading.Lock()
        self._records: list[dict[str, Any]] = []
        self._max = max_records
        self.dropped = 0
        # --ledger-file: every record also goes to a JSONL file as it happens, so the truth outlives the process
        # (a sweep stops each server before the next one starts).
        self._file: IO[str] | None = path.open("a", encoding="utf-8") if path is not None else None

    def append(self, record: dict[str, Any]) -> None:
        with self._lock:
            if len(self._records) >= self._max:
                self._records.pop(0)
                self.dropped += 1
            self._records.append(record)
            if self._file is not None:
                self._file.write(json.dumps(record, separators=(",", ":")) + "\n")
                self._file.flush()

    def close(self) -> None:
        with self._lock:
            if self._file is not None:
                self._file.close()
                self._file = None

    def records(self, *, clear: bool = False) -> list[dict[str, Any]]:
        """A copy of all records, oldest first; ``clear`` empties the ledger in the same step."""
        with self._lock:
            out = list(self._records)
            if clear:
                self._records.clear()
        return out

    def clear(self) -> None:
        with self._lock:
            self._records.clear()

    def wait_for(self, count: int, timeout_s: float = 10.0) -> list[dict[str, Any]]:
        """Poll until at least ``count`` records exist or ``timeout_s`` passes; returns the records."""
        deadline = time.monotonic() + timeout_s
        while len(self._records) < count and time.monotonic() < deadline:
            time.sleep(0.005)
        return self.records()

    def find(self, rid: str) -> dict[str, Any] | None:
        """The latest record with this request id, if any."""
        with self._lock:
            return next((r for r in reversed(self._records) if r["rid"] == rid), None)

    def __len__(self) -> int:
        return len(self._records)

    def __iter__(self) -> Iterator[dict[str, Any]]:
        return iter(self.records())

    def __getitem__(self, index: int) -> dict[str, Any]:
        return self.records()[index]

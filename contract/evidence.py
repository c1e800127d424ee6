"""What a request's figures can be: the one rule for an impossible record, on the load side and in analysis.

A server's figures are evidence, not truth. The load side fails a request whose output token counts cannot be
true (``bad_count``, ``token_count_problem``); a records.jsonl read back can still hold what no request can have
(a file edited, concatenated or written by another tool): times that are not finite, negative or running
backwards, token counts that are negative, falling or above the request's ``max_tokens``, and the same request
twice. ``screen_records`` keeps such records out of every figure and counts them by kind, so the report says how
many were left out and why (``LeftOut``), never averaging them in and never hiding them.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, TypeVar

import numpy as np

# Kinds of record left out, in the order a report lists them (a record of several kinds counts under the first).
DUPLICATE = "duplicate"  # a request_id already read: the same request written twice
NON_FINITE_TIME = "non_finite_time"  # NaN or infinite start_s, e2e_s, ttft_s, chunk time
NEGATIVE_TIME = "negative_time"  # e2e_s, ttft_s or a chunk offset below zero (before the request was sent)
REVERSED_CHUNKS = "reversed_chunks"  # chunk arrival offsets that run backwards
IMPOSSIBLE_TOKENS = "impossible_tokens"  # negative, falling, or above the request's max_tokens
LEFT_OUT_KINDS: tuple[str, ...] = (DUPLICATE, NON_FINITE_TIME, NEGATIVE_TIME, REVERSED_CHUNKS, IMPOSSIBLE_TOKENS)
LEFT_OUT_TEXT: dict[str, str] = {
    DUPLICATE: "duplicate (a request_id already read)",
    NON_FINITE_TIME: "with a time that is not a finite number",
    NEGATIVE_TIME: "with a negative time",
    REVERSED_CHUNKS: "with chunk times running backwards",
    IMPOSSIBLE_TOKENS: "with an impossible output token count",
}
# Only a successful request's tokens enter a figure; a failed one's count (bad_count: the load side found it
# impossible) never does, while its failure is counted, so its record stays.
_COUNTED = "ok"

LeftOut = dict[str, int]  # kind -> records left out
R = TypeVar("R", bound=Mapping[str, Any])


def token_count_problem(cumulative: Sequence[float], final: float | None, max_tokens: int | None) -> str | None:
    """Why output token counts cannot be true, or None: a negative count, a cumulative count that falls, or more
    tokens than the request allowed (``max_tokens``; with or without ``ignore_eos`` a server makes no more)."""
    counts = [*cumulative, *([final] if final is not None else [])]
    if any(c < 0 for c in counts):
        return f"the server reported a negative output token count ({min(counts)})"
    fell = next(((a, b) for a, b in itertools.pairwise(cumulative) if b < a), None)
    if fell is not None:
        return f"the server's cumulative output token count fell from {fell[0]} to {fell[1]}"
    top = max(counts, default=0)
    if max_tokens and top > max_tokens:
        return f"the server reported {top} output tokens where the request allowed at most {max_tokens}"
    return None


def _times(rec: Mapping[str, Any]) -> tuple[list[float], np.ndarray]:
    """The record's scalar times (seconds, None left out) and its chunk offsets (ms) as an array."""
    scalars = [float(v) for v in (rec.get("start_s"), rec.get("e2e_s"), rec.get("ttft_s")) if v is not None]
    return scalars, np.asarray(rec.get("chunk_ms") or (), dtype=float)


def record_problem(rec: Mapping[str, Any]) -> str | None:
    """The kind (``LEFT_OUT_KINDS``) of impossible value a type-checked record holds, or None when it can be true."""
    scalars, chunks = _times(rec)
    if not all(math.isfinite(v) for v in scalars) or not np.isfinite(chunks).all():
        return NON_FINITE_TIME
    durations = [float(v) for v in (rec.get("e2e_s"), rec.get("ttft_s")) if v is not None]
    if any(v < 0 for v in durations) or (chunks.size and chunks.min() < 0):
        return NEGATIVE_TIME
    if chunks.size > 1 and (np.diff(chunks) < 0).any():
        return REVERSED_CHUNKS
    if rec.get("status") == _COUNTED:
        max_tokens = rec.get("max_tokens")
        limit = max_tokens if isinstance(max_tokens, int) and not isinstance(max_tokens, bool) else None
        if token_count_problem(list(rec.get("chunk_tokens") or ()), rec.get("output_tokens"), limit) is not None:
            return IMPOSSIBLE_TOKENS
    return None


def screen_records(records: Iterable[R]) -> tuple[list[R], LeftOut]:
    """The records that can be true, each request once (its first line), and how many were left out, by kind.

    Records read as columns (``contract.columnar.ColumnRecords``) are screened on the arrays, by the same rules."""
    screen = getattr(records, "screen", None)
    if screen is not None:
        return screen()  # ColumnRecords.screen: (kept records, left out)
    kept: list[R] = []
    left_out: LeftOut = {}
    seen: set[Any] = set()
    for rec in records:
        rid = rec.get("request_id")
        kind = DUPLICATE if rid in seen else record_problem(rec)
        seen.add(rid)
        if kind is None:
            kept.append(rec)
        else:
            left_out[kind] = left_out.get(kind, 0) + 1
    return kept, left_out


def left_out_text(left_out: Mapping[str, int]) -> str:
    """'3 duplicate (...), 1 with a negative time': the counts in ``LEFT_OUT_KINDS`` order, zero counts omitted."""
    return ", ".join(f"{left_out[k]} {LEFT_OUT_TEXT[k]}" for k in LEFT_OUT_KINDS if left_out.get(k))

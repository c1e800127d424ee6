"""Answers that change: a lossy speculative server and batch-dependent arithmetic, both seeded and recorded.

Two knobs (profile keys ``lossy`` and ``batch_variance``, ``config/emulator/README.md``) let tests hold the
suite's output-equivalence check against a known truth:

* ``lossy: {prob: p, after: k}``: each output token at position >= k changes with probability p (a speculative
  server that does not return the target model's own answer). The draw depends on (seed, prompt, position)
  only, so the same prompt changes at the same place at every load.
* ``batch_variance: {prob: p}``: a token produced in a step of B > 1 running requests changes with probability p,
  drawn from (seed, prompt, position, B): kernels whose arithmetic depends on the batch shape. At B = 1 nothing
  changes, so a lone request always gets the reference answer.

The first change forks the rest of the answer (an autoregressive model continues from the changed token); the
ledger records it as ``output_change``: position, the token id before and after, the cause, and the batch.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from .textmodel import WordStream, text_unit

__all__ = ["Divergence", "parse_divergence"]


class _Reader(Protocol):
    def number(self, key: str, default: float | None = None, *, lo: float = 0.0, lo_open: bool = False,
               hi: float = ...) -> float: ...
    def integer(self, key: str, default: int | None = None, *, lo: int = 0) -> int: ...
    def finish(self) -> None: ...


@dataclass(frozen=True)
class Divergence:
    """Both knobs; all zero (the default) leaves every answer the prompt's own reference answer."""

    lossy_prob: float = 0.0
    lossy_after: int = 0
    batch_prob: float = 0.0

    @property
    def active(self) -> bool:
        return self.lossy_prob > 0 or self.batch_prob > 0

    def first_change(self, seed: int, key: str, start: int, count: int, batch: int) -> tuple[int, str] | None:
        """The first of positions ``start .. start+count-1`` whose token changes, and why; None if none."""
        for pos in range(start, start + count):
            if self.lossy_prob > 0 and pos >= self.lossy_after \
                    and text_unit(key, f"lossy{seed}:{pos}") < self.lossy_prob:
                return pos, "lossy"
            if self.batch_prob > 0 and batch > 1 and text_unit(key, f"batch{seed}:{pos}:{batch}") < self.batch_prob:
                return pos, "batch"
        return None


def change_answer(words: WordStream, key: str, seed: int, position: int, cause: str, batch: int) -> dict[str, Any]:
    """Fork ``words`` at ``position`` and return the ledger's ``output_change`` entry."""
    before, after = words.fork(position, f"{seed}:{cause}:{position}:{key}")
    return {"position": position, "from_id": before, "to_id": after, "cause": cause, "batch": batch}


def parse_divergence(lossy: _Reader | None, batch: _Reader | None) -> Divergence:
    """The profile's ``lossy`` and ``batch_variance`` blocks (either may be absent)."""
    out = Divergence()
    if lossy is not None:
        out = Divergence(lossy.number("prob", hi=1.0), lossy.integer("after", 0), out.batch_prob)
        lossy.finish()
    if batch is not None:
        out = Divergence(out.lossy_prob, out.lossy_after, batch.number("prob", hi=1.0))
        batch.finish()
    return out

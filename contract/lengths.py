"""Request length distributions (``--input-len``, ``--output-len``): parsed once, drawn per request.

``fixed:512``, ``uniform:128-1024`` (whole numbers, both ends included), ``normal:512,128`` (rounded, at
least 1), ``dataset`` (input only: each prompt as the prompt file has it). Draws are a pure function of the
run seed and the request's position in the shared prompt order, so a baseline run and a speculative run ask
for exactly the same lengths in the same order, whatever the concurrency or timing.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass

_FIXED = re.compile(r"^fixed:(\d+)$")
_UNIFORM = re.compile(r"^uniform:(\d+)-(\d+)$")
_NORMAL = re.compile(r"^normal:(\d+(?:\.\d+)?),(\d+(?:\.\d+)?)$")


class LengthError(ValueError):
    """A malformed length distribution; the message names the flag and what was expected."""


@dataclass(frozen=True)
class LengthDist:
    kind: str  # "fixed", "uniform", "normal", "dataset"
    a: float = 0.0  # fixed: the length; uniform: low; normal: mean
    b: float = 0.0  # uniform: high; normal: standard deviation

    def draw(self, seed: int, seq: int, stream: str) -> int | None:
        """The length for the request at prompt-order position ``seq``; None for ``dataset``."""
        if self.kind == "dataset":
            return None
        if self.kind == "fixed":
            return int(self.a)
        rng = random.Random(f"{seed}:{stream}:{seq}")
        if self.kind == "uniform":
            return rng.randint(int(self.a), int(self.b))
        return max(1, round(rng.gauss(self.a, self.b)))

    def text(self) -> str:
        if self.kind == "fixed":
            return f"fixed:{int(self.a)}"
        if self.kind == "uniform":
            return f"uniform:{int(self.a)}-{int(self.b)}"
        if self.kind == "normal":
            return f"normal:{self.a:g},{self.b:g}"
        return "dataset"


def parse_length(text: str, where: str, allow_dataset: bool = True) -> LengthDist | None:
    """'' -> None (not set); else one of the forms in the module docstring, lengths in tokens."""
    text = str(text or "").strip().lower()
    if not text:
        return None
    if text == "dataset":
        if not allow_dataset:
            raise LengthError(f"{where}: 'dataset' is for --input-len only (prompt files carry no output "
                              "lengths); expected fixed:N, uniform:A-B or normal:MEAN,SD")
        return LengthDist("dataset")
    expected = (f"{where}: expected fixed:N, uniform:A-B, normal:MEAN,SD"
                f"{' or dataset' if allow_dataset else ''} (tokens, positive), got {text!r}")
    if m := _FIXED.match(text):
        dist = LengthDist("fixed", float(m.group(1)))
        ok = dist.a >= 1
    elif m := _UNIFORM.match(text):
        dist = LengthDist("uniform", float(m.group(1)), float(m.group(2)))
        ok = 1 <= dist.a <= dist.b
    elif m := _NORMAL.match(text):
        dist = LengthDist("normal", float(m.group(1)), float(m.group(2)))
        ok = dist.a >= 1
    else:
        raise LengthError(expected)
    if not ok:
        raise LengthError(expected)
    return dist


_PREFIX = re.compile(r"^(\d+):(\d+)$")


def parse_shared_prefix(text: str, where: str = "--shared-prefix") -> tuple[int, int] | None:
    """'4:512' -> (4 system prompts, about 512 tokens each); '' -> None."""
    text = str(text or "").strip()
    if not text:
        return None
    m = _PREFIX.match(text)
    if m is None or int(m.group(1)) < 1 or int(m.group(2)) < 1:
        raise LengthError(f"{where}: expected N:LEN (N shared system prompts of about LEN tokens, both positive "
                          f"whole numbers, e.g. 4:512), got {text!r}")
    return int(m.group(1)), int(m.group(2))

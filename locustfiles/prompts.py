"""Prompt sets and the deterministic order in which load-test users consume them.

Why this exists: a single-stream test with one prompt can show a speculative-decoding speed-up that
vanishes under concurrent load with varied prompts (draft acceptance depends heavily on the text).
So every run draws from a diverse prompt set, in an order that is a pure function of (set, seed),
so that baseline and speculative runs send exactly the same requests.

Sources (``load_prompts(spec)``):

* a built-in set name, i.e. ``config/prompts/<name>.jsonl`` under the repo root, or a set composed from one
  (``GENERATED_SETS``);
* a path to a user file: JSONL prompts or chats, ShareGPT JSON or JSONL, chat JSONL ending with the model's
  answer (the formats: ``locustfiles.promptfile``);
* one of the field's standard sets by name, ``mt-bench`` or ``mt-bench=PATH`` (``locustfiles.benchsets``).

Mistakes in a file raise ``PromptError`` (a ``ValueError``) naming the file, the line or entry and
what was expected, so a CLI can print one line instead of a traceback. The prompt and set types live in
``locustfiles.promptset`` and are importable from here.

This module must stay importable without Locust (stdlib only).
"""

from __future__ import annotations

import random
import re
import threading
from pathlib import Path
from typing import Literal

from specbench.locustfiles import longcontext
from specbench.locustfiles.benchsets import bench_set_names, find_bench_set, load_bench_set
from specbench.locustfiles.promptfile import BUILTIN_DIR, load_builtin, load_file
from specbench.locustfiles.promptset import Prompt, PromptError, PromptSet, content_sha256

__all__ = [
    "BUILTIN_DIR",
    "DEFAULT_FIXED_ID",
    "GENERATED_SETS",
    "Prompt",
    "PromptError",
    "PromptOrder",
    "PromptSet",
    "available_sets",
    "content_sha256",
    "load_prompts",
]

#: Prompt used by ``mode="fixed"`` when no id is given and the set contains it: the classic
#: single-prompt benchmark that makes speculative decoding look better than it is under load.
DEFAULT_FIXED_ID = "explanation-000"

_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")

Mode = Literal["diverse", "fixed"]

#: Built-in sets composed at load time from the ``diverse`` file (see ``locustfiles.longcontext``).
GENERATED_SETS: tuple[str, ...] = ("long-context",)


def available_sets() -> list[str]:
    """Names of the built-in prompt sets (files in ``config/prompts/`` and the generated ones)."""
    if not BUILTIN_DIR.is_dir():
        return []
    files = {p.stem for p in BUILTIN_DIR.glob("*.jsonl")}
    return sorted(files | ({*GENERATED_SETS} if "diverse" in files else set()))


def load_prompts(spec: str | Path) -> PromptSet:
    """Load a built-in set by name or a user file by path (JSONL or ShareGPT JSON, detected by content).

    A bare name (no directory part, no suffix) is looked up among the built-in sets first, then as a
    file in the working directory.
    """
    spec_str = str(spec)
    if not spec_str.strip():
        raise PromptError(f"empty prompt set name; built-in sets: {_available_text()}")
    found = find_bench_set(spec_str) if isinstance(spec, str) else None
    if found is not None:
        return load_bench_set(*found)
    try:
        return _find_and_load(spec, spec_str)
    except OSError as e:  # a name the file system refuses (too long, NUL): the user's input, not our fault
        raise PromptError(f"{spec_str[:80]!r}: not a usable file name ({e.strerror or e})") from None


def _find_and_load(spec: str | Path, spec_str: str) -> PromptSet:
    path = Path(spec_str).expanduser()
    is_bare_name = isinstance(spec, str) and _NAME_RE.match(spec_str) is not None and path.suffix == ""
    if is_bare_name:
        builtin = BUILTIN_DIR / f"{spec_str}.jsonl"
        if builtin.is_file():
            return load_builtin(spec_str)
        if spec_str in GENERATED_SETS and spec_str in available_sets():
            return longcontext.build()
        if not path.is_file():
            raise PromptError(
                f"unknown prompt set {spec_str!r}: not a built-in set ({_available_text()}) and no such file"
            )
    if path.is_dir():
        raise PromptError(f"{spec_str}: is a directory, expected a JSONL or ShareGPT JSON file")
    if not path.is_file():
        raise PromptError(f"{spec_str}: no such file (built-in sets: {_available_text()})")
    return load_file(path, name=path.stem, display=spec_str)


def _available_text() -> str:
    names = available_sets()
    builtin = ", ".join(names) if names else f"none found in {BUILTIN_DIR}"
    return f"{builtin}; standard sets: {', '.join(bench_set_names())}"


class PromptOrder:
    """Deterministic prompt sequence shared by all simulated users of one process.

    One cursor hands out global sequence numbers ``offset, offset + stride, offset + 2*stride, ...``
    and the prompt at sequence number ``s`` depends only on (set, seed, mode, fixed_id) and ``s``.
    So a run of N requests uses the first N prompts of the order whatever the concurrency or the
    request timing, and baseline and speculative runs see the same requests.

    * ``mode="diverse"``: ``random.Random(seed)`` shuffles the whole set once; sequence number ``s``
      gets ``shuffled[s % len(set)]``, i.e. the same shuffled list is *cycled* when exhausted (pass
      ``s // len(set)``), keeping the order a pure function of the seed.
    * ``mode="fixed"``: every request gets one prompt: ``fixed_id`` if given, else ``explanation-000``
      if the set has it, else the first prompt of the shuffled order.
    * Load runs number requests per ladder level with ``locustfiles.sequencer`` and call ``at(seq)``, so
      request N of a level gets prompt N however many processes send them; ``next``, ``stride`` and
      ``offset`` serve callers that walk the order themselves.
    """

    def __init__(
        self,
        prompt_set: PromptSet,
        seed: int = 0,
        mode: Mode = "diverse",
        fixed_id: str | None = None,
        stride: int = 1,
        offset: int = 0,
    ) -> None:
        if mode not in ("diverse", "fixed"):
            raise PromptError(f"unknown prompt mode {mode!r}: expected 'diverse' or 'fixed'")
        if isinstance(stride, bool) or not isinstance(stride, int) or stride < 1:
            raise PromptError(f"stride must be an integer >= 1, got {stride!r}")
        if isinstance(offset, bool) or not isinstance(offset, int) or not 0 <= offset < stride:
            raise PromptError(f"offset must be an integer in [0, {stride}), got {offset!r}")
        if not prompt_set.prompts:
            raise PromptError(f"prompt set {prompt_set.name!r} is empty")
        self.prompt_set = prompt_set
        self.seed = seed
        self.mode: Mode = mode
        self.stride = stride
        self.offset = offset
        shuffled = list(prompt_set.prompts)
        random.Random(seed).shuffle(shuffled)
        if mode == "fixed":
            if fixed_id is not None:
                chosen = prompt_set.get(fixed_id)
            elif any(p.id == DEFAULT_FIXED_ID for p in prompt_set.prompts):
                chosen = prompt_set.get(DEFAULT_FIXED_ID)
            else:
                chosen = shuffled[0]
            self.fixed_id: str | None = chosen.id
            self._order: tuple[Prompt, ...] = (chosen,)
        else:
            if fixed_id is not None:
                raise PromptError("fixed_id is only meaningful with mode='fixed'")
            self.fixed_id = None
            self._order = tuple(shuffled)
        self._issued = 0
        self._lock = threading.Lock()

    @property
    def order(self) -> tuple[Prompt, ...]:
        """One pass of the (single-process) order; cycled forever. One prompt in fixed mode."""
        return self._order

    @property
    def issued(self) -> int:
        """How many prompts this instance has handed out."""
        return self._issued

    def at(self, seq: int) -> Prompt:
        """The prompt for global sequence number ``seq`` (any worker's)."""
        if seq < 0:
            raise ValueError(f"sequence number must be >= 0, got {seq}")
        return self._order[seq % len(self._order)]

    def next(self) -> tuple[int, Prompt]:
        """Advance the shared cursor: (global sequence number, prompt). Safe across threads/greenlets."""
        with self._lock:
            k = self._issued
            self._issued += 1
        seq = self.offset + k * self.stride
        return seq, self.at(seq)

    def peek(self, n: int) -> list[Prompt]:
        """The first ``n`` prompts this instance hands out from a fresh start; does not move the cursor."""
        if n < 0:
            raise ValueError(f"n must be >= 0, got {n}")
        return [self.at(self.offset + k * self.stride) for k in range(n)]

    def reset(self) -> None:
        """Rewind the cursor, e.g. between warm-up and the measured phase if both must see the same order."""
        with self._lock:
            self._issued = 0

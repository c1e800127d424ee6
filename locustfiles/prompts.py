"""Prompt sets and the deterministic order in which load-test users consume them.

Why this exists: a single-stream test with one prompt can show a speculative-decoding speed-up that
vanishes under concurrent load with varied prompts (draft acceptance depends heavily on the text).
So every run draws from a diverse prompt set, in an order that is a pure function of (set, seed),
so that baseline and speculative runs send exactly the same requests.

Sources (``load_prompts(spec)``):

* a built-in set name, i.e. ``config/prompts/<name>.jsonl`` under the repo root;
* a path to a user JSONL file, one object per line: ``{"prompt": "..."}`` or
  ``{"messages": [{"role": "system"|"user"|"assistant", "content": "..."}, ...]}`` ending with a user turn, with
  optional ``"id"`` (default ``<file stem>-<line>``) and ``"category"`` (default ``"uncategorized"``);
* recorded conversations (#28): a ShareGPT JSON file (a JSON list of ``{"id"?, "conversations": [{"from":
  "human"|"gpt"|"system", "value": "..."}]}``), ShareGPT JSONL (one such object per line), or OpenAI-style chat
  JSONL whose ``messages`` end with the model's answer. The prompt is the first user turn (with any system
  message before it); the later user turns are kept in order and, with ``--multi-turn``, asked as turns 2, 3,
  ... (the server's own answers in between). Conversations without a user turn, or with an empty turn, are
  skipped and counted.

The format is detected from content: a file whose first non-blank character is ``[`` is ShareGPT.

Mistakes in a file raise ``PromptError`` (a ``ValueError``) naming the file, the line or entry and
what was expected, so a CLI can print one line instead of a traceback.

This module must stay importable without Locust (stdlib only).
"""

from __future__ import annotations

import hashlib
import json
import random
import re
import statistics
import threading
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from contract.jsonlines import json_objects
from specbench_config import data_path

__all__ = [
    "BUILTIN_DIR",
    "DEFAULT_FIXED_ID",
    "GENERATED_SETS",
    "Prompt",
    "PromptError",
    "PromptOrder",
    "PromptSet",
    "available_sets",
    "load_prompts",
]

#: Built-in prompt sets live here as ``<name>.jsonl`` (``config/prompts/``, shipped inside the wheel too).
BUILTIN_DIR = data_path("prompts")
#: Prompt used by ``mode="fixed"`` when no id is given and the set contains it: the classic
#: single-prompt benchmark that makes speculative decoding look better than it is under load.
DEFAULT_FIXED_ID = "explanation-000"

ROLES = ("system", "user", "assistant")
UNCATEGORIZED = "uncategorized"
# ShareGPT speaker names seen in the wild, mapped to chat roles.
_SHAREGPT_ROLES = {
    "human": "user",
    "user": "user",
    "gpt": "assistant",
    "chatgpt": "assistant",
    "assistant": "assistant",
    "bard": "assistant",
    "bing": "assistant",
    "model": "assistant",
    "system": "system",
}
_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")

Mode = Literal["diverse", "fixed"]


class PromptError(ValueError):
    """A prompt source is missing or malformed; the message is meant to be shown to the user as is."""


@dataclass(frozen=True)
class Prompt:
    """One request's input: either a plain text prompt or a chat conversation ending with a user turn."""

    id: str
    category: str
    text: str | None = None
    # Excluded from the hash so Prompt stays hashable although it holds dicts.
    messages: tuple[dict[str, str], ...] | None = field(default=None, hash=False)
    # A recorded conversation's later user turns, in order (ShareGPT, chat JSONL ending with an answer): with
    # --multi-turn they are asked as turns 2, 3, ... instead of the suite's own follow-up questions.
    recorded_turns: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if (self.text is None) == (self.messages is None):
            raise ValueError(f"prompt {self.id!r}: exactly one of text and messages must be set")

    @property
    def is_chat(self) -> bool:
        """True for multi-turn prompts (they carry ``messages``)."""
        return self.messages is not None

    def as_text(self) -> str:
        """Plain string for completion-style APIs; chats become a transcript ending in ``Assistant:``.

        A turn whose content starts with white space (a model's own continuation after ``Assistant:``, as a
        multi-turn conversation resends it) or is empty follows its ``Role:`` directly, so the transcript of
        turn k+1 starts with exactly the text of turn k plus the answer: what the server has in its cache.
        """
        if self.text is not None:
            return self.text
        assert self.messages is not None
        lines = [f"{m['role'].capitalize()}:{_spaced(m['content'])}" for m in self.messages]
        lines.append("Assistant:")
        return "\n".join(lines)

    def as_messages(self) -> list[dict[str, str]]:
        """Chat-API messages (fresh copies, safe to mutate); a text prompt becomes one user message."""
        if self.messages is not None:
            return [{"role": m["role"], "content": m["content"]} for m in self.messages]
        assert self.text is not None
        return [{"role": "user", "content": self.text}]

    @property
    def approx_chars(self) -> int:
        """Characters of prompt content (~4 per token for English), for length buckets in reports."""
        if self.text is not None:
            return len(self.text)
        assert self.messages is not None
        return sum(len(m["content"]) for m in self.messages)

    def canonical(self, include_id: bool = True) -> dict[str, Any]:
        """The fields that define this prompt, in a stable JSON-ready form (used for hashing)."""
        record: dict[str, Any] = {"id": self.id if include_id else None, "category": self.category}
        if self.text is not None:
            record["text"] = self.text
        else:
            record["messages"] = self.as_messages()
        if self.recorded_turns:
            record["recorded_turns"] = list(self.recorded_turns)
        return record


def _spaced(content: str) -> str:
    return content if not content or content[0].isspace() else f" {content}"


@dataclass(frozen=True)
class PromptSet:
    """A loaded prompt set; ``sha256`` identifies its content so reports can prove two runs matched."""

    name: str
    sha256: str
    prompts: tuple[Prompt, ...]
    source: str = ""
    skipped: int = 0  # ShareGPT conversations skipped (empty, or no user turn left)

    def __len__(self) -> int:
        return len(self.prompts)

    def categories(self) -> list[str]:
        """Sorted category names present in the set."""
        return sorted({p.category for p in self.prompts})

    def category_counts(self) -> dict[str, int]:
        """Prompt count per category, sorted by category name."""
        counts = Counter(p.category for p in self.prompts)
        return {c: counts[c] for c in sorted(counts)}

    def get(self, prompt_id: str) -> Prompt:
        """The prompt with this id; PromptError (listing a few ids) if there is none."""
        for p in self.prompts:
            if p.id == prompt_id:
                return p
        sample = ", ".join(p.id for p in self.prompts[:5])
        raise PromptError(f"prompt set {self.name!r} has no prompt with id {prompt_id!r} (ids look like: {sample})")

    def summary(self) -> dict[str, Any]:
        """Small JSON-ready description for run metadata."""
        chars = sorted(p.approx_chars for p in self.prompts)
        return {
            "name": self.name,
            "sha256": self.sha256,
            "source": self.source,
            "count": len(self.prompts),
            "categories": self.category_counts(),
            "chars_min": chars[0],
            "chars_median": int(statistics.median(chars)),
            "chars_max": chars[-1],
        }


def content_sha256(prompts: tuple[Prompt, ...] | list[Prompt], explicit_ids: list[bool] | None = None) -> str:
    """SHA-256 of the ordered canonical prompts; ids generated from the file name are left out so
    that copying or renaming a file keeps the hash."""
    h = hashlib.sha256()
    for i, p in enumerate(prompts):
        include_id = True if explicit_ids is None else explicit_ids[i]
        line = json.dumps(p.canonical(include_id), sort_keys=True, ensure_ascii=False, separators=(",", ":"))
        h.update(line.encode("utf-8"))
        h.update(b"\n")
    return h.hexdigest()


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
            return _load_file(builtin, name=spec_str, display=f"config/prompts/{builtin.name}")
        if spec_str in GENERATED_SETS and spec_str in available_sets():
            from . import longcontext  # it imports this module, so it is loaded only when asked for

            return longcontext.build()
        if not path.is_file():
            raise PromptError(
                f"unknown prompt set {spec_str!r}: not a built-in set ({_available_text()}) and no such file"
            )
    if path.is_dir():
        raise PromptError(f"{spec_str}: is a directory, expected a JSONL or ShareGPT JSON file")
    if not path.is_file():
        raise PromptError(f"{spec_str}: no such file (built-in sets: {_available_text()})")
    return _load_file(path, name=path.stem, display=spec_str)


def _available_text() -> str:
    names = available_sets()
    return ", ".join(names) if names else f"none found in {BUILTIN_DIR}"


def _load_file(path: Path, name: str, display: str) -> PromptSet:
    try:
        raw = path.read_bytes()
    except OSError as e:
        raise PromptError(f"{display}: cannot read file ({e.strerror or e})") from None
    try:
        content = raw.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise PromptError(f"{display}: not UTF-8 text (bad byte at offset {e.start})") from None
    if content.lstrip().startswith("["):
        prompts, explicit, skipped = _parse_sharegpt(content, display, path.stem)
    else:
        prompts, explicit, skipped = _parse_jsonl(content, display, path.stem)
    if not prompts:
        extra = f" ({skipped} conversations skipped: empty or without a user turn)" if skipped else ""
        raise PromptError(f"{display}: no prompts found{extra}")
    return PromptSet(
        name=name,
        sha256=content_sha256(prompts, explicit),
        prompts=tuple(prompts),
        source=display,
        skipped=skipped,
    )


def _parse_jsonl(content: str, display: str, stem: str) -> tuple[list[Prompt], list[bool], int]:
    skipped = 0
    prompts: list[Prompt] = []
    explicit: list[bool] = []
    seen: dict[str, int] = {}
    for lineno, where, obj in json_objects(content, display, PromptError,
                                           'a "prompt" string or a "messages" list'):
        pid, has_id = _read_id(obj, where, default=f"{stem}-{lineno}")
        if pid in seen:
            raise PromptError(f"{where}: duplicate id {pid!r} (already used on line {seen[pid]})")
        seen[pid] = lineno
        prompt = _jsonl_prompt(obj, where, pid, _read_category(obj, where))
        if prompt is _SKIP:
            skipped += 1
            continue
        prompts.append(prompt)
        explicit.append(has_id)
    return prompts, explicit, skipped


def _jsonl_prompt(obj: dict[str, Any], where: str, pid: str, category: str) -> Prompt:
    """One JSONL line's prompt (``_SKIP``: a recorded conversation with nothing to send)."""
    has_prompt, has_messages = "prompt" in obj, "messages" in obj
    if has_prompt and has_messages:
        raise PromptError(f'{where}: expected either "prompt" or "messages", not both')
    recorded = _recorded_line(obj, where, pid, category)
    if recorded is not None:  # ShareGPT conversation, or a chat ending with the model's answer
        return recorded
    if has_prompt:
        text = obj["prompt"]
        if not isinstance(text, str) or not text.strip():
            raise PromptError(f'{where}: expected "prompt" to be a non-empty string')
        return Prompt(id=pid, category=category, text=text)
    if has_messages:
        return Prompt(id=pid, category=category, messages=_read_messages(obj["messages"], where))
    raise PromptError(f'{where}: expected a "prompt" string or a "messages" list (or ShareGPT "conversations")')


def _read_id(obj: dict[str, Any], where: str, default: str) -> tuple[str, bool]:
    if obj.get("id") is None:
        return default, False
    pid = obj["id"]
    if isinstance(pid, bool) or not isinstance(pid, (str, int)) or not str(pid).strip():
        raise PromptError(f'{where}: expected "id" to be a non-empty string')
    return str(pid), True


def _read_category(obj: dict[str, Any], where: str) -> str:
    category = obj.get("category")
    if category is None:
        return UNCATEGORIZED
    if not isinstance(category, str) or not category.strip():
        raise PromptError(f'{where}: expected "category" to be a non-empty string')
    return category


def _read_messages(messages: Any, where: str, ending: str = "user") -> tuple[dict[str, str], ...]:
    if not isinstance(messages, list) or not messages:
        raise PromptError(f'{where}: expected "messages" to be a non-empty list of {{"role", "content"}} objects')
    out: list[dict[str, str]] = []
    for i, m in enumerate(messages):
        if not isinstance(m, dict):
            raise PromptError(f'{where}: messages[{i}]: expected an object with "role" and "content"')
        role, text = m.get("role"), m.get("content")
        if role not in ROLES:
            raise PromptError(f"{where}: messages[{i}]: expected role to be one of {', '.join(ROLES)}, got {role!r}")
        if not isinstance(text, str) or not text.strip():
            raise PromptError(f'{where}: messages[{i}]: expected "content" to be a non-empty string')
        out.append({"role": role, "content": text})
    if ending == "user" and out[-1]["role"] != "user":
        raise PromptError(f'{where}: expected "messages" to end with a user turn, got {out[-1]["role"]!r}')
    return tuple(out)


def _sharegpt_turn(turn: Any, where: str) -> dict[str, str]:
    """One ShareGPT turn ``{"from": human|gpt|system, "value": text}`` as a chat message."""
    if not isinstance(turn, dict):
        raise PromptError(f'{where}: expected an object with "from" and "value"')
    speaker, value = turn.get("from"), turn.get("value")
    role = _SHAREGPT_ROLES.get(speaker.lower()) if isinstance(speaker, str) else None
    if role is None:
        raise PromptError(f'{where}: expected "from" to be human, gpt or system, got {speaker!r}')
    if not isinstance(value, str):
        raise PromptError(f'{where}: expected "value" to be a string')
    return {"role": role, "content": value}


_SKIP = Prompt(id="", category="", text="")  # a recorded conversation with nothing to send: skipped


def first_turn(messages: list[dict[str, str]], pid: str, category: str) -> Prompt | None:
    """A recorded conversation as a prompt: its system messages and first user turn; the later user turns kept
    in order (``recorded_turns``). None when it has no user turn or an empty turn."""
    if any(not m["content"].strip() for m in messages):
        return None
    users = [i for i, m in enumerate(messages) if m["role"] == "user"]
    if not users:
        return None
    head = tuple(m for m in messages[: users[0] + 1] if m["role"] != "assistant")
    later = tuple(messages[i]["content"] for i in users[1:])
    return Prompt(id=pid, category=category, messages=head, recorded_turns=later)


def _recorded_line(obj: dict[str, Any], where: str, pid: str, category: str) -> Prompt | None:
    """A JSONL line holding a recorded conversation: ShareGPT's ``conversations``, or chat ``messages`` that end
    with the model's answer. None for any other line; ``_SKIP`` for one with no user turn (or an empty turn)."""
    if "conversations" in obj:
        conv = obj["conversations"]
        if not isinstance(conv, list):
            raise PromptError(f'{where}: expected "conversations" to be a list of {{"from", "value"}} turns')
        messages = [_sharegpt_turn(turn, f"{where}: conversations[{t}]") for t, turn in enumerate(conv)]
        return first_turn(messages, pid, category) or _SKIP
    raw = obj.get("messages")
    if isinstance(raw, list) and raw and isinstance(raw[-1], dict) and raw[-1].get("role") == "assistant":
        messages = list(_read_messages(raw, where, ending="assistant"))
        return first_turn(messages, pid, category) or _SKIP
    return None


def _parse_sharegpt(content: str, display: str, stem: str) -> tuple[list[Prompt], list[bool], int]:
    try:
        data = json.loads(content)
    except json.JSONDecodeError as e:
        raise PromptError(f"{display}: invalid JSON ({e.msg} at line {e.lineno} column {e.colno})") from None
    if not isinstance(data, list):  # pragma: no cover - guarded by the "[" check
        raise PromptError(f"{display}: expected a JSON list of ShareGPT conversations")
    prompts: list[Prompt] = []
    explicit: list[bool] = []
    seen: dict[str, int] = {}
    skipped = 0
    for index, entry in enumerate(data):
        where = f"{display} entry {index}"
        if not isinstance(entry, dict):
            raise PromptError(f'{where}: expected an object with a "conversations" list')
        conv = entry.get("conversations")
        if not isinstance(conv, list):
            raise PromptError(f'{where}: expected "conversations" to be a list of {{"from", "value"}} turns')
        messages = [_sharegpt_turn(turn, f"{where}: conversations[{t}]") for t, turn in enumerate(conv)]
        pid, has_id = _read_id(entry, where, default=f"{stem}-{index}")
        category = _read_category(entry, where)
        prompt = first_turn(messages, pid, category)
        if prompt is None:
            skipped += 1
            continue
        if pid in seen:
            raise PromptError(f"{where}: duplicate id {pid!r} (already used by entry {seen[pid]})")
        seen[pid] = index
        prompts.append(prompt)
        explicit.append(has_id)
    return prompts, explicit, skipped


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

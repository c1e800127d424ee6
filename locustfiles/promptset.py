"""What a prompt set is: its prompts (a text or a chat), the set's summary, and the content hash that proves two
runs sent the same requests.

Its own module, under the loaders (``locustfiles.promptfile``, ``locustfiles.longcontext``) and the order
(``locustfiles.prompts``), so that a set composed in code and a set read from a file are the same objects
without their modules importing each other. Importable without Locust.
"""

from __future__ import annotations

import hashlib
import json
import statistics
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Prompt", "PromptError", "PromptSet", "content_sha256"]


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
    # OpenAI function tools, sent as the chat API's ``tools`` (the prompt file's ``tools`` field): a server with a
    # tool parser then streams its answer as ``delta.tool_calls``. Out of the hash, like messages.
    tools: tuple[dict[str, Any], ...] | None = field(default=None, hash=False)

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
        if self.tools:
            record["tools"] = list(self.tools)
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

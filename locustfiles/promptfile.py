"""Reading one prompt file into a ``PromptSet``, the format detected from its content.

* JSONL, one object per line: ``{"prompt": "..."}`` or ``{"messages": [{"role": "system"|"user"|"assistant",
  "content": "..."}, ...]}`` ending with a user turn, with optional ``"id"`` (default ``<file stem>-<line>``) and
  ``"category"`` (default ``"uncategorized"``) and ``"tools"`` (OpenAI function tools, sent on the chat API);
* recorded conversations (#28): a ShareGPT JSON file (a JSON list of ``{"id"?, "conversations": [{"from":
  "human"|"gpt"|"system", "value": "..."}]}``), ShareGPT JSONL (one such object per line), or OpenAI-style chat
  JSONL whose ``messages`` end with the model's answer. The prompt is the first user turn (with any system
  message before it); the later user turns are kept in order and, with ``--multi-turn``, asked as turns 2, 3,
  ... (the server's own answers in between). Conversations without a user turn, or with an empty turn, are
  skipped and counted.

A file whose first non-blank character is ``[`` is ShareGPT. Mistakes raise ``PromptError`` naming the file, the
line or entry and what was expected. Its own module, under both the set finder (``locustfiles.prompts``) and the
set composed from a built-in file (``locustfiles.longcontext``), which the finder offers by name, so that neither
imports the other. Importable without Locust.
"""

from __future__ import annotations

import codecs
import json
from collections.abc import Iterable
from dataclasses import replace
from pathlib import Path
from typing import Any, BinaryIO

from specbench.config import data_path
from specbench.contract import inputcaps
from specbench.contract.inputcaps import MAX_INPUT_BYTES, capped_lines, over_lines, text_lines
from specbench.contract.jsonlines import decode_problem, json_objects, syntax_text
from specbench.locustfiles.promptset import Prompt, PromptError, PromptSet, content_sha256

__all__ = ["BUILTIN_DIR", "first_turn", "load_builtin", "load_file"]

#: Built-in prompt sets live here as ``<name>.jsonl`` (``config/prompts/``, shipped inside the wheel too).
BUILTIN_DIR = data_path("prompts")

ROLES = ("system", "user", "assistant")
MAX_FILE_BYTES = MAX_INPUT_BYTES  # a prompt file's prompts are held in memory (ShareGPT's file is 0.65 GiB)
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


def load_builtin(name: str) -> PromptSet:
    """The built-in set stored as ``config/prompts/<name>.jsonl``."""
    return load_file(BUILTIN_DIR / f"{name}.jsonl", name=name, display=f"config/prompts/{name}.jsonl")


def load_file(path: Path, name: str, display: str) -> PromptSet:
    """One file as the set ``name``; ``display`` is how messages and the set's ``source`` name the file.

    JSONL is read line by line under the caps of ``contract.inputcaps`` (lines, one line's length), so a bad
    line fails as soon as it is read (a 2 GB file with a bad first line was read whole, 4 GB of memory, before it
    was refused); a ShareGPT list is one JSON document and is read whole. Either way a file over
    ``MAX_FILE_BYTES`` is refused up front: its prompts are held in memory."""
    try:
        size = path.stat().st_size
        if size > MAX_FILE_BYTES:
            raise PromptError(f"{display}: {size / 2**30:.1f} GiB; a prompt file is held in memory, at most "
                              f"{MAX_FILE_BYTES / 2**30:.0f} GiB is read (take a sample of it)")
        with path.open("rb") as f:
            if _first_text_byte(f) == b"[":
                prompts, explicit, skipped = _parse_sharegpt(_decoded(f.read(), display), display, path.stem)
            else:
                lines = text_lines(capped_lines(f, display, PromptError), display, PromptError)
                prompts, explicit, skipped = _parse_jsonl(lines, display, path.stem)
    except OSError as e:
        raise PromptError(f"{display}: cannot read file ({e.strerror or e})") from None
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


def _first_text_byte(f: BinaryIO) -> bytes:
    """The file's first byte that is not a byte-order mark or white space (b"" for none); rewinds the file."""
    head = f.read(4096)
    f.seek(0)
    return head.removeprefix(codecs.BOM_UTF8).lstrip()[:1]


def _decoded(raw: bytes, display: str) -> str:
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise PromptError(f"{display}: not UTF-8 text (bad byte at offset {e.start})") from None


def _parse_jsonl(content: str | Iterable[str], display: str, stem: str) -> tuple[list[Prompt], list[bool], int]:
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
        tools = _read_tools(obj, where)
        prompts.append(replace(prompt, tools=tools) if tools else prompt)
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


def _read_tools(obj: dict[str, Any], where: str) -> tuple[dict[str, Any], ...] | None:
    """The optional ``tools`` of a JSONL line: OpenAI function tools, sent as they are on the chat API."""
    tools = obj.get("tools")
    if tools is None:
        return None
    if not isinstance(tools, list) or not tools:
        raise PromptError(f'{where}: expected "tools" to be a non-empty list of function tools')
    for i, tool in enumerate(tools):
        function = tool.get("function") if isinstance(tool, dict) else None
        name = function.get("name") if isinstance(function, dict) else None
        if not isinstance(tool, dict) or tool.get("type") != "function" or not isinstance(name, str) \
                or not name.strip():
            raise PromptError(f'{where}: tools[{i}]: expected {{"type": "function", "function": {{"name": ...}}}}')
    return tuple(tools)


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
        data, problem = decode_problem(content)
    except json.JSONDecodeError as e:
        raise PromptError(f"{display}: invalid JSON ({syntax_text(e, with_line=True)})") from None
    if problem:
        raise PromptError(f"{display}: {problem}")
    if not isinstance(data, list):  # pragma: no cover - guarded by the "[" check
        raise PromptError(f"{display}: expected a JSON list of ShareGPT conversations")
    if len(data) > inputcaps.MAX_INPUT_LINES:  # the row cap of every other format, here in entries
        raise over_lines(display, PromptError, "entries")
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

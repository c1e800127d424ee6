"""A chat answer streamed as a tool call, for a request that sends ``tools`` (docs/guides/emulator.md).

SGLang, vLLM and llama.cpp, with a tool parser on, stream a model's tool call as ``delta.tool_calls`` fragments:
the first names the call (``id``, ``type``, ``function.name``), the later ones add ``function.arguments`` text,
and no ``content`` comes at all; the finish reason is ``tool_calls`` where the model stopped by itself. The
emulator answers such a request with one call of the chosen function whose arguments are the answer's words as
JSON (``{"text": "..."}``), one fragment per chunk it writes, so a client that counts only ``content`` deltas
sees no output at all. The tokens, their timing and the ledger are the same as for a text answer.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from .errors import ApiError

__all__ = ["ARGUMENTS_HEAD", "ARGUMENTS_TAIL", "call_delta", "chosen_tool", "finish_name"]

ARGUMENTS_HEAD = '{"text": "'
ARGUMENTS_TAIL = '"}'


def chosen_tool(data: Mapping[str, Any]) -> str | None:
    """The function a chat request's answer calls: ``tool_choice``'s named function, else the first of
    ``tools``; None without tools or with ``tool_choice: "none"``. Malformed tools are a 400, as on the servers."""
    tools = data.get("tools")
    if tools is None:
        return None
    if not isinstance(tools, list):
        raise ApiError.bad_request("Field 'tools' must be a list of function tools")
    names = [_tool_name(tool, i) for i, tool in enumerate(tools)]
    choice = data.get("tool_choice")
    if not names or choice == "none":
        return None
    if isinstance(choice, dict):
        name = (choice.get("function") or {}).get("name") if isinstance(choice.get("function"), dict) else None
        if name not in names:
            raise ApiError.bad_request("Field 'tool_choice' must name a function of 'tools'")
        return str(name)
    return names[0]


def _tool_name(tool: Any, i: int) -> str:
    function = tool.get("function") if isinstance(tool, dict) else None
    name = function.get("name") if isinstance(function, dict) else None
    if not isinstance(tool, dict) or tool.get("type", "function") != "function" or not isinstance(name, str) \
            or not name:
        raise ApiError.bad_request(f"Field 'tools[{i}]' must be {{\"type\": \"function\", \"function\": "
                                   f"{{\"name\": ...}}}}")
    return name


def call_delta(name: str, call_id: str, text: str, *, first: bool, final: bool) -> list[dict[str, Any]]:
    """``delta.tool_calls`` for one chunk: ``text`` (the chunk's words) as the next piece of the arguments."""
    arguments = (ARGUMENTS_HEAD if first else "") + json.dumps(text, ensure_ascii=False)[1:-1]
    if final:
        arguments += ARGUMENTS_TAIL
    function: dict[str, Any] = {"arguments": arguments}
    call: dict[str, Any] = {"index": 0, "function": function}
    if first:
        call = {"index": 0, "id": f"call_{call_id[:24]}", "type": "function",
                "function": {"name": name, **function}}
    return [call]


def finish_name(finish: str | None, tool: str | None) -> str | None:
    """The finish reason on the wire: ``tool_calls`` where a tool-calling answer stopped by itself."""
    return "tool_calls" if tool is not None and finish == "stop" else finish

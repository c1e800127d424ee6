"""Minimal stdlib HTTP/SSE client for llama-server (http.client, line-by-line SSE reading).

Why our own: the real-server tests must check the wire format itself (one event per token, the final
``usage``/``timings`` chunk, the ``[DONE]`` sentinel) without any client library smoothing it over.
"""

from __future__ import annotations

import http.client
import json
import time
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit


def _connect(url: str, timeout: float) -> http.client.HTTPConnection:
    parts = urlsplit(url)
    return http.client.HTTPConnection(parts.hostname or "127.0.0.1", parts.port or 80, timeout=timeout)


def get(url: str, path: str, timeout: float = 10.0) -> tuple[int, bytes]:
    """GET ``url + path``; returns (status, body)."""
    conn = _connect(url, timeout)
    try:
        conn.request("GET", path)
        resp = conn.getresponse()
        return resp.status, resp.read()
    finally:
        conn.close()


def get_json(url: str, path: str, timeout: float = 10.0) -> tuple[int, Any]:
    """GET and decode a JSON body; returns (status, object)."""
    status, body = get(url, path, timeout)
    return status, json.loads(body)


def metrics(url: str, timeout: float = 10.0) -> dict[str, float]:
    """``GET /metrics`` (llama-server started with ``--metrics``) as {"name{labels}": value}."""
    status, body = get(url, "/metrics", timeout)
    if status != 200:
        raise RuntimeError(f"GET {url}/metrics answered {status}; was the server started with --metrics?")
    out = {}
    for line in body.decode().splitlines():
        if line and not line.startswith("#"):
            name, value = line.rsplit(" ", 1)
            out[name] = float(value)
    return out


@dataclass
class SSEStream:
    """One streamed response: every ``data:`` payload in order, with arrival times."""

    status: int
    data: list[str] = field(default_factory=list)
    times: list[float] = field(default_factory=list)  # seconds since the request was sent

    @property
    def done(self) -> bool:
        """The stream ended with the OpenAI ``[DONE]`` sentinel."""
        return bool(self.data) and self.data[-1] == "[DONE]"

    @property
    def events(self) -> list[dict[str, Any]]:
        """The JSON events (everything but ``[DONE]``)."""
        return [json.loads(d) for d in self.data if d != "[DONE]"]

    def contents(self) -> list[str]:
        """Per-event generated text (chat ``delta.content`` or completions ``text``), empty ones left out."""
        out = []
        for ev in self.events:
            for choice in ev.get("choices") or []:
                text = (choice.get("delta") or {}).get("content") if "delta" in choice else choice.get("text")
                if text:
                    out.append(text)
        return out

    def last_with(self, key: str) -> dict[str, Any] | None:
        """The last event that carries ``key`` (e.g. ``usage`` or ``timings``)."""
        for ev in reversed(self.events):
            if key in ev:
                return ev
        return None

    @property
    def usage(self) -> dict[str, Any] | None:
        ev = self.last_with("usage")
        return ev["usage"] if ev else None

    @property
    def timings(self) -> dict[str, Any] | None:
        ev = self.last_with("timings")
        return ev["timings"] if ev else None

    def finish_reasons(self) -> list[str]:
        """All non-null finish reasons seen."""
        return [
            c["finish_reason"]
            for ev in self.events
            for c in ev.get("choices") or []
            if c.get("finish_reason")
        ]


def stream(url: str, path: str, payload: dict[str, Any], timeout: float = 60.0) -> SSEStream:
    """POST ``payload`` with ``stream: true`` and read the SSE response line by line until EOF."""
    body = json.dumps({**payload, "stream": True}).encode()
    conn = _connect(url, timeout)
    t0 = time.perf_counter()
    try:
        conn.request("POST", path, body=body, headers={"Content-Type": "application/json"})
        resp = conn.getresponse()
        result = SSEStream(status=resp.status)
        while True:
            raw = resp.readline()
            if not raw:
                break
            line = raw.decode("utf-8").rstrip("\r\n")  # strict: a split UTF-8 sequence is an error here
            if line.startswith("data:"):
                result.data.append(line[5:].strip())
                result.times.append(time.perf_counter() - t0)
            elif line and not line.startswith(":") and resp.status != 200:
                result.data.append(line)  # a non-SSE error body, kept for the assertion message
        return result
    finally:
        conn.close()


def chat_payload(content: str, max_tokens: int, **extra: Any) -> dict[str, Any]:
    """A greedy chat request that runs to exactly ``max_tokens`` and reports usage."""
    return {
        "model": "tiny",
        "messages": [{"role": "user", "content": content}],
        "max_tokens": max_tokens,
        "temperature": 0,
        "ignore_eos": True,
        "stream_options": {"include_usage": True},
        **extra,
    }


def completion_payload(prompt: str, max_tokens: int, **extra: Any) -> dict[str, Any]:
    """A greedy /v1/completions request that runs to exactly ``max_tokens``."""
    return {
        "model": "tiny",
        "prompt": prompt,
        "max_tokens": max_tokens,
        "temperature": 0,
        "ignore_eos": True,
        **extra,
    }

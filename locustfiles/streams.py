"""Reading one streamed response: tokens per chunk, finish, usage, speculation and errors.

One ``StreamState`` per request is fed decoded SSE payloads with their arrival times. What is common to every
API (``[DONE]``, malformed payloads, error payloads, the response id) lives here; what a chunk means is its API's
dialect's business (``locustfiles.dialects``), which writes it into the facts this state holds
(``locustfiles.streamfacts``: the fields, and the resolved token counts). Output tokens always come from what
the server reports; chunk counting is the marked last resort.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import orjson

from specbench.contract.redact import clip
from specbench.locustfiles.dialects import Dialect, dialect
from specbench.locustfiles.sse import DONE
from specbench.locustfiles.streamfacts import ERROR_TEXT_LIMIT, StreamFacts, TokenCounts

__all__ = ["StreamState", "TokenCounts", "parse_payload"]

MALFORMED_TEXT_LIMIT = 120  # of a chunk that is not JSON, kept for the record (redacted before the cut)


def parse_payload(payload: bytes) -> Any:
    """One chunk's JSON, or None when it is not JSON. orjson first: about 4x faster than the standard
    library on SGLang's cumulative chunks (the read loop's largest cost); what it refuses (NaN, huge integers,
    non-UTF-8) gets the standard library's more lenient reading, so both accept exactly the same payloads."""
    try:
        return orjson.loads(payload)
    except orjson.JSONDecodeError:
        pass
    try:
        return json.loads(payload)
    except ValueError:
        return None


@dataclass
class StreamState(StreamFacts):
    """One request's stream as it is read: fed decoded SSE payloads, each chunk handed to its API's dialect."""

    dialect: Dialect = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self.dialect = dialect(self.api)

    # -- feeding -------------------------------------------------------------------------------------------

    def feed(self, t: float, payload: bytes) -> None:
        """Take one SSE data payload that arrived at time ``t``; nothing after ``[DONE]`` is read as output."""
        if self.done:
            self.after_done += 1
            return
        if payload == DONE:
            self.done = True
            return
        obj = parse_payload(payload)
        if not isinstance(obj, dict):
            if self.malformed is None:
                self.malformed = clip(payload.decode("utf-8", "replace"), MALFORMED_TEXT_LIMIT)
            return
        err = obj.get("error")
        if err is not None:
            self._take_error(err)
            return
        if obj.get("object") == "error":  # old vLLM: a flat error object as a stream chunk
            self._take_error(obj)
            return
        if self.server_request_id is None and isinstance(obj.get("id"), str):
            self.server_request_id = obj["id"]
        self.dialect.take(self, t, obj)

    def _take_error(self, err: Any) -> None:
        if isinstance(err, dict):
            message = str(err.get("message") or err)
            code = err.get("code")
            self.error_code = code if isinstance(code, int) else None
        else:
            message = str(err)
        if self.error is None:
            self.error = clip(message, ERROR_TEXT_LIMIT)

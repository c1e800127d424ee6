"""SGLang's native ``/generate`` wire format: cumulative ``text``/``output_ids``, object finish_reason."""

from __future__ import annotations

from typing import Any

from .output import DONE, Output, sse

__all__ = ["GenerateWire"]


class GenerateWire:
    """Formats one ``/generate`` answer; headers go out before the first token, as with uvicorn."""

    defer_headers = False
    abort_carries_tokens = True

    def __init__(self, out: Output) -> None:
        self.out = out
        self._text = ""
        self._first = True

    def opening(self) -> list[bytes]:
        return []

    def content(self, start: int, stop: int, final: bool) -> list[bytes]:
        out = self.out
        self._text += out.words.text(start, stop)
        meta = out.meta_info(stop, final=final, first=self._first)
        self._first = False
        return [sse({"text": self._text, "output_ids": out.words.ids[:stop], "meta_info": meta})]

    def closing(self) -> list[bytes]:
        return [DONE]

    def aborted(self, start: int, stop: int) -> list[bytes]:
        """A scheduler abort: a normal chunk whose finish_reason is of type abort, then [DONE]."""
        self.out.finish = "abort"
        return [*self.content(start, stop, final=True), DONE]

    def graceful_abort(self, start: int, stop: int) -> list[bytes]:
        """The native route has one abort shape: the finish_reason object of type abort."""
        return self.aborted(start, stop)

    def body(self) -> dict[str, Any]:
        out = self.out
        n = out.produced
        return {"text": out.words.text(0, n), "output_ids": out.words.ids[:n],
                "meta_info": out.meta_info(n, final=True, first=True)}

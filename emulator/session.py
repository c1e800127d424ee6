"""One generation request from parsed body to ledger record: faults, scheduling, writing, truth.

The writer waits for the scheduler's wake-ups and sends everything produced since its last write in
one chunk, so a slow client sees coalesced chunks (as on SGLang) and never slows the scheduler down.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

import gevent

from .errors import flat_error, nested_error
from .faults import STREAM_FAULTS, http_fault
from .httpserver import ClientGone, Responder
from .output import Output
from .parsing import GenRequest
from .prefixcache import PrefixCache
from .profile import Profile
from .scheduler import Job, QueueFull, Scheduler
from .textmodel import natural_answer_tokens
from .wire_llamacpp import LlamaChatWire, LlamaCompletionsWire
from .wire_native import GenerateWire
from .wire_openai import ChatWire, CompletionsWire
from .wire_vllm import VllmChatWire, VllmCompletionsWire

__all__ = ["PrefixCache", "Session", "SessionContext", "send_json"]

WAIT_LIMIT_S = 600.0
_WIRES: dict[str, dict[str, Callable[[Output], Any]]] = {
    "sglang": {"/generate": GenerateWire, "/v1/completions": CompletionsWire, "/v1/chat/completions": ChatWire},
    "vllm": {"/v1/completions": VllmCompletionsWire, "/v1/chat/completions": VllmChatWire},
    "llamacpp": {"/v1/completions": LlamaCompletionsWire, "/v1/chat/completions": LlamaChatWire},
}


class Wire(Protocol):
    defer_headers: bool
    abort_carries_tokens: bool

    def opening(self) -> list[bytes]: ...
    def content(self, start: int, stop: int, final: bool) -> list[bytes]: ...
    def closing(self) -> list[bytes]: ...
    def aborted(self, start: int, stop: int) -> list[bytes]: ...
    def graceful_abort(self, start: int, stop: int) -> list[bytes]: ...
    def body(self) -> dict[str, Any]: ...


def send_json(responder: Responder, status: int, body: Any) -> None:
    responder.send(status, json.dumps(body, separators=(",", ":")).encode())


@dataclass
class SessionContext:
    profile: Profile
    scheduler: Scheduler
    cache: PrefixCache
    record: Callable[[dict[str, Any]], None]


@dataclass
class _Progress:
    """What the client has been sent: output tokens per chunk, and when the first tokens left."""

    chunks: list[int] = field(default_factory=list)
    written_s: list[float] = field(default_factory=list)  # when each of ``chunks`` was written
    first_token_s: float | None = None
    sent: int = 0

    def wrote(self, tokens: int, when: float) -> None:
        if tokens > 0:
            self.chunks.append(tokens)
            self.written_s.append(when)
            self.sent += tokens
            if self.first_token_s is None:
                self.first_token_s = when


class Session:
    """Runs one request; ``fault`` is the name chosen by the fault picker, or None."""

    def __init__(self, ctx: SessionContext, req: GenRequest, responder: Responder, arrival_s: float,
                 fault: str | None) -> None:
        self.ctx, self.req, self.resp, self.arrival_s = ctx, req, responder, arrival_s
        self.fault = fault if (fault not in STREAM_FAULTS or req.stream) else None
        self.job: Job | None = None
        self.out: Output | None = None
        self._recorded = False
        self._refused: str | None = None  # why the server refused it at once (the ledger's ``refused``)

    # ------------------------------------------------------------ entry

    def run(self) -> None:
        req, ctx = self.req, self.ctx
        rejected = http_fault(self.fault)
        if rejected is not None:
            self.reject(rejected.status, flat_error(rejected.status, rejected.message, rejected.err_type))
            return
        profile = ctx.profile
        natural = natural_answer_tokens(req.text, profile.answer_min_tokens, profile.answer_max_tokens)
        stops_at_eos = not req.ignore_eos and natural <= req.max_new_tokens
        target = natural if stops_at_eos else req.max_new_tokens
        cached = ctx.cache.cached_tokens(req.text, req.prompt_tokens)
        job = ctx.scheduler.new_job(req.text, target, req.prompt_tokens - cached)
        try:
            ctx.scheduler.submit(job)
        except QueueFull:
            self._refuse_full()
            return
        self.job = job
        self.out = Output(req, job, profile, stops_at_eos, cached, self.arrival_s)
        wire: Wire = _WIRES[profile.wire.server][req.route](self.out)
        progress = _Progress()
        try:
            if req.stream:
                self._stream(job, wire, progress)
            else:
                self._whole(job, wire, progress)
        except ClientGone:
            job.abort()
            self._record(200, progress, "abort", error="client disconnected")
            raise

    def reject(self, status: int, body: dict[str, Any], headers: tuple[str, ...] = ()) -> None:
        """Answer with an error before any generation (and record it)."""
        message = body.get("message") or body.get("error")
        if isinstance(message, dict):
            message = message.get("message")
        self._record(status, _Progress(), None, error=str(message))
        self.resp.send(status, json.dumps(body, separators=(",", ":")).encode(), headers=headers)

    def _refuse_full(self) -> None:
        """The queue is full: refused at once with the profile's status (503, or 429 as a gateway), the server's
        JSON error body (vLLM's nested one on a vLLM vintage, SGLang's flat one otherwise; a plain JSON body even
        for a stream) and, where the profile says, a Retry-After; counted in the ledger as ``refused``."""
        p = self.ctx.profile
        status, message = p.refuse_status, "The request queue is full."
        body = nested_error(status, message) if p.wire.server == "vllm" else flat_error(status, message, str(status))
        headers = (f"retry-after: {p.retry_after_s:g}",) if p.retry_after_s is not None else ()
        self._refused = "queue_full"
        self.reject(status, body, headers)

    # ------------------------------------------------------------ writing

    def _wait(self, job: Job) -> bool:
        """Block until the scheduler has news; False when the job died (server stopping, timeout)."""
        if not job.updated.wait(timeout=WAIT_LIMIT_S):
            job.abort()
            return False
        job.updated.clear()
        return not job.aborted

    def _stream(self, job: Job, wire: Wire, progress: _Progress) -> None:
        resp, out = self.resp, self.out
        assert out is not None
        resp.start_stream(defer=wire.defer_headers)
        strike_at = max(1, job.target_tokens // 2) if self.fault else None
        for _ in range(job.target_tokens + 8):
            if not self._wait(job):
                break
            produced, final = job.produced, job.finished
            sent = progress.sent
            if produced <= sent and not final:
                continue
            if final:
                out.finish = out.natural_finish
            opening = wire.opening() if sent == 0 else []
            events = [*opening, *wire.content(sent, produced, final)]
            stall = False
            if strike_at is not None and produced >= strike_at:
                strike_at = None
                struck = self._strike(job, wire, progress, opening, events, sent, produced)
                if struck is None:
                    return
                events, stall = struck
            if final:
                self._finish([*events, *wire.closing()], produced - sent, progress, out.finish)
                return
            # Stamped just before the write, as the last chunk is: a process descheduled between a write and its
            # stamp (a loaded machine) would otherwise date a token after the client had already read it.
            written_s = time.time()
            resp.write(b"".join(events))
            progress.wrote(produced - sent, written_s)
            if stall:
                gevent.sleep(self.ctx.profile.faults.stall_s * self.ctx.profile.scale)
        job.abort()
        self._record(200, progress, "abort", error="server stopped")
        resp.cut()

    def _strike(self, job: Job, wire: Wire, progress: _Progress, opening: list[bytes], events: list[bytes],
                sent: int, produced: int) -> tuple[list[bytes], bool] | None:
        """This request's in-stream fault, once, half-way: (events to send, stall after them), or None when
        the fault ended the stream."""
        if self.fault == "cut_stream":
            job.abort()
            self._record(200, progress, None)
            self.resp.cut()
            return None
        if self.fault in ("stream_error", "abort"):
            job.abort()
            delivered = produced - sent if wire.abort_carries_tokens else 0
            end = wire.aborted if self.fault == "stream_error" else wire.graceful_abort
            self._finish([*opening, *end(sent, produced)], delivered, progress, "abort")
            return None
        if self.fault == "malformed_chunk":
            events[len(opening)] = _corrupt(events[len(opening)])
        return events, self.fault == "stall"

    def _finish(self, events: list[bytes], new_tokens: int, progress: _Progress, finish: str | None) -> None:
        """Record first, then send the last chunk and the stream terminator in one write."""
        now = time.time()
        progress.wrote(new_tokens, now)
        self._record(200, progress, finish, finished_s=now)
        self.resp.finish_stream(b"".join(events))

    def _whole(self, job: Job, wire: Wire, progress: _Progress) -> None:
        out = self.out
        assert out is not None
        for _ in range(job.target_tokens + 8):
            if not self._wait(job) or job.finished:
                break
        if not job.finished:
            job.abort()
            self._record(503, progress, "abort", error="server stopped")
            send_json(self.resp, 503, flat_error(503, "The server is shutting down.", "503"))
            return
        out.finish = out.natural_finish
        body = json.dumps(wire.body(), separators=(",", ":")).encode()
        now = time.time()
        progress.wrote(job.produced, now)
        self._record(200, progress, out.finish, finished_s=now)
        self.resp.send(200, body)

    # ------------------------------------------------------------ truth

    def _record(self, status: int, progress: _Progress, finish: str | None, *, error: str | None = None,
                finished_s: float | None = None) -> None:
        if self._recorded:
            return
        self._recorded = True
        job, out, req = self.job, self.out, self.req
        spec = out.spec_figures() if out is not None else None
        if spec is not None and job is not None:
            spec["alpha"] = job.alpha
            spec["drafting_steps"] = job.drafting_steps  # the passes that verified a proposal (vLLM's count)
        extra: dict[str, Any] = {"refused": self._refused} if self._refused else {}  # opt-in fields
        if self.ctx.profile.ledger_text:  # opt-in: a long run's ledger would otherwise hold every prompt
            extra = {"prompt_text": req.text,
                     "output_text": out.words.text(0, progress.sent) if out is not None else ""}
        if self.ctx.profile.ledger_chunk_times:  # opt-in, likewise: one number per chunk
            extra["chunk_ms"] = [round((t - self.arrival_s) * 1000.0, 3) for t in progress.written_s]
        self.ctx.record({
            "rid": req.rid,
            "route": req.route,
            "stream": req.stream,
            "priority": req.priority,
            "status": status,
            "arrival_s": self.arrival_s,
            "scheduled_s": job.scheduled_s if job else None,
            "left_batch_s": job.left_s if job else None,
            "first_token_s": progress.first_token_s,
            "finished_s": finished_s if finished_s is not None else time.time(),
            "prompt_tokens": req.prompt_tokens,
            "cached_tokens": out.cached_tokens if out else 0,
            "max_new_tokens": req.max_new_tokens,
            "completion_tokens": progress.sent,
            "finish_reason": finish,
            "tokens_per_chunk": list(progress.chunks),
            "tokens_per_step": list(job.step_tokens) if job else [],
            "spec": spec,
            "output_change": job.change if job else None,
            "fault": self.fault,
            "error": error,
            **extra,
        })


def _corrupt(event: bytes) -> bytes:
    """Cut the JSON of a ``data:`` line in half: an SSE event whose payload cannot be parsed."""
    payload = event[len(b"data: "):].rstrip(b"\n")
    return b"data: " + payload[: max(1, len(payload) // 2)] + b"\n\n"

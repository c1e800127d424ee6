"""The Locust user: one streamed completion request per task, one record per request.

An ``HttpUser`` (its ``client`` stays for custom tasks) whose streamed requests go through the suite's own
HTTP/1.1 client (``locustfiles.transport``: one keep-alive connection per user, a prepared request head,
``read1`` returning whatever bytes have arrived, so first-token timing never waits for a buffer to fill); the
read loop does no more than split events and hand them to ``StreamState``. Locust's own statistics stay
meaningful: each request reports its end-to-end time with output tokens as response length, failures reach
the failure table, and TTFT gets its own entry, logged outside the Aggregated row.
"""

from __future__ import annotations

import dataclasses
import functools
import time
from dataclasses import dataclass, field
from typing import Any

import gevent
import orjson
from locust import HttpUser, constant, task
from locust.exception import CatchResponseError
from locust.user.task import LOCUST_STATE_RUNNING

from specbench.contract import tls
from specbench.contract.messages import RECORD_MESSAGE, START_MESSAGE
from specbench.contract.redact import clip
from specbench.contract.schema import SCHEMA_VERSION, AnswerLine, RequestRecord, Status, answer_digest
from specbench.contract.servertext import plain
from specbench.locustfiles.auth import auth_headers
from specbench.locustfiles.conversation import Conversation
from specbench.locustfiles.deferred import AFTER_SENDS
from specbench.locustfiles.pacer import wait_for_turn
from specbench.locustfiles.prompts import Prompt
from specbench.locustfiles.refusals import RefusalBackoff, is_refusal, retry_after_s
from specbench.locustfiles.run import RunContext
from specbench.locustfiles.silence import DeadlinePassed
from specbench.locustfiles.sse import EventReader
from specbench.locustfiles.streams import StreamState
from specbench.locustfiles.transport import STAMPS, Response, SendFailed, StreamClient, endpoint

BACKOFF_FIRST_S = 0.1
BACKOFF_MAX_S = 2.0
ERROR_TEXT_LIMIT = 200
ERROR_PAGE_LIMIT = 65536  # of a body that is not a stream, read for its text (the record keeps its start: it is
# redacted whole before it is cut, a key crossing the cut would no longer be recognised)


class Outcome:
    """How a request ended, in the record's terms."""

    __slots__ = ("error", "http_status", "reason", "retry_after", "status")

    def __init__(self, status: Status = "ok", http_status: int | None = None, error: str | None = None) -> None:
        self.status = status
        self.http_status = http_status
        self.error = error  # the record's detail
        self.reason: str | None = None  # a short, stable text for Locust's failure table (one row per kind)
        self.retry_after: float | None = None  # a refusal's Retry-After, seconds (``locustfiles.refusals``)

    def fail(self, status: Status, reason: str, detail: str | None = None) -> None:
        self.status, self.reason = status, clip(reason, ERROR_TEXT_LIMIT)  # may hold a server's header text
        self.error = clip(f"{reason}: {detail}" if detail else reason, ERROR_TEXT_LIMIT)  # redacted, then cut


def classify_stream_end(state: StreamState, outcome: Outcome, max_tokens: int | None = None) -> None:
    """A stream that finished reading: ok only with a finish marker other than an abort, [DONE], no error
    inside and output counts that can be true. An abort (``finish_reason`` "abort" on any route, with or without
    an error chunk) is a failure; so is an impossible count (``bad_count``: never averaged in)."""
    if outcome.status != "ok":
        return
    problem = state.count_problem(max_tokens)
    if problem is not None:
        outcome.fail("bad_count", "impossible output token count", problem)
    elif state.finish_reason == "abort" and is_refusal(state.error_code) and not state.chunk_times:
        outcome.fail("refused", f"refused inside the stream ({state.error_code})", state.error)  # SGLang's full queue
    elif state.finish_reason == "abort":
        outcome.fail("stream_error", "server aborted the request", state.error)
    elif state.error is not None and is_refusal(state.error_code) and not state.chunk_times:
        # vLLM 0.32's full queue, answered after the stream began: HTTP 200, then an error chunk with code 503 (#60)
        outcome.fail("refused", f"refused inside the stream ({state.error_code})", state.error)
    elif state.error is not None:
        code = f" {state.error_code}" if state.error_code else ""
        outcome.fail("stream_error", f"error{code} inside the stream", state.error)
    elif state.malformed is not None:
        outcome.fail("stream_error", "malformed chunk (not JSON)", state.malformed)
    elif not state.done:
        outcome.fail("truncated", "stream ended without [DONE]")
    elif state.finish_reason is None:
        outcome.fail("truncated", "stream ended without a finish reason")


def _page(resp: Response, limit: int) -> str:
    """The start of an answer that is not a stream (an error page, a JSON body), as text for the record."""
    try:
        return resp.read(limit).decode("utf-8", "replace").strip()
    except OSError as exc:  # a body that cannot be read (silent, cut) still leaves the status to report
        return f"<unreadable body: {type(exc).__name__}>"


def _not_a_stream(content_type: str) -> bool:
    """A page or a whole JSON answer where an event stream was asked for (a proxy, or streaming ignored)."""
    ctype = content_type.lower()
    return "text/event-stream" not in ctype and ("html" in ctype or "json" in ctype)


@dataclass
class InFlight:
    """One request as it goes: what was asked, when, and (filled in as the stream is read) what came back."""

    request_id: str
    seq: int
    prompt: Prompt
    step: int | None
    target_c: int | None
    start_s: float  # wall clock when sent (set again by ``sent`` when its bytes go on the wire)
    scheduled_s: float | None  # open loop: when the schedule said to send it
    t0: float  # perf_counter when sent: every offset of the record is measured from here
    state: StreamState
    outcome: Outcome = field(default_factory=lambda: Outcome())
    end: float = 0.0  # perf_counter when the stream ended or failed
    target_rate: float | None = None  # open loop: the step's request rate when it was sent
    max_tokens: int = 0  # what this request asked for
    conversation: Conversation | None = None  # --multi-turn: the conversation and turn this request is
    send_lag_ms: float | None = None  # from the user being ready to the send; None: it never went on the wire
    recv_lag_ms: float | None = None  # the most a read's event-loop time trailed its kernel stamp; None: no stamp
    chunk_clock: str | None = None  # on the kernel's clock: what dated its chunks ("kernel", "user", "mixed")
    write_ms: float | None = None  # from its start to the kernel holding all its bytes; None: never all written
    sent: bool = False  # its bytes went on the wire (``LLMUser._sent``)
    started: float | None = None  # wall clock when its send began, once it ran its course (Locust's start_time)
    ready: float | None = None  # a clean end: the user's wake for its last bytes, or their stamp (send lag's start)
    backoff_s: float = 0.0  # a refusal: what the user waits before its next send (``locustfiles.refusals``)


def _add_conversation(record: RequestRecord, conv: Conversation | None) -> RequestRecord:
    """--multi-turn: which conversation a record belongs to, and its turn (absent without conversations)."""
    if conv is not None:
        record["conversation_id"], record["turn"] = conv.conversation_id, conv.turn
    return record


def _answer(record: RequestRecord, req: InFlight) -> AnswerLine | None:
    """--check-output: a successful request's answer for answers.jsonl, its digest set in the record; hashed
    once here, never per chunk. A failed request's answer is not kept (it is never compared)."""
    if req.outcome.status != "ok":
        return None
    state = req.state
    text = state.answer_text if not state.ids else ""
    digest = answer_digest(state.ids, text)
    record["answer_digest"] = digest
    line = AnswerLine(schema=SCHEMA_VERSION, request_id=req.request_id, target_c=req.target_c, step=req.step,
                      prompt_seq=req.seq, kind="ids" if state.ids else "text", digest=digest)
    if state.ids:
        line["ids"] = list(state.ids)
    else:
        line["text"] = text
    if req.conversation is not None:
        line["turn"] = req.conversation.turn
    return line


def entry_name(path: str, target_c: int | None, target_rate: float | None = None) -> str:
    """Locust stats entry: per ladder step, space-padded so rows sort by C (or by rate, in open loop)."""
    if target_rate:
        return f"{path} rate={target_rate:>6.2f}/s"
    return path if target_c is None else f"{path} C={target_c:>3}"


class LLMUser(HttpUser):
    """Closed loop: waits 0 between requests, so the number of users is the concurrency."""

    abstract = True
    wait_time = constant(0)
    run_context_attr = "specbench_run"

    def on_start(self) -> None:
        ctx = self._ctx()
        self.user_id = ctx.next_user_id() if ctx is not None else "0:0"
        # the run's CA bundle (contract.tls), unless a locustfile turned checking off on Locust's own client
        verify = tls.verify() if self.client.verify is True else self.client.verify
        # kernel receive stamps wherever given: the chunk times with --receive-clock kernel, the lag measure either way
        self._http = StreamClient(endpoint(self.client.base_url, verify), kernel_stamps=True)
        self._kernel_clock = ctx is not None and ctx.settings.receive_clock == "kernel"
        self._ready: float | None = None  # perf_counter when this user became ready to send (send_lag_ms)
        self._ended: str | None = None  # this user's last sent request, ended but perhaps not yet booked
        self._only_task = len(set(self.tasks)) == 1  # no other task of a subclass to share the user's turns
        self._refusals = RefusalBackoff()

    def on_stop(self) -> None:
        self._http.close()

    def _ctx(self) -> RunContext | None:
        return getattr(self.environment, self.run_context_attr, None)

    @task
    def stream_completion(self) -> None:
        """Requests, one after another, for as long as ``_straight_on`` allows (at least one)."""
        while self._one_request():
            pass

    def _one_request(self) -> bool:
        """One request, its record and books; True when the user may send its next request at once."""
        ctx = self._ctx()
        if ctx is None or ctx.live.draining:  # no run context (error already reported), or ladder over
            self._ready = None
            gevent.sleep(0.2)
            return False
        if self._ready is None:  # its first task: ready now
            self._ready = time.perf_counter()
        go, scheduled_s, row = self._wait_turn(ctx)
        if not go:
            return False
        name, body, headers, req = self._prepare(ctx, scheduled_s, row)
        try:
            self._stream(ctx, name, body, headers, req)
        except (gevent.GreenletExit, KeyboardInterrupt):  # stopped mid-stream by us: never a server failure
            req.outcome.fail("cancelled", "stopped by the load generator before the end (step down or stop)")
            if not req.sent:
                req.start_s = ctx.now()  # stopped before it was sent: it starts (unannounced) and ends here
                req.t0 = time.perf_counter()
            req.end = time.perf_counter()
            raise
        except Exception as exc:  # a fault of ours: recorded, then left to Locust's exception report
            req.outcome.fail("truncated", "load generator error", f"{type(exc).__name__}: {exc}")
            req.end = time.perf_counter()
            raise
        finally:
            self._finish(ctx, req, name)
        if self._back_off(req):
            self._ready = time.perf_counter()  # a deliberate wait is not lag
            return False
        return self._straight_on(ctx)

    def _straight_on(self, ctx: RunContext) -> bool:
        """Closed loop with nothing else to do: the next request goes out from inside this task.

        Why: Locust's task loop yields to the event loop between two tasks (``gevent.sleep(0)`` for a zero
        wait), so when one poll woke many users at their streams' ends, every one of them read its end before
        any of them sent, and the response heads of the first sends were read in between: all of it the send
        lag of the users behind. From here a user reads its end and sends in one go, and the heads wait for
        the next poll. Locust's loop takes over again (its stop and wait semantics unchanged) when the user is
        being stopped, has a wait or another task, the run is open loop, or the ladder is over; and when the
        end-of-request work falls behind (more queued than two per user: a saturated load process), so its
        greenlet gets its turns between the users' as it did under Locust's loop."""
        runner = self.environment.runner
        behind = len(AFTER_SENDS) > 2 * max(1, runner.user_count if runner is not None else 1)
        return (self._state == LOCUST_STATE_RUNNING and ctx.schedule is None and not ctx.live.draining
                and self._only_task and not self.wait_time() and not behind)

    def _wait_turn(self, ctx: RunContext) -> tuple[bool, float | None, int | None]:
        """(send now?, when it was due in the master's clock, with --trace the row to send): closed loop sends at
        once; open loop at its schedule's next due time (the rates' arrivals or the trace's next row)."""
        if ctx.schedule is None:
            return True, None, None
        claim = wait_for_turn(ctx, self.environment.runner)
        if claim is None or claim.due_s is None:
            return False, None, None
        return True, claim.due_s + ctx.clock.offset_s, claim.row  # in the master's clock, as start_s is

    def _prepare(self, ctx: RunContext, scheduled_s: float | None, row: int | None
                 ) -> tuple[str, dict[str, Any], dict[str, str], InFlight]:
        """The next request: its prompt (the conversation's next turn, the trace's ``row``, or the next of the
        shared order), body, headers and Locust entry name, and its in-flight state."""
        step, target_c, target_rate = ctx.live.index, ctx.live.target_c, ctx.live.target_rate
        conv = self._turn(ctx, step, row)
        seq, prompt = conv.seq, conv.prompt
        sampling = ctx.sampling
        if ctx.workload is not None:  # --output-len: this request's own
            sampling = dataclasses.replace(sampling, max_tokens=ctx.workload.max_tokens(seq, conv.turn))
        if ctx.replay is not None and step is not None:  # --trace: the row's output length
            sampling = dataclasses.replace(sampling, max_tokens=ctx.replay.row(step, seq).output_tokens)
        request_id = ctx.next_request_id()
        body = ctx.dialect.body(prompt, sampling, model=ctx.model, server_kind=ctx.server.kind, rid=request_id)
        headers = {"Accept": "text/event-stream", "Accept-Encoding": "identity",
                   **auth_headers(ctx.settings.api_key())}
        name = entry_name(ctx.dialect.path, target_c, target_rate)
        conversing = ctx.settings.multi_turn > 1  # only then is the answer's text kept (to resend it)
        checking = ctx.settings.checks_output  # the answer's identity is kept: its ids, else its text
        # Until the request goes on the wire (``sent``), its times are those of a request never sent.
        req = InFlight(request_id, seq, prompt, step, target_c, ctx.now(), scheduled_s, time.perf_counter(),
                       StreamState(ctx.api, keep_text=conversing, keep_ids=checking))
        req.target_rate = target_rate if scheduled_s is not None else None
        req.max_tokens = sampling.max_tokens
        req.conversation = conv if conversing else None
        req.end = req.t0
        return name, body, headers, req

    def _finish(self, ctx: RunContext, req: InFlight, name: str) -> None:
        """End of a request: what the next send needs now (when this user became ready, the conversation's next
        turn); the rest (``_book``) after the sends of the users ready with it (``locustfiles.deferred``)."""
        self._ready = req.ready or req.end  # the end of this stream: all that follows until the next send is lag
        if req.outcome.status != "refused":
            self._refusals.reset()
        elif ctx.schedule is None:  # closed loop waits; open loop's next send is its schedule's next arrival
            req.backoff_s = self._refusals.next_wait(req.outcome.retry_after)
        self._ended = req.request_id if req.sent else None
        self._conversation = self._continued(ctx, req)
        AFTER_SENDS.add(functools.partial(self._book, ctx, req, name))

    def _book(self, ctx: RunContext, req: InFlight, name: str) -> None:
        """The request in Locust's statistics, its record (and answer) on their way to disk and the books."""
        record = self._record(ctx, req)
        if req.started is not None:  # a request that ran its course (not stopped mid-stream), as HttpSession
            ok, outcome = record["status"] == "ok", req.outcome  # reports a caught response
            # The server's own words reach Locust's failure table on the terminal: one line, escapes visible (#70).
            failure = None if ok else CatchResponseError(
                plain(f"{outcome.status}: {outcome.reason or outcome.error}", None))  # already clipped: cut nothing
            self.environment.events.request.fire(
                request_type="POST", name=name, response_time=record["e2e_s"] * 1000.0,
                response_length=record["output_tokens"] if ok else 0, response=None, context=self.context(),
                start_time=req.started, url=ctx.dialect.path, exception=failure)
        answer = _answer(record, req) if ctx.settings.checks_output else None
        if self.environment.runner is None:
            ctx.write_record(record, answer)
        else:  # the master (or the local runner) writes it
            self.environment.runner.send_message(RECORD_MESSAGE, ctx.envelope(record, answer))
        if record["ttft_s"] is not None:
            # Logged on the entry directly: its own row, without inflating the Aggregated row.
            self.environment.stats.get(name, "TTFT").log(record["ttft_s"] * 1000.0, 0)

    def _turn(self, ctx: RunContext, step: int | None, row: int | None) -> Conversation:
        """This request: the next turn of the user's conversation, or a new one (every request without
        --multi-turn) on the trace's ``row`` or the next prompt of the shared order, met to its drawn lengths
        and shared prefix."""
        conv: Conversation | None = getattr(self, "_conversation", None)
        if conv is not None and conv.belongs(ctx, step):
            return conv
        if ctx.replay is not None and step is not None and row is not None:  # --trace: the row taken
            prompt = ctx.replay.prompt(step, row)
            return Conversation(ctx, step, row, 1, prompt.id, prompt)
        seq = ctx.next_seq(step)  # request N of a level gets prompt N (locustfiles.sequencer)
        prompt = ctx.prompts.at(seq)
        if ctx.workload is not None:  # --input-len / --shared-prefix: this request's own
            prompt = ctx.workload.prompt(seq, prompt, ctx.prompts)
        if ctx.settings.multi_turn > 1:
            return Conversation.start(ctx, step, seq, prompt)
        return Conversation(ctx, step, seq, 1, prompt.id, prompt)

    @staticmethod
    def _continued(ctx: RunContext, req: InFlight) -> Conversation | None:
        """The conversation's next turn after an answered turn; None after its last turn or a failure."""
        conv = req.conversation
        if conv is None or req.outcome.status != "ok" or conv.turn >= ctx.settings.multi_turn:
            return None
        return conv.next_turn(req.state.answer_text, ctx.settings.seed)

    def _sent(self, ctx: RunContext, req: InFlight) -> None:
        """The request's bytes are about to be written: its start, on both clocks, announced to the books.

        One moment for both clocks: the record's start_s (wall, in the master's clock, as announced to the
        in-flight books, whose window edges are these very start_s) and t0 (every offset of the record). Nothing
        between here and the write yields, so no other user's work lands inside the request's times; what came
        before (preparing the body, a connect, other users' end-of-request work) is the send lag, from the
        moment the user was ready (its previous stream's end, or its first task; open loop: the schedule's time).
        """
        req.t0 = req.end = time.perf_counter()
        req.start_s = ctx.now()
        req.sent = True
        if req.scheduled_s is not None:
            req.send_lag_ms = round(max(0.0, req.start_s - req.scheduled_s) * 1000.0, 3)
        elif self._ready is not None:
            req.send_lag_ms = round(max(0.0, req.t0 - self._ready) * 1000.0, 3)
        # "after": the request this user ended before this one, whose record may still be queued (deferred):
        # the live in-flight count leaves it out from now, the books keep it until its record arrives.
        self._send(START_MESSAGE, {"request_id": req.request_id, "start_s": req.start_s, "step": req.step,
                                   "after": self._ended})
        self._ended = None

    def _back_off(self, req: InFlight) -> bool:
        """After a connection error wait 0.1 s, doubling to 2 s while they last: a down server is not hammered;
        after a refusal (closed loop) the wait ``_finish`` set. True when it waited."""
        status = req.outcome.status
        if status == "refused" and req.backoff_s > 0:
            gevent.sleep(req.backoff_s)
            return True
        if status != "connect_error":
            self._backoff_s = 0.0
            return False
        self._backoff_s = min(BACKOFF_MAX_S, max(BACKOFF_FIRST_S, getattr(self, "_backoff_s", 0.0) * 2))
        gevent.sleep(self._backoff_s)
        return True

    def _send(self, kind: str, data: dict[str, Any]) -> None:
        runner = self.environment.runner
        if runner is not None:
            runner.send_message(kind, data)

    def _stream(self, ctx: RunContext, name: str, body: dict[str, Any], headers: dict[str, str],
                req: InFlight) -> None:
        """Send, read the stream to its end, report to Locust; sets ``req.end`` to when it ended."""
        s, state, outcome = ctx.settings, req.state, req.outcome
        started = time.time()
        resp = None
        try:
            resp = self._http.post(ctx.dialect.path, headers, orjson.dumps(body), (s.connect_timeout, s.read_timeout),
                                   lambda: self._sent(ctx, req), s.request_timeout)
            outcome.http_status = resp.status_code
            if self._http.written is not None:
                req.write_ms = round((self._http.written - req.t0) * 1000.0, 3)
            if is_refusal(resp.status_code):  # declined at once (a full queue, a rate limit): not a failure
                outcome.fail("refused", f"HTTP {resp.status_code}", _page(resp, ERROR_PAGE_LIMIT))
                outcome.retry_after = retry_after_s(resp.headers.get("retry-after"))
                end = time.perf_counter()
            elif resp.status_code >= 400:
                outcome.fail("http_error", f"HTTP {resp.status_code}", _page(resp, ERROR_PAGE_LIMIT))
                end = time.perf_counter()
            elif _not_a_stream(resp.headers.get("content-type", "")):
                outcome.fail("not_streaming", f"HTTP {resp.status_code} {resp.headers.get('content-type')} "
                             "instead of an event stream", _page(resp, ERROR_PAGE_LIMIT))
                end = time.perf_counter()
            else:
                end, req.ready, req.recv_lag_ms, req.chunk_clock = self._read_stream(
                    resp, state, outcome, req.t0, s.request_timeout, req.max_tokens, self._kernel_clock)
                if req.chunk_clock is not None and req.chunk_clock != "kernel":
                    STAMPS.note(req.chunk_clock)
        except SendFailed as exc:  # nothing came back: no connection, or no response head in time
            outcome.fail(exc.status, exc.reason, exc.detail)
            end = time.perf_counter()
        except OSError as exc:  # an answer that was not HTTP/1.1 as the client reads it (transport.BrokenStream)
            outcome.fail("truncated", "response broken before its body", str(exc))
            end = time.perf_counter()
        finally:
            if resp is not None:
                resp.close()  # a body left unread (an error page, a stop mid-stream): the connection goes with it
        req.end = end
        req.started = started  # reported to Locust's statistics after the sends (``_book``)

    @staticmethod
    def _read_stream(resp: Response, state: StreamState, outcome: Outcome, t0: float, total_timeout: float,
                     max_tokens: int | None = None, kernel_clock: bool = False
                     ) -> tuple[float, float, float | None, str | None]:
        """Read the stream to its end: (when it ended, when the user became ready: the event loop's poll that
        woke it for the stream's last bytes, or their kernel stamp where earlier, so other users' work queued
        ahead of it counts as send lag; the
        receive lag, ``EventReader.recv_lag_max_ms``; with ``kernel_clock``, the clock that dated its chunks).
        ``kernel_clock``: chunk times are the kernel's stamps where a read carried one."""
        deadline = t0 + total_timeout
        clean_eof = False
        events = EventReader(resp.read1, stamp=lambda: resp.stamp, kernel=kernel_clock, not_before=t0)
        try:
            for t, payload in events:
                state.feed(t, payload)
                if t > deadline:
                    outcome.fail("timeout", f"request exceeded {total_timeout:g} s")
                    break
            else:
                clean_eof = True
        except DeadlinePassed as exc:  # trickling bytes that are no event (SSE comments) or too slow
            outcome.fail("timeout", f"request exceeded {total_timeout:g} s", str(exc))
        except TimeoutError as exc:
            outcome.fail("timeout", "stream silent longer than the read timeout", str(exc))
        except OSError as exc:  # BrokenStream, a reset
            outcome.fail("truncated", "connection broken mid-stream", str(exc))
        end = events.last if clean_eof else time.perf_counter()
        classify_stream_end(state, outcome, max_tokens)
        # Ready from the poll that woke it, or on the kernel's clock from its last bytes' arrival (earlier by the
        # loop's lateness, which held the next send back just the same)
        ready = min(events.woke or end, end) if clean_eof else end
        lag = events.recv_lag_max_ms
        return end, ready, None if lag is None else round(lag, 3), events.chunk_clock

    def _record(self, ctx: RunContext, req: InFlight) -> RequestRecord:
        state, outcome, t0 = req.state, req.outcome, req.t0
        counts = state.resolve_tokens()
        chunk_ms = [round((t - t0) * 1000.0, 3) for t in state.chunk_times]
        e2e_s = req.end - t0
        record = RequestRecord(
            schema=SCHEMA_VERSION, request_id=req.request_id, server_request_id=state.server_request_id,
            label=ctx.settings.label, api=ctx.api, prompt_id=req.prompt.id,
            category=req.prompt.category, prompt_seq=req.seq, step=req.step, target_c=req.target_c,
            phase=ctx.live.phase_for(req.step, req.start_s, req.start_s + e2e_s),
            worker=ctx.worker, user=self.user_id, start_s=req.start_s,
            ttft_s=(state.chunk_times[0] - t0) if state.chunk_times else None, e2e_s=e2e_s,
            chunk_ms=chunk_ms, chunk_tokens=counts.chunk_tokens,
            chunk_tokens_source=counts.chunk_tokens_source,
            output_tokens=counts.output_tokens,
            output_tokens_source=counts.output_tokens_source,
            prompt_tokens=state.prompt_tokens, cached_tokens=state.cached_tokens, spec=state.spec,
            status=outcome.status, http_status=outcome.http_status,
            error=outcome.error, finish_reason=state.finish_reason, max_tokens=req.max_tokens,
            target_rate=req.target_rate,
            scheduled_s=req.scheduled_s,
            send_lag_ms=req.send_lag_ms,
        )
        if req.recv_lag_ms is not None:
            record["recv_lag_ms"] = req.recv_lag_ms
        if req.write_ms is not None:
            record["write_ms"] = req.write_ms
        if req.chunk_clock is not None and req.chunk_clock != "kernel" and chunk_ms:  # not all stamped, as asked
            record["receive_clock"] = req.chunk_clock
        if outcome.status == "refused":
            record["backoff_s"] = req.backoff_s
            if outcome.retry_after is not None:
                record["retry_after_s"] = outcome.retry_after
        return _add_conversation(record, req.conversation)

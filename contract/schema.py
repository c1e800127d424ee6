"""The run-directory contract between the load side and the analysis side.

A run directory holds three files, all written by the load side as things happen:

* ``records.jsonl``: one JSON object per finished request (``RequestRecord``), flushed as it finishes;
* ``steps.jsonl``: one JSON object per ladder step (``StepRecord``), written when the step ends;
* ``meta.json``: settings, prompt set and server identity (``RunMeta``), written at start, updated at end;
* ``server_metrics.jsonl`` (optional): the server's ``/metrics`` sampled during the run
  (``contract.server_metrics``, its own schema version);
* ``gpu_metrics.jsonl`` (optional, ``--gpu-metrics``): DCGM exporters' GPU telemetry sampled during the run
  (``contract.gpu_metrics``, its own schema version);
* ``answers.jsonl`` (optional, ``--check-output``): each successful request's whole answer (``AnswerLine``),
  kept apart so records stay small; the record carries only its digest.

This module is the single definition of those shapes; the files' names, where they lie and how a run
directory is read, appended to and merged are ``contract.rundir``'s (``RunDir``, ``read_run``). The load side
imports it to build lines; the analysis side imports it to read them. It imports nothing from Locust, so a run
killed half-way can be read anywhere. Field meanings are documented in docs/reference/records.md; bump
``SCHEMA_VERSION`` on any incompatible change and keep ``read_*`` able to read every older version.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, NotRequired, TypedDict, cast

from specbench.contract.apis import APIS, Api  # noqa: F401 - re-exported: the contract names its routes
from specbench.contract.columnar import read_columns
from specbench.contract.compact import compact_record
from specbench.contract.gpu_metrics import GpuMetricsSample
from specbench.contract.limits import LIMITS, LimitError, check_limit
from specbench.contract.runformat import RunFormatError  # schema.py raises it too; readers of a run catch it from here
from specbench.contract.server_metrics import ServerMetricsSample
from specbench.contract.settings import SuiteSettings

# 1: the first; 2: meta.json holds each setting once, in "settings" (1 also wrote label, max_tokens,
# ignore_eos and temperature at its top level). Records, steps and answers did not change shape in 2.
SCHEMA_VERSION = 2

Status = Literal["ok", "http_error", "stream_error", "timeout", "truncated", "connect_error", "not_streaming",
                 "bad_count", "cancelled", "refused"]
STATUSES: tuple[str, ...] = ("ok", "http_error", "stream_error", "timeout", "truncated", "connect_error",
                             "not_streaming", "bad_count", "cancelled", "refused")
# Ended by the suite itself (a user leaving a step of a descending ladder): never a server failure.
NOT_SERVER_FAILURES: tuple[str, ...] = ("cancelled",)
# Work the server declined at once (HTTP 429 or 503: a full queue, a rate limit, a server not yet ready): not a
# failure of work it took on, so counted apart from failures and error rates, as the share of offered work refused.
REFUSED = "refused"
NOT_FAILURES: tuple[str, ...] = (*NOT_SERVER_FAILURES, REFUSED)
Phase = Literal["warmup", "measured", "transition"]
# Where output_tokens came from: a server-reported count, or (last resort) counted chunks.
TokenSource = Literal["meta_info", "usage", "timings", "tokens_predicted", "chunks"]
# How the per-chunk cumulative counts were obtained.
ChunkTokenSource = Literal["server", "one_per_chunk", "interpolated", "chunks"]


class SpecFields(TypedDict, total=False):
    """Per-request speculative-decoding figures as the server reported them (normalised names)."""

    verify_ct: int | None  # target verify passes (SGLang spec_verify_ct); None where not reported
    accepted_drafts: int | None  # accepted draft tokens, bonus token excluded
    proposed_drafts: int | None  # proposed draft tokens
    accept_length: float | None  # tokens per verify pass, bonus included (SGLang's definition)
    accept_rate: float | None  # accepted / proposed
    source: str  # "meta_info", "sglext", "vllm_metrics", "timings"


class RequestRecord(TypedDict):
    """One line of records.jsonl: one streamed request, successful or not."""

    schema: int
    request_id: str  # suite-side id, unique within the run ("<worker>-<n>")
    server_request_id: str | None  # id the server gave the response (meta_info.id, chunk id)
    label: str  # run label, e.g. "baseline", "eagle3"
    api: Api
    prompt_id: str
    category: str
    prompt_seq: int  # position of the prompt in the prompt order: request N of a level has N
    step: int | None  # ladder step index at request start; None outside a ladder
    target_c: int | None  # ladder target concurrency at request start
    phase: Phase | None  # as seen by the client when the request finished
    worker: int  # Locust worker index (0 when local)
    user: str  # the Locust user that sent it ("<worker>:<n>"), so warm-up can wait for every user
    start_s: float  # wall clock (epoch seconds) when the request was sent
    ttft_s: float | None  # seconds from send to the first chunk carrying output tokens
    e2e_s: float  # seconds from send to the end of the stream (or the failure)
    chunk_ms: Sequence[float]  # arrival offsets (ms from start_s) of chunks that carried output tokens
    chunk_tokens: Sequence[int]  # cumulative output tokens after each chunk in chunk_ms
    chunk_tokens_source: ChunkTokenSource
    output_tokens: int
    output_tokens_source: TokenSource
    prompt_tokens: int | None
    cached_tokens: int | None
    spec: SpecFields | None
    status: Status
    http_status: int | None
    error: str | None  # short error text; never a secret
    finish_reason: str | None  # "length", "stop", "abort", ... as the server said
    max_tokens: int
    target_rate: NotRequired[float | None]  # open loop: the step's request rate (requests/s); absent/None: closed
    scheduled_s: NotRequired[float | None]  # open loop: wall clock the arrival schedule set for sending it
    # ms from the user being ready (its previous stream's end, or its first task; open loop: scheduled_s) to the
    # send (start_s); null when the request never went on the wire; absent in records made before it existed
    send_lag_ms: NotRequired[float | None]
    # ms: the most a read of the stream was seen by the load process's event loop after the kernel received its
    # bytes (the receive lag; with receive_clock "kernel" in meta.json the chunk times are the kernel's, so it is
    # not in them); absent where no read carried a kernel stamp (TLS, not Linux, records made before it existed)
    recv_lag_ms: NotRequired[float]
    # meta.json's settings asked for the kernel's clock, and not every chunk carried a kernel stamp (the kernel
    # refused the option, or gave none): "user" (no chunk did: they are the load process's times) or "mixed";
    # absent where every chunk was dated by a stamp (or the run asked for the user clock)
    receive_clock: NotRequired[str]
    # ms from start_s to the kernel holding every byte of the request (the write's return): microseconds unless
    # the request outgrew the socket's buffer and waited for the server to read it, or its greenlet waited for
    # its event loop; absent where the request was never all written, and in records made before it existed
    write_ms: NotRequired[float]
    # --multi-turn (absent otherwise: every request on its own): the conversation (unique in the run, "s<step>-
    # <prompt_seq of turn 1>") and the turn, 1..N; later turns share turn 1's prompt_seq, prompt_id "<id>/t<turn>"
    conversation_id: NotRequired[str]
    turn: NotRequired[int]
    # --check-output (temperature 0, ok requests only): "<kind>:<hex>", the blake2b-128 digest of the answer's
    # token ids ("ids") or, where the API gives none, of its text ("text"); the answer itself is in answers.jsonl
    answer_digest: NotRequired[str]
    # status "refused" only: seconds the user waited before its next send (closed loop: the server's Retry-After
    # where it sent one, else a bounded, jittered back-off; open loop: 0, the schedule sends the next arrival);
    # ``retry_after_s``: the Retry-After the server sent, in seconds (absent: none)
    backoff_s: NotRequired[float]
    retry_after_s: NotRequired[float]


class AnswerLine(TypedDict):
    """One line of answers.jsonl: a successful request's whole answer, keyed like its record."""

    schema: int
    request_id: str
    target_c: int | None
    step: int | None
    prompt_seq: int
    turn: NotRequired[int]
    kind: Literal["ids", "text"]
    ids: NotRequired[list[int]]  # kind "ids": the output token ids as the server streamed them
    text: NotRequired[str]  # kind "text": the answer text exactly as streamed
    digest: str  # the record's answer_digest


def answer_digest(ids: Sequence[int] | None, text: str) -> str:
    """An answer's identity: its token ids when the server gave them, else its text (``kind:hex``).

    Computed once per request, at its end: the read loop only keeps what it already parsed."""
    if ids:
        return "ids:" + hashlib.blake2b(",".join(map(str, ids)).encode(), digest_size=16).hexdigest()
    return "text:" + hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).hexdigest()


class StepRecord(TypedDict, total=False):
    """One line of steps.jsonl: one ladder step, written when it ends."""

    schema: int
    index: int
    target_c: int
    start_s: float  # wall clock when the step's users were started
    steady_start_s: float | None  # end of warm-up: start of the measured window (None: never reached)
    end_s: float  # end of the measured window
    min_requests: int  # requests the window had to measure
    requests_measured: int  # requests that started and finished inside the window
    achieved_c: float | None  # time-averaged requests in flight in the window (Little's law)
    throughput_tok_s: float | None  # output tokens that arrived in the window / window length
    ended_by: str  # "target", "max_time", "ci", "stopped", "refused" (every request refused, --min-step-time on)
    flags: list[str]  # e.g. "low_concurrency", "too_few_requests", "no_window", "worker_lost", "client_bound",
    # "client_lag", "client_read_lag", "client_paused", "server_unreachable", "concurrency_above_target",
    # "dropped_requests", "low_rate"
    requests_total: int  # requests sent in this step that ended, "cancelled" and "refused" ones excluded
    requests_failed: int  # of those, the ones whose status is not "ok" (the step's error rate)
    requests_refused: int  # requests of this step the server refused at once (429/503), apart from the two above
    users_lost: int  # only when a worker was lost: users it ran (re-spawned on the others)
    lost_requests: int  # only when a worker was lost: this step's requests it had in flight, never recorded
    load_cpu: dict[str, float]  # percent of one core per load process over the step ("local"/"master", "worker N")
    paused_s: float  # only when the load process stood still during the step: seconds it missed (client_paused)
    read_lag_p90_ms: dict[str, float]  # per load process: p90 of how late its event loop served ready sockets
    target_rate: float | None  # open loop: requests/s asked for (target_c is then 0); absent/None: closed loop
    achieved_rate: float | None  # open loop: requests sent in the window / window length
    dropped: int  # open loop: requests due while --max-in-flight were busy (never sent)
    arrival_dispersion: float  # open loop: the send count's variance over its mean the rate was judged with
    # the clock that dated the chunk times: "kernel" (receive stamps: a late read is not in them), "user" (the load
    # process's: asked, TLS, or the kernel refused or gave no stamps) or "mixed" (some of each: judged as "user")
    receive_clock: str
    refined: bool  # true: a level added after the ladder to pin a crossover (specbench compare); absent: a ladder level
    lifetime_p50_s: float  # the median lifetime (send to last byte) of the step's ok requests: the budget's pilot


# meta.json version 1 also wrote these settings beside ``settings`` (from version 2 they are there only).
_V1_TOP_LEVEL_SETTINGS = ("label", "max_tokens", "ignore_eos", "temperature")


@dataclass
class RunMeta:
    """meta.json: what was run, against what, with which settings (secrets already redacted).

    Each fact once: the options in ``settings``, typed (None when the run directory has no meta.json); beside
    them only what the run itself found out or did."""

    schema: int = SCHEMA_VERSION
    suite_version: str = ""
    command_line: list[str] = field(default_factory=list)
    settings: SuiteSettings | None = None
    api: str = ""  # the API the run spoke: settings.api resolved ("auto" asks the server)
    ladder: list[int] = field(default_factory=list)  # concurrencies walked: --ladder, [users] in users mode, [] open
    prompts: dict[str, Any] = field(default_factory=dict)  # name, sha256, count, mode, seed
    server: dict[str, Any] = field(default_factory=dict)  # url, kind, model, speculative, max_running_requests
    started_s: float | None = None
    ended_s: float | None = None
    partial: bool = True  # true until the run ended on its own
    # chunk times: "kernel" (receive stamps), "user" (event loop), "mixed" (steps on both, or a step of both: the
    # run's end says so); "": before it existed
    receive_clock: str = ""

    def to_json(self) -> dict[str, Any]:
        return {**self.__dict__, "settings": self.settings.public() if self.settings is not None else {}}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> RunMeta:
        """Any version: unknown keys are ignored, a version 1 file's top-level settings move into ``settings``."""
        known = {k: v for k, v in data.items() if k in cls.__dataclass_fields__ and k != "settings"}
        raw = data.get("settings")
        settings = dict(raw) if isinstance(raw, dict) else {}
        if not isinstance(data.get("schema"), int) or data["schema"] < 2:
            for key in _V1_TOP_LEVEL_SETTINGS:
                if key in data:
                    settings.setdefault(key, data[key])
        return cls(**known, settings=SuiteSettings.from_public(settings))


@dataclass
class RunData:
    """Everything read from one run directory."""

    path: Path
    meta: RunMeta
    records: list[RequestRecord]
    steps: list[StepRecord]
    skipped_lines: int = 0  # a torn last line of a killed run (0 or 1)
    server_samples: list[ServerMetricsSample] = field(default_factory=list)  # server_metrics.jsonl, time order
    answers: list[AnswerLine] = field(default_factory=list)  # answers.jsonl (--check-output), else empty
    gpu_samples: list[GpuMetricsSample] = field(default_factory=list)  # gpu_metrics.jsonl (--gpu-metrics), time order
    # records kept out of every figure because they cannot be true, by kind (contract.evidence.screen_records)
    left_out: dict[str, int] = field(default_factory=dict)


def iter_jsonl(path: Path, *, missing_ok: bool = False) -> Iterator[tuple[int, Any]]:
    """Yield (line number, parsed value) for each non-blank line of a JSONL file, tolerant of torn lines.

    A line that does not parse (bytes that are not UTF-8 JSON, e.g. the last line of a killed run) yields
    None instead of raising, so each reader decides whether that is a torn tail or corruption; the value is
    whatever the line holds (callers check it is an object). An unreadable file is a RunFormatError, except a
    missing one with ``missing_ok`` (an optional file that was never written): it yields nothing."""
    try:
        with path.open("rb") as fh:
            for lineno, raw in enumerate(fh, start=1):
                if not raw.strip():
                    continue
                try:
                    obj = json.loads(raw.decode("utf-8"))
                except (UnicodeDecodeError, ValueError, RecursionError):
                    yield lineno, None
                    continue
                yield lineno, obj
    except OSError as exc:
        if missing_ok and isinstance(exc, FileNotFoundError):
            return
        raise RunFormatError(f"{path}: cannot read ({exc.strerror or exc})") from None


def _check_version(path: Path, lineno: int | None, obj: dict[str, Any]) -> None:
    where = f"{path.name} line {lineno}" if lineno else path.name
    if not isinstance(obj, dict):
        raise RunFormatError(f"{path}: {where}: expected a JSON object")
    version = obj.get("schema")
    if not isinstance(version, int):
        raise RunFormatError(f"{path}: {where}: missing integer 'schema' version field")
    if version > SCHEMA_VERSION:
        raise RunFormatError(
            f"{path}: {where}: schema version {version} is newer than this suite reads ({SCHEMA_VERSION})"
        )


_REQUIRED_RECORD_KEYS = ("request_id", "start_s", "e2e_s", "status", "output_tokens", "chunk_ms", "chunk_tokens")


def read_records(path: Path) -> tuple[list[RequestRecord], int]:
    """Read records.jsonl; a torn last line (killed run) is skipped and counted; a bad line before other
    records, or a malformed record, is corruption and an error. Records come back compacted
    (``contract.compact``): read-only mappings, not dicts; ``chunk_ms`` and ``chunk_tokens`` are sequences
    (``array``), not lists; or, where Arrow's reader reads the file exactly (``contract.columnar``), views of its
    columns, ``chunk_ms`` and ``chunk_tokens`` then ``memoryview``s."""
    columns = read_columns(path, SCHEMA_VERSION, STATUSES)
    if columns is not None:
        return columns, 0
    records: list[RequestRecord] = []
    shared: dict[Any, Any] = {}  # strings and record shapes the records share (compact_record)
    torn = 0
    pending_bad: int | None = None  # a line that did not parse: torn only if nothing follows it
    for lineno, obj in iter_jsonl(path):
        if pending_bad is not None:
            raise RunFormatError(f"{path}: line {pending_bad}: corrupt (not JSON) with records after it; only a "
                                 "last line can be torn by a killed run, so the file was damaged otherwise")
        if obj is None:
            pending_bad = lineno
            torn = 1
            continue
        _check_record_line(path, lineno, obj)
        records.append(compact_record(obj, shared))  # type: ignore[arg-type]  # checked: a record's keys
    return records, torn


def _check_record_line(path: Path, lineno: int, obj: Any) -> None:
    _check_version(path, lineno, obj)
    missing = [k for k in _REQUIRED_RECORD_KEYS if k not in obj]
    if missing:
        raise RunFormatError(f"{path}: line {lineno}: record lacks {', '.join(missing)}")
    if not isinstance(obj["status"], str) or obj["status"] not in STATUSES:
        raise RunFormatError(f"{path}: line {lineno}: status {obj['status']!r} is not one of {STATUSES}")
    if not isinstance(obj["chunk_ms"], list) or not isinstance(obj["chunk_tokens"], list):
        raise RunFormatError(f"{path}: line {lineno}: chunk_ms and chunk_tokens should be lists")
    if len(obj["chunk_ms"]) != len(obj["chunk_tokens"]):
        raise RunFormatError(f"{path}: line {lineno}: chunk_ms and chunk_tokens differ in length")


def read_steps(path: Path) -> list[StepRecord]:
    """Read steps.jsonl; when a step index appears twice the later line wins."""
    by_index: dict[int, StepRecord] = {}
    for lineno, obj in iter_jsonl(path):
        if obj is None:
            continue
        _check_version(path, lineno, obj)
        if not isinstance(obj.get("index"), int) or not isinstance(obj.get("target_c"), int):
            raise RunFormatError(f"{path}: line {lineno}: step lacks integer 'index' and 'target_c'")
        by_index[obj["index"]] = obj
    return [by_index[i] for i in sorted(by_index)]


def read_answers(path: Path) -> tuple[list[AnswerLine], int]:
    """Read answers.jsonl: lines without a request id and a digest are skipped and counted (a torn last line)."""
    answers: list[AnswerLine] = []
    bad = 0
    for lineno, obj in iter_jsonl(path):
        if obj is None or not isinstance(obj, dict) or not isinstance(obj.get("request_id"), str) \
                or not isinstance(obj.get("digest"), str):
            bad += 1
            continue
        _check_version(path, lineno, obj)
        answers.append(cast(AnswerLine, obj))  # its two keys checked above
    return answers, bad


def read_meta(path: Path) -> RunMeta:
    try:
        data = json.loads(path.read_bytes().decode("utf-8"))
    except json.JSONDecodeError as exc:
        raise RunFormatError(f"{path}: not valid JSON ({exc.msg} at line {exc.lineno})") from None
    except (UnicodeDecodeError, ValueError, RecursionError):
        raise RunFormatError(f"{path}: not UTF-8 JSON") from None
    except OSError as exc:
        raise RunFormatError(f"{path}: cannot read ({exc.strerror or exc})") from None
    _check_version(path, None, data)
    if not isinstance(data.get("settings", {}), dict):
        raise RunFormatError(f"{path}: 'settings' should be an object")
    _check_meta_numbers(path, data)
    return RunMeta.from_json(data)


def _check_meta_numbers(path: Path, data: Any) -> None:
    """Refuse a meta.json holding a number no run writes (#70): a NaN or infinity anywhere (JSON readers take
    ``NaN`` and ``Infinity``, and a run never writes them), or a setting outside its limits (``contract.limits``).
    Read as it is, ``from_public`` would silently put the default in its place, and the report's header would
    state a setting the run never had."""
    stack: list[tuple[str, Any]] = [("", data)]
    while stack:
        key, value = stack.pop()
        if isinstance(value, dict):
            stack.extend((f"{key}.{k}" if key else str(k), v) for k, v in value.items())
        elif isinstance(value, list):
            stack.extend((f"{key}[{i}]", v) for i, v in enumerate(value))
        elif isinstance(value, float) and not math.isfinite(value):
            raise RunFormatError(f"{path}: key {key!r} should be a finite number, got {value!r}")
    settings = data.get("settings", {})
    for dest, value in settings.items():
        if dest in LIMITS and isinstance(value, int | float) and not isinstance(value, bool):
            try:
                check_limit(dest, value, f"key 'settings.{dest}'")
            except LimitError as exc:
                raise RunFormatError(f"{path}: {exc}") from None

"""One process's share of a run: settings, server identity, prompt order and the records file.

Built at ``test_start`` in every process that takes part. The master (or local runner) decides what the
workers must agree on (API, model, run directory, server identity) as a ``RunPlan`` and sends it to every
worker with a Locust message before Locust's spawn messages, so all processes of a run act on one plan
without the parsed options being rewritten.
"""

from __future__ import annotations

import itertools
import logging
import secrets
import sys
import time
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, cast

from specbench.contract.receiveclock import clock_of, receive_clock
from specbench.contract.redact import redact
from specbench.contract.rundir import RunDir
from specbench.contract.schema import (
    SCHEMA_VERSION,
    AnswerLine,
    Api,
    RequestRecord,
    RunMeta,
    StepRecord,
)
from specbench.contract.settings import SettingsError, SuiteSettings, default_run_dir
from specbench.contract.version import SUITE_VERSION
from specbench.locustfiles.deadline import DeadlineExceeded
from specbench.locustfiles.dialects import Dialect, Sampling, dialect
from specbench.locustfiles.link import ClockOffset
from specbench.locustfiles.prompts import PromptOrder, PromptSet, load_prompts
from specbench.locustfiles.recorder import JsonlAppender, write_meta
from specbench.locustfiles.replay import Replay, TraceSchedule
from specbench.locustfiles.schedule import Schedule
from specbench.locustfiles.sequencer import LocalSequence, WorkerSequence
from specbench.locustfiles.serverinfo import ServerIdentity, identify
from specbench.locustfiles.templateprobe import LENGTH_SPLITS, chat_template_tokens
from specbench.locustfiles.workload import Workload
from specbench.shapes.arrivals import ArrivalClock
from specbench.shapes.live import LiveStep

log = logging.getLogger("specbench")


@dataclass
class RunContext:
    """Everything a user needs to send a request and record it, shared by the users of one process."""

    settings: SuiteSettings
    run_dir: Path
    api: Api
    model: str
    server: ServerIdentity
    sampling: Sampling
    prompt_set: PromptSet
    prompts: PromptOrder
    worker: int
    records: JsonlAppender | None  # only on the master or local runner: the one writer of records.jsonl
    answers: JsonlAppender | None = None  # --check-output: answers.jsonl, opened by the first answer
    sequence: LocalSequence | WorkerSequence | None = None  # prompt sequence numbers (locustfiles.sequencer)
    clock: ClockOffset = field(default_factory=ClockOffset)  # this process's clock against the master's
    live: LiveStep = field(default_factory=LiveStep)
    schedule: Schedule | None = None  # open loop: this process's due times (the rates' arrivals or the trace's rows)
    workload: Workload | None = None  # per-request input and output lengths (None: as the prompts and --max-tokens)
    replay: Replay | None = None  # --trace: the trace's windows, rows and prompt text (locustfiles.replay)
    run_token: str = field(default_factory=lambda: secrets.token_hex(3))
    _requests: itertools.count = field(default_factory=itertools.count)
    _record_numbers: itertools.count = field(default_factory=itertools.count)
    _users: itertools.count = field(default_factory=itertools.count)

    @property
    def dialect(self) -> Dialect:
        return dialect(self.api)

    def next_request_id(self) -> str:
        return f"{self.run_token}-{self.worker}-{next(self._requests)}"

    def next_user_id(self) -> str:
        return f"{self.worker}:{next(self._users)}"

    def now(self) -> float:
        """Wall clock in the master's time (the local clock on a master or local runner)."""
        return time.time() + self.clock.offset_s

    def next_seq(self, step: int | None) -> int:
        """The prompt sequence number of this process's next request in ``step``."""
        if self.sequence is None:
            return self.prompts.next()[0]
        return self.sequence.next(step)

    def envelope(self, record: RequestRecord, answer: AnswerLine | None = None) -> dict[str, Any]:
        """A finished record as sent to the master: numbered, so the master can count what it did not get;
        with --check-output its answer travels in the same message (the master writes both)."""
        message: dict[str, Any] = {"n": next(self._record_numbers), "record": dict(record)}
        if answer is not None:
            message["answer"] = dict(answer)
        return message

    def write_record(self, record: RequestRecord, answer: AnswerLine | dict[str, Any] | None = None) -> None:
        if self.records is None:
            return
        if answer is not None:  # first, so a reader that sees a record's digest finds its answer
            if self.answers is None:
                self.answers = JsonlAppender(RunDir(self.run_dir).answers_file)
            self.answers.write(dict(answer))
        self.records.write(dict(record))

    def close_files(self) -> None:
        for appender in (self.records, self.answers):
            if appender is not None:
                appender.close()


def resolve_api(requested: str, server: ServerIdentity) -> Api:
    """auto: SGLang's native /generate when the server is SGLang, else the chat route."""
    if requested != "auto":
        return cast(Api, requested)  # --api's choices are "auto" and the APIS
    return "generate" if server.kind == "sglang" else "chat"


@dataclass(frozen=True)
class RunPlan:
    """What every process of one run must agree on, decided once by the master (or the local runner)."""

    api: Api
    model: str
    run_dir: str
    server: ServerIdentity

    def to_message(self) -> dict[str, Any]:
        return {"api": self.api, "model": self.model, "run_dir": self.run_dir, "server": self.server.to_json()}

    @classmethod
    def from_message(cls, data: dict[str, Any]) -> RunPlan:
        return cls(api=data["api"], model=data["model"], run_dir=data["run_dir"],
                   server=ServerIdentity(**data["server"]))


def plan_run(settings: SuiteSettings, host: str) -> RunPlan:
    """On the master or local runner: ask the server who it is and fix API, model and run directory."""
    try:
        server = identify(host, api_key=settings.api_key(), timeout=settings.connect_timeout)
    except DeadlineExceeded as exc:
        raise SettingsError(f"--host {redact(host)}: asking the server who it is {exc} (it answers too slowly or "
                            "streams its info pages without end)") from None
    run_dir = settings.out or str(default_run_dir(settings.label))
    api, model = resolve_api(settings.api, server), settings.model or server.model or "default"
    if api == "chat" and settings.prompts.startswith(LENGTH_SPLITS):
        # A length split's prompt tokens hold the chat template's: measured (two one-token requests before the
        # ladder), and said beside the set's target length. Other sets are not probed: their runs send only what
        # the ladder sends.
        server = replace(server, chat_template_tokens=chat_template_tokens(
            host, model, api_key=settings.api_key(), timeout=settings.connect_timeout))
    return RunPlan(api=api, model=model, run_dir=run_dir, server=server)


def build_context(settings: SuiteSettings, plan: RunPlan, worker: int, writes_records: bool,
                  sequence: LocalSequence | WorkerSequence | None = None, workers: int = 1) -> RunContext:
    """``writes_records``: the master or local runner; a worker sends its records to the master instead and
    creates no run directory (it may run on another machine). ``sequence`` hands out prompt numbers.
    ``workers``: load processes sharing an open-loop rate (each sends rate / workers)."""
    prompt_set = load_prompts(settings.prompts)
    fixed = settings.prompt_id or None
    order = PromptOrder(prompt_set, seed=settings.seed,
                        mode=settings.prompt_mode,  # type: ignore[arg-type]  # a str, held to --prompt-mode's choices
                        fixed_id=fixed)
    run_dir = Path(plan.run_dir)
    records = JsonlAppender(RunDir(run_dir).records_file) if writes_records else None
    ctx = RunContext(
        settings=settings, run_dir=run_dir, api=plan.api, model=plan.model, server=plan.server,
        sampling=Sampling(settings.max_tokens, settings.temperature, settings.ignore_eos,
                          token_ids=settings.checks_output),
        prompt_set=prompt_set, prompts=order, worker=worker, records=records, sequence=sequence,
        replay=Replay.from_settings(settings, prompt_set) if settings.trace else None,
        workload=(Workload.from_settings(settings, prompt_set)
                  if settings.input_len or settings.output_len or settings.shared_prefix else None),
    )
    if ctx.replay is not None:  # rows are taken with the run's prompt numbers, due in the master's time line
        ctx.schedule = TraceSchedule(ctx.replay, ctx.next_seq, lambda: ctx.clock.offset_s)
    elif settings.open_loop:
        ctx.schedule = ArrivalClock(settings.arrivals, settings.seed, worker, workers, settings.burstiness)
    return ctx


_SECRET_WORDS = ("key", "token", "secret", "password", "auth")
# The suite's own flags whose names hold a secret word but whose values are not secrets: a number of output
# tokens, the name of a variable (#53: meta.json recorded "--max-tokens", "<redacted>").
_NOT_SECRET = ("--max-tokens", "--api-key-env")


def redact_argv(argv: list[str]) -> list[str]:
    """The command line for meta.json, with the value of any secret-looking flag replaced.

    The suite reads keys only from the environment, but a user may still pass one to some other flag.
    """
    out: list[str] = []
    hide_next = False
    for arg in argv:
        if hide_next:
            out.append("<redacted>")
            hide_next = False
            continue
        name = arg.split("=", 1)[0].lower()
        secretish = arg.startswith("-") and any(w in name for w in _SECRET_WORDS) and name not in _NOT_SECRET
        if secretish and "=" in arg:
            out.append(f"{arg.split('=', 1)[0]}=<redacted>")
        else:
            out.append(arg)
            hide_next = secretish
    return out


def initial_meta(ctx: RunContext, host: str, levels: list[int]) -> RunMeta:
    """meta.json at start; ``levels``: the concurrencies the shape walks (none in open loop, which walks rates)."""
    s = ctx.settings
    return RunMeta(
        schema=SCHEMA_VERSION, suite_version=SUITE_VERSION, command_line=redact_argv(sys.argv),
        settings=s, api=ctx.api, ladder=[] if s.open_loop else list(levels),
        prompts={"name": ctx.prompt_set.name, "sha256": ctx.prompt_set.sha256,
                 "count": len(ctx.prompt_set.prompts), "mode": s.prompt_mode, "seed": s.seed,
                 "fixed_id": s.prompt_id or None},
        server={**ctx.server.to_json(), "url": host}, started_s=time.time(), ended_s=None, partial=True,
        receive_clock=receive_clock(s.receive_clock, host),
    )


class StepsWriter:
    """Appends closed steps to steps.jsonl in the current run directory."""

    def __init__(self) -> None:
        self.appender: JsonlAppender | None = None
        self.clocks: set[str] = set()  # the steps' chunk clocks (meta.json's, at the end: ``finish_meta``)

    def open(self, run_dir: Path) -> None:
        self.close()
        self.clocks = set()
        self.appender = JsonlAppender(RunDir(run_dir).steps_file)

    def __call__(self, step: StepRecord) -> None:
        if self.appender is not None:
            self.appender.write(dict(step))
        if step.get("receive_clock"):
            self.clocks.add(step["receive_clock"])

    def close(self) -> None:
        if self.appender is not None:
            self.appender.close()
            self.appender = None


def finish_meta(run_dir: Path, meta: RunMeta, completed: bool, clocks: Iterable[str] = ()) -> None:
    """meta.json at the end; ``clocks``: the steps' chunk clocks, which replace the one asked at the start (a
    kernel that refused its stamps leaves "user", steps on both "mixed")."""
    meta.receive_clock = clock_of(clocks) or meta.receive_clock
    meta.ended_s = time.time()
    meta.partial = not completed
    write_meta(run_dir, meta)

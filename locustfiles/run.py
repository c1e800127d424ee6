"""One process's share of a run: settings, server identity, prompt order and the records file.

Built at ``test_start`` in every process that takes part. The master (or local runner) decides what the
workers must agree on (API, model, run directory) and writes it into the parsed options, which Locust ships
to every worker in its spawn messages; so all processes of a run write to one run directory.
"""

from __future__ import annotations

import itertools
import logging
import secrets
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from analysis.schema import RECORDS_FILE, SCHEMA_VERSION, STEPS_FILE, RequestRecord, RunMeta, StepRecord
from locustfiles.payloads import API_PATHS, Sampling
from locustfiles.prompts import PromptOrder, PromptSet, load_prompts
from locustfiles.recorder import JsonlAppender, write_meta
from locustfiles.serverinfo import ServerIdentity, identify
from locustfiles.settings import SuiteSettings, default_run_dir
from shapes.live import LiveStep

log = logging.getLogger("specbench")

SUITE_VERSION = "0.1.0"


@dataclass
class RunContext:
    """Everything a user needs to send a request and record it, shared by the users of one process."""

    settings: SuiteSettings
    run_dir: Path
    api: str
    model: str
    server: ServerIdentity
    sampling: Sampling
    prompt_set: PromptSet
    prompts: PromptOrder
    worker: int
    records: JsonlAppender | None  # None on a master, which runs no users
    live: LiveStep = field(default_factory=LiveStep)
    run_token: str = field(default_factory=lambda: secrets.token_hex(3))
    _requests: itertools.count = field(default_factory=itertools.count)
    _users: itertools.count = field(default_factory=itertools.count)

    @property
    def path(self) -> str:
        return API_PATHS[self.api]

    def next_request_id(self) -> str:
        return f"{self.run_token}-{self.worker}-{next(self._requests)}"

    def next_user_id(self) -> str:
        return f"{self.worker}:{next(self._users)}"

    def write_record(self, record: RequestRecord) -> None:
        if self.records is not None:
            self.records.write(dict(record))


def resolve_api(requested: str, server: ServerIdentity) -> str:
    """auto: SGLang's native /generate when the server is SGLang, else the chat route."""
    if requested != "auto":
        return requested
    return "generate" if server.kind == "sglang" else "chat"


def coordinate(options: Any, settings: SuiteSettings, host: str, fresh_run_dir: bool) -> ServerIdentity:
    """On the master or local runner: fix API, model and run directory for every process of this run."""
    server = identify(host, api_key=settings.api_key(), timeout=settings.connect_timeout)
    options.api = resolve_api(settings.api, server)
    options.model = settings.model or server.model or "default"
    if fresh_run_dir:
        options.out = str(default_run_dir(settings.label))
    return server


def build_context(options: Any, worker: int, server: ServerIdentity, runs_users: bool,
                  workers: int = 1) -> RunContext:
    """``workers`` > 1: this process takes every ``workers``-th prompt of the shared order, from ``worker``."""
    settings = SuiteSettings.from_options(options)
    prompt_set = load_prompts(settings.prompts)
    fixed = settings.prompt_id or None
    stride = max(workers, worker + 1)
    order = PromptOrder(prompt_set, seed=settings.seed, mode=settings.prompt_mode,  # type: ignore[arg-type]
                        fixed_id=fixed, stride=stride, offset=worker % stride)
    run_dir = Path(settings.out)
    records = JsonlAppender(run_dir / RECORDS_FILE) if runs_users else None
    return RunContext(
        settings=settings, run_dir=run_dir, api=settings.api, model=settings.model, server=server,
        sampling=Sampling(settings.max_tokens, settings.temperature, settings.ignore_eos),
        prompt_set=prompt_set, prompts=order, worker=worker, records=records,
    )


_SECRET_WORDS = ("key", "token", "secret", "password", "auth")


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
        secretish = arg.startswith("-") and any(w in name for w in _SECRET_WORDS) and name != "--api-key-env"
        if secretish and "=" in arg:
            out.append(f"{arg.split('=', 1)[0]}=<redacted>")
        else:
            out.append(arg)
            hide_next = secretish
    return out


def initial_meta(ctx: RunContext, host: str) -> RunMeta:
    s = ctx.settings
    return RunMeta(
        schema=SCHEMA_VERSION, suite_version=SUITE_VERSION, label=s.label, command_line=redact_argv(sys.argv),
        settings=s.public(), api=ctx.api, max_tokens=s.max_tokens, ignore_eos=s.ignore_eos,
        temperature=s.temperature, ladder=list(s.ladder),
        prompts={"name": ctx.prompt_set.name, "sha256": ctx.prompt_set.sha256,
                 "count": len(ctx.prompt_set.prompts), "mode": s.prompt_mode, "seed": s.seed,
                 "fixed_id": s.prompt_id or None},
        server={**ctx.server.to_json(), "url": host}, started_s=time.time(), ended_s=None, partial=True,
    )


class StepsWriter:
    """Appends closed steps to steps.jsonl in the current run directory."""

    def __init__(self) -> None:
        self.appender: JsonlAppender | None = None

    def open(self, run_dir: Path) -> None:
        self.close()
        self.appender = JsonlAppender(run_dir / STEPS_FILE)

    def __call__(self, step: StepRecord) -> None:
        if self.appender is not None:
            self.appender.write(dict(step))

    def close(self) -> None:
        if self.appender is not None:
            self.appender.close()
            self.appender = None


def finish_meta(run_dir: Path, meta: RunMeta, completed: bool) -> None:
    meta.ended_s = time.time()
    meta.partial = not completed
    write_meta(run_dir, meta)

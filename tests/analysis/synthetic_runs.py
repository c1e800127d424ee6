"""Synthetic run directories with known answers, written through the schema's real field names.

Every user streams requests back to back, one token every 1/r seconds (r = level tok/s / C), so a level's
token arrivals form a lattice. The measured window holds a whole number of token spacings and starts half
a spacing away from any arrival, so the tokens in it, and the level's throughput, are exact.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from specbench.contract.rundir import GPU_METRICS_FILE, META_FILE, RECORDS_FILE, SERVER_METRICS_FILE, STEPS_FILE
from specbench.contract.schema import SCHEMA_VERSION

EPOCH = 1_760_000_000.0
SEED_LEVELS = (1, 2, 5, 10, 30, 70, 100, 250)
SEED_EAGLE3 = (77.5, 125.1, 183.2, 239.6, 299.5, 337.7, 338.8, 340.9)
SEED_BASELINE = (92.6, 159.7, 292.5, 457.2, 711.0, 784.2, 761.6, 772.1)
SEED_RATIOS = ("0.84x", "0.78x", "0.63x", "0.52x", "0.42x", "0.43x", "0.44x", "0.44x")


@dataclass
class Prompt:
    prompt_id: str
    category: str
    speed: float = 1.0  # multiplies the user's token rate for requests of this prompt
    accept_length: float | None = None  # spec runs: tokens per verify pass


DEFAULT_PROMPTS = [
    Prompt("p0", "code"), Prompt("p1", "code"), Prompt("p2", "math"), Prompt("p3", "math"),
    Prompt("p4", "qa"), Prompt("p5", "qa"), Prompt("p6", "writing"), Prompt("p7", "writing"),
]


@dataclass
class Level:
    target_c: int
    tok_s: float  # the level's total throughput when every prompt has speed 1
    tokens: int = 32  # output tokens per request
    window_requests: int | None = None  # window length in request lifetimes (default: enough requests)
    users: int | None = None  # users actually running; fewer than target_c lowers achieved concurrency
    error_every: int = 0  # every n-th request of the level fails with an HTTP error
    tokens_per_chunk: int = 1
    write_step: bool = True  # False: the run was killed during this step (no steps.jsonl line)
    step_extra: dict[str, Any] = field(default_factory=dict)  # extra steps.jsonl fields (open-loop ones)


@dataclass
class RunSpec:
    label: str
    levels: list[Level]
    prompts: list[Prompt] = field(default_factory=lambda: list(DEFAULT_PROMPTS))
    speculative: str | dict[str, Any] | None = None  # meta.json's server.speculative
    max_running_requests: int = 256
    max_tokens: int = 512
    api: str = "generate"
    ignore_eos: bool = True
    settings: dict[str, Any] = field(default_factory=dict)  # meta.json "settings" (workload options)
    prompts_sha256: str = "0" * 64
    prompt_mode: str = "shuffled"
    output_tokens_source: str = "meta_info"
    partial: bool = False
    write_meta: bool = True
    torn_tail: bool = False
    cached_tokens: int = 0  # per request, of 100 prompt tokens
    client_busy: float | None = None  # every step line's load_cpu, as a share of one core
    send_lag_ms: float | None = None  # every record's send_lag_ms (absent when None, as in older records)
    server_counter_factor: float | None = None  # write server_metrics.jsonl: the token counter = this x truth
    running_gauge_factor: float = 1.0  # its running gauge = this x the requests truly running
    # the record lines as written, edited (to write a line twice, or a value no request can have); None: as made
    edit_records: Callable[[list[dict[str, Any]]], list[dict[str, Any]]] | None = None
    gpu_power_w: float | None = None  # write gpu_metrics.jsonl: one GPU drawing this, its counter agreeing...
    gpu_counter_factor: float = 1.0  # ... times this


def default_window_requests(target_c: int) -> int:
    """Request lifetimes per window: enough for max(30, 3C) measured requests and 12 bootstrap batches."""
    return max(12, math.ceil(max(30, 3 * target_c) / target_c) + 3)


def write_run(root: Path, spec: RunSpec) -> Path:
    """Write records.jsonl, steps.jsonl and meta.json for ``spec`` into ``root``; returns ``root``."""
    root.mkdir(parents=True, exist_ok=True)
    records: list[dict[str, Any]] = []
    steps: list[dict[str, Any]] = []
    t = EPOCH
    for index, level in enumerate(spec.levels):
        recs, step = _level(spec, index, level, t)
        records.extend(recs)
        if level.write_step:
            steps.append(step)
        t = max(r["start_s"] + r["e2e_s"] for r in recs) + 1.0
    records.sort(key=lambda r: r["start_s"] + r["e2e_s"])
    written = spec.edit_records([dict(r) for r in records]) if spec.edit_records else records
    with (root / RECORDS_FILE).open("w", encoding="utf-8") as fh:
        for rec in written:
            fh.write(json.dumps(rec) + "\n")
        if spec.torn_tail:
            fh.write('{"schema": 1, "request_id": "torn')
    with (root / STEPS_FILE).open("w", encoding="utf-8") as fh:
        for step in steps:
            if spec.client_busy is not None:
                step.update(load_cpu={"local": 100 * spec.client_busy})
            fh.write(json.dumps(step) + "\n")
    if spec.server_counter_factor is not None:
        _write_server_metrics(root, records, EPOCH, t, spec.server_counter_factor, spec.running_gauge_factor)
    if spec.gpu_power_w is not None:
        _write_gpu_metrics(root, EPOCH, t, spec.gpu_power_w, spec.gpu_counter_factor)
    if spec.write_meta:
        (root / META_FILE).write_text(json.dumps(meta_json(spec, EPOCH, t)), encoding="utf-8")
    return root


def _write_gpu_metrics(root: Path, t0: float, t1: float, power_w: float, factor: float) -> None:
    """A DCGM sample every 0.25 s of one GPU at a constant ``power_w``, its energy counter ``factor`` x that."""
    with (root / GPU_METRICS_FILE).open("w", encoding="utf-8") as fh:
        t = t0 - 1.0
        while t < t1 + 1.0:
            reading = {"power_w": power_w, "energy_mj": 1e9 + factor * power_w * (t - t0 + 1.0) * 1000.0}
            fh.write(json.dumps({"schema": 1, "t_s": t, "source": 0, "gpus": {"0": reading}}) + "\n")
            t += 0.25


def _write_server_metrics(root: Path, records: list[dict[str, Any]], t0: float, t1: float, factor: float,
                          running_factor: float = 1.0) -> None:
    """A sample every 0.25 s whose token counter is ``factor`` times the tokens of requests finished so far, and
    whose running gauge is ``running_factor`` times the requests running."""
    ends = sorted((r["start_s"] + r["e2e_s"], r["output_tokens"]) for r in records if r["status"] == "ok")
    with (root / SERVER_METRICS_FILE).open("w", encoding="utf-8") as fh:
        t = t0 + 0.1234  # never on a request's end
        while t < t1:
            done = sum(n for end, n in ends if end <= t)
            running = sum(1 for r in records if r["start_s"] <= t < r["start_s"] + r["e2e_s"])
            fh.write(json.dumps({"schema": 1, "t_s": t, "server": "sglang", "raw": {},
                                 "values": {"running": running_factor * running,
                                            "generation_tokens_total": factor * done}}) + "\n")
            t += 0.25


def meta_json(spec: RunSpec, started: float, ended: float) -> dict[str, Any]:
    return {
        "schema": SCHEMA_VERSION, "suite_version": "test", "label": spec.label, "command_line": [],
        "settings": {"label": spec.label, "max_tokens": spec.max_tokens, "ignore_eos": spec.ignore_eos,
                     "temperature": 0.0, **spec.settings},
        "api": spec.api, "ladder": [lv.target_c for lv in spec.levels],
        "prompts": {"name": "synthetic", "sha256": spec.prompts_sha256, "count": len(spec.prompts),
                    "mode": spec.prompt_mode, "seed": 0},
        "server": {"url": "http://localhost:30000", "kind": "sglang", "model": "test-model",
                   "speculative": spec.speculative, "max_running_requests": spec.max_running_requests},
        "started_s": started, "ended_s": ended, "partial": spec.partial,
    }


def _level(spec: RunSpec, index: int, level: Level, start: float) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    c = level.target_c
    users = level.users or c
    rate = level.tok_s / c  # tokens per second of one user at prompt speed 1
    n_window = default_window_requests(c) if level.window_requests is None else level.window_requests
    t0 = start + 2 * level.tokens / rate  # whole token spacings after the step start
    t1 = t0 + n_window * level.tokens / rate
    records = []
    seq = 0
    for u in range(users):
        phase = (u + 0.5) / (2 * users)  # in (0, 0.5) of a spacing: no arrival lands on t0 or t1
        t = start + phase / rate
        n = 0
        while t < t1:
            prompt = spec.prompts[(u + n * users) % len(spec.prompts)]
            seq += 1
            failed = level.error_every > 0 and seq % level.error_every == 0
            rec = _record(spec, index, level, u, n, prompt, t, rate * prompt.speed, failed, t0, t1)
            records.append(rec)
            t += rec["e2e_s"]
            n += 1
    step = {
        "schema": SCHEMA_VERSION, "index": index, "target_c": c, "start_s": start, "steady_start_s": t0,
        "end_s": t1, "min_requests": max(30, 3 * c), "requests_measured": 0, "achieved_c": None,
        "throughput_tok_s": None, "ended_by": "target", "flags": [], **level.step_extra,
    }
    return records, step


def _record(spec: RunSpec, index: int, level: Level, user: int, n: int, prompt: Prompt, start: float,
            rate: float, failed: bool, t0: float, t1: float) -> dict[str, Any]:
    tokens = level.tokens
    if failed:
        e2e = 0.5 / rate
        chunk_ms: list[float] = []
        chunk_tokens: list[int] = []
        out = 0
    else:
        e2e = tokens / rate
        ends = list(range(level.tokens_per_chunk, tokens + 1, level.tokens_per_chunk))
        if ends[-1] != tokens:
            ends.append(tokens)
        chunk_ms = [(k - 0.5) / rate * 1000.0 for k in ends]
        chunk_tokens = ends
        out = tokens
    spec_fields = None
    if prompt.accept_length and not failed:
        verify = round(tokens / prompt.accept_length)
        spec_fields = {"verify_ct": verify, "accept_length": tokens / verify, "source": "meta_info"}
    phase = "warmup" if start < t0 else "measured" if start < t1 else "transition"
    return {
        "schema": SCHEMA_VERSION, "request_id": f"{user}-{index}-{n}", "server_request_id": None,
        "label": spec.label, "api": spec.api, "prompt_id": prompt.prompt_id, "category": prompt.category,
        "prompt_seq": n, "step": index, "target_c": level.target_c, "phase": phase, "worker": 0,
        "start_s": start, "ttft_s": chunk_ms[0] / 1000.0 if chunk_ms else None, "e2e_s": e2e,
        "chunk_ms": chunk_ms, "chunk_tokens": chunk_tokens,
        "chunk_tokens_source": "server", "output_tokens": out, "output_tokens_source": spec.output_tokens_source,
        "prompt_tokens": 100, "cached_tokens": spec.cached_tokens, "spec": spec_fields,
        "status": "http_error" if failed else "ok", "http_status": 500 if failed else 200,
        "error": "HTTP 500" if failed else None, "finish_reason": None if failed else "length",
        "max_tokens": spec.max_tokens,
        **({"send_lag_ms": spec.send_lag_ms} if spec.send_lag_ms is not None else {}),
    }


def small_pair() -> tuple[RunSpec, RunSpec]:
    """A quick clean baseline/spec pair at C = 1, 2, 4 where speculation loses (0.80x) everywhere."""
    base = RunSpec("baseline", [Level(c, t, tokens=16) for c, t in ((1, 100.0), (2, 180.0), (4, 320.0))])
    prompts = [Prompt(p.prompt_id, p.category, accept_length=2.5) for p in DEFAULT_PROMPTS]
    spec = RunSpec("eagle3", [Level(c, t * 0.8, tokens=16) for c, t in ((1, 100.0), (2, 180.0), (4, 320.0))],
                   prompts=prompts, speculative="EAGLE3")
    return base, spec


def seed_specs() -> tuple[RunSpec, RunSpec]:
    """The seed case: baseline and EAGLE-3 runs whose levels stream exactly the seed's tok/s."""
    base = RunSpec("baseline", [Level(c, t) for c, t in zip(SEED_LEVELS, SEED_BASELINE, strict=True)])
    prompts = [Prompt(p.prompt_id, p.category, accept_length=al)
               for p, al in zip(DEFAULT_PROMPTS, (3.2, 3.0, 2.6, 2.4, 2.0, 2.2, 1.8, 1.6), strict=True)]
    spec = RunSpec("eagle3", [Level(c, t) for c, t in zip(SEED_LEVELS, SEED_EAGLE3, strict=True)],
                   prompts=prompts, speculative="EAGLE3")
    return base, spec

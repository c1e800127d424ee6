"""Health, model and server-info endpoints, shaped as each emulated server version shapes them (docs/protocols.md)."""

from __future__ import annotations

import dataclasses
import time
from typing import Any, Protocol

import gevent

from .httpserver import HttpRequest, Responder
from .ledger import Ledger
from .metrics import Metrics
from .metrics_render import CONTENT_TYPE, render
from .prefixcache import PrefixCache
from .profile import Profile
from .scheduler import Scheduler
from .session import send_json
from .tokenize import tokenize

__all__ = ["INFO_ROUTES", "Served"]


class Served(Protocol):
    """What the info routes read of the running server (``emulator.server.Emulator``, which hands itself to
    them): declared here so that the routes need not import the server that imports them."""

    profile: Profile
    host: str
    started_wall: float
    scheduler: Scheduler
    ledger: Ledger
    metrics: Metrics
    cache: PrefixCache

    @property
    def port(self) -> int: ...

    def is_ready(self) -> bool: ...

_FLUSH_TEXT = (b"Cache flushed.\nPlease check backend logs for more details. (When there are running or waiting "
               b"requests, the operation will not be performed.)")


def ready(emu: Served, _req: HttpRequest, resp: Responder) -> None:
    resp.send(200 if emu.is_ready() else 503)


def health(emu: Served, _req: HttpRequest, resp: Responder) -> None:
    """Like SGLang: 503 while starting, otherwise a probe that takes ``health_probe_s`` before 200."""
    if not emu.is_ready():
        resp.send(503)
        return
    gevent.sleep(emu.profile.health_probe_s * emu.profile.scale)
    resp.send(200)


def _model_card(emu: Served) -> dict[str, Any]:
    name = emu.profile.served_model_name
    return {"id": name, "object": "model", "created": int(emu.started_wall), "owned_by": emu.profile.wire.server,
            "root": name, "parent": None, "max_model_len": emu.profile.context_length}


def models(emu: Served, req: HttpRequest, resp: Responder) -> None:
    wanted = req.path[len("/v1/models/"):] if req.path.startswith("/v1/models/") else None
    card = _model_card(emu)
    if wanted is None:
        send_json(resp, 200, {"object": "list", "data": [card]})
    elif wanted == card["id"]:
        send_json(resp, 200, card)
    else:
        send_json(resp, 404, {"error": {"message": f"The model '{wanted}' does not exist",
                                        "type": "invalid_request_error", "param": "model",
                                        "code": "model_not_found"}})


def model_info(emu: Served, _req: HttpRequest, resp: Responder) -> None:
    p = emu.profile
    send_json(resp, 200, {"model_path": p.model_path, "served_model_name": p.served_model_name,
                          "tokenizer_path": p.model_path, "is_generation": True, "weight_version": "default",
                          "model_type": "emulated", "architectures": ["EmulatedForCausalLM"]})


def server_info(emu: Served, _req: HttpRequest, resp: Responder) -> None:
    send_json(resp, 200, build_server_info(emu))


def build_server_info(emu: Served) -> dict[str, Any]:
    """One flat object: resolved server args, then ``internal_states`` and ``version``."""
    p, spec, stats, wire = emu.profile, emu.profile.speculative, emu.scheduler.stats, emu.profile.wire
    states: list[dict[str, Any]] = []
    for rank_cap in cap_per_rank(p):
        state: dict[str, Any] = {
            "last_gen_throughput": emu.scheduler.window.gen_throughput / wire.parts,
            "effective_max_running_requests_per_dp": rank_cap,
            "memory_usage": {"weight": 0.0, "kvcache": 0.0, "token_capacity": p.context_length},
            "world_size": wire.tp_ranks,
        }
        if spec is not None:
            state["avg_spec_accept_length"] = stats.verify_tokens / stats.verify_passes if stats.verify_passes else 0.0
        states.append(state)
    return {
        "model_path": p.model_path,
        "tokenizer_path": p.model_path,
        "served_model_name": p.served_model_name,
        "host": emu.host,
        "port": emu.port,
        "tp_size": wire.tp_ranks,
        "dp_size": wire.parts,
        "context_length": p.context_length,
        "max_running_requests": p.max_running_requests_flag,  # the launch flag: null when not given
        "max_queued_requests": p.max_queued_requests,
        "max_total_num_tokens": p.max_total_num_tokens,
        "max_req_input_len": p.context_length - 1,
        "stream_interval": 1,
        "enable_metrics": True,
        "schedule_policy": "fcfs",
        "random_seed": p.seed,
        "speculative_algorithm": spec.algorithm if spec else None,
        "speculative_draft_model_path": spec.draft_model_path if spec else None,
        "speculative_num_steps": spec.num_steps if spec else None,
        "speculative_eagle_topk": spec.eagle_topk if spec else None,
        "speculative_num_draft_tokens": spec.num_draft_tokens if spec else None,
        "speculative_adaptive": False,
        "speculative_adaptive_config": None,
        "speculative_attention_mode": "prefill",
        "speculative_token_map": None,
        "cuda_graph_max_bs_decode": p.max_running_requests,
        "cuda_graph_bs_decode": None,
        "cuda_graph_max_bs": p.max_running_requests,
        "launch_command": f"python -m specbench.emulator --profile {p.name} --speed {p.speed:g}"
                          + (f" --drift {p.drift_per_min:g}" if p.drift_per_min else ""),
        "startup_time": emu.started_wall,
        "internal_states": states,  # one per DP rank
        "version": p.version,
        "emulator": {"profile": p.name, "speed": p.speed, "drift_per_min": p.drift_per_min, "source": p.source},
    }


def cap_per_rank(p: Profile) -> list[int]:
    """The cap in force on each DP rank: the emulator's one batch cap dealt to the vintage's ranks (whole
    numbers, the first ranks take the remainder)."""
    whole, rest = divmod(p.max_running_requests, p.wire.parts)
    return [whole + (1 if i < rest else 0) for i in range(p.wire.parts)]


def metrics(emu: Served, _req: HttpRequest, resp: Responder) -> None:
    resp.send(200, render(emu.metrics).encode(), CONTENT_TYPE)


def flush_cache(emu: Served, _req: HttpRequest, resp: Responder) -> None:
    busy = emu.scheduler.num_running or emu.scheduler.num_waiting
    if not busy:
        emu.cache.flush()
    resp.send(400 if busy else 200, _FLUSH_TEXT, "text/plain; charset=utf-8")


def ledger(emu: Served, req: HttpRequest, resp: Responder) -> None:
    """The truth ledger as a JSON list; ``?clear=1`` empties it after reading."""
    clear = req.query.get("clear", "") not in ("", "0", "false")
    send_json(resp, 200, emu.ledger.records(clear=clear))


def gauges(emu: Served, _req: HttpRequest, resp: Responder) -> None:
    """Every gauge refresh the scheduler published, oldest first: ``[wall time, running, waiting]``."""
    send_json(resp, 200, [list(entry) for entry in emu.scheduler.gauge_log])


def stats(emu: Served, _req: HttpRequest, resp: Responder) -> None:
    """Step bookkeeping, and the drift in force: ``speed_factor`` is the speed now over the speed at start."""
    drift = emu.scheduler.drift
    body = {**emu.scheduler.stats.as_dict(), "profile": emu.profile.name, "speed": emu.profile.speed,
            "drift_per_min": drift.per_min, "speed_factor": drift.factor(time.monotonic()), "ready": emu.is_ready()}
    send_json(resp, 200, body)


def profile(emu: Served, _req: HttpRequest, resp: Responder) -> None:
    send_json(resp, 200, dataclasses.asdict(emu.profile))


def props(emu: Served, _req: HttpRequest, resp: Responder) -> None:
    """llama.cpp's ``/props``: slots, model path, build, and the speculative settings of a slot."""
    p, spec = emu.profile, emu.profile.speculative
    params: dict[str, Any] = {"n_predict": -1, "temperature": 0.8}
    if spec is not None:
        params |= {"speculative.n_max": spec.num_steps, "speculative.n_min": 0, "speculative.p_min": 0.75}
    if p.wire.props_types_key == "speculative.types":
        params["speculative.types"] = "none,draft-simple" if spec else "none"
    else:
        params["speculative.type"] = "draft" if spec else "none"
    send_json(resp, 200, {"default_generation_settings": {"n_ctx": p.context_length, "params": params},
                          "total_slots": p.max_running_requests, "model_path": p.model_path,
                          "build_info": f"{p.vintage}-emulated"})


def slots(emu: Served, _req: HttpRequest, resp: Responder) -> None:
    """llama.cpp's ``/slots``; newer builds say per slot whether it speculates."""
    p = emu.profile
    row: dict[str, Any] = {"n_ctx": p.context_length, "is_processing": False}
    if p.wire.spec_counters:
        row["speculative"] = p.speculative is not None
    send_json(resp, 200, [{"id": i, **row} for i in range(p.max_running_requests)])


_COMMON = ("/ready", "/health", "/v1/models", "/metrics", "/_emulator/requests", "/_emulator/stats",
           "/_emulator/profile", "/_emulator/gauges")
_SERVER_ROUTES = {
    "sglang": (*_COMMON, "/health_generate", "/model_info", "/get_model_info", "/server_info", "/get_server_info",
               "/flush_cache"),
    "vllm": (*_COMMON, "/tokenize"),
    "llamacpp": (*_COMMON, "/props", "/slots", "/tokenize"),
}


def info_routes(server: str) -> dict[tuple[str, str], Any]:
    """The info routes the emulated server answers (``/ready`` and ``/_emulator/*`` on every one: the launcher
    and the tests use them)."""
    return {key: handler for key, handler in INFO_ROUTES.items() if key[1] in _SERVER_ROUTES[server]}


INFO_ROUTES = {
    ("GET", "/props"): props,
    ("GET", "/slots"): slots,
    ("GET", "/ready"): ready,
    ("GET", "/health"): health,
    ("GET", "/health_generate"): health,
    ("GET", "/v1/models"): models,
    ("GET", "/model_info"): model_info,
    ("GET", "/get_model_info"): model_info,
    ("GET", "/server_info"): server_info,
    ("GET", "/get_server_info"): server_info,
    ("GET", "/metrics"): metrics,
    ("POST", "/flush_cache"): flush_cache,
    ("POST", "/tokenize"): tokenize,
    ("GET", "/flush_cache"): flush_cache,
    ("GET", "/_emulator/requests"): ledger,
    ("GET", "/_emulator/stats"): stats,
    ("GET", "/_emulator/gauges"): gauges,
    ("GET", "/_emulator/profile"): profile,
}

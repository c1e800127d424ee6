"""Who is serving: kind, model, speculative settings and batch cap, read from the server's own endpoints.

SGLang: ``/server_info`` (flat server args, ``speculative_*``) and, for the cap in force, ``/metrics`` (see
``_sglang_cap``). llama.cpp: ``/props`` (``total_slots``, ``model_path``) and ``/slots`` (speculation, see
``_from_llamacpp``). vLLM: ``/v1/models`` says ``owned_by: vllm``; speculation shows only as
``vllm:spec_decode_*`` metrics. Anything else OpenAI-compatible: ``/v1/models``.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, replace
from typing import Any

import requests
from urllib3.exceptions import ReadTimeoutError

from specbench.contract.server_metrics import MetricsParseError, parse_metrics
from specbench.locustfiles.auth import auth_headers
from specbench.locustfiles.deadline import Deadline, fetch
from specbench.locustfiles.httpsession import new_session

_SGLANG_SPEC_KEYS = (
    "speculative_algorithm", "speculative_draft_model_path", "speculative_num_steps",
    "speculative_eagle_topk", "speculative_num_draft_tokens", "speculative_adaptive",
)


@dataclass
class ServerIdentity:
    """What a run's meta.json and the comparison's validity checks need to know about a server."""

    url: str
    kind: str  # "sglang", "vllm", "llamacpp" or "openai"
    model: str | None
    speculative: dict[str, Any] | None  # None: the server says it does not speculate
    max_running_requests: int | None
    version: str | None = None
    # Tokens one request may hold, prompt and answer together (#60): vLLM's and SGLang's ``max_model_len`` on
    # /v1/models, SGLang's ``context_length`` on /server_info, llama.cpp's per-slot ``n_ctx`` on /props.
    context_tokens: int | None = None
    # The chat template's prompt tokens per single-message chat request, measured at the start of a chat run
    # (``locustfiles.templateprobe``); None: not a chat run, or not measurable.
    chat_template_tokens: int | None = None

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class _Pages:
    """GETs of one identification: one session, one key, one total deadline for all of them."""

    session: requests.Session
    headers: dict[str, str]
    per_read_s: float
    deadline: Deadline

    def text(self, url: str) -> str | None:
        """The page's text on 200, else None; DeadlineExceeded once the identification has used its time."""
        try:
            got = fetch(self.session, "GET", url, deadline=self.deadline, per_read_s=self.per_read_s,
                        headers=self.headers)
        except (requests.RequestException, ReadTimeoutError):
            return None
        return got.text if got.status == 200 else None

    def json(self, url: str) -> Any:
        text = self.text(url)
        if text is None:
            return None
        try:
            return json.loads(text)
        except ValueError:
            return None


def identify(base_url: str, *, api_key: str | None = None, timeout: float = 10.0,
             deadline: Deadline | None = None) -> ServerIdentity:
    """Ask the server who it is. Never raises for an unreachable endpoint: missing facts stay None.

    Every page is read within one ``deadline`` (default: 3 x ``timeout`` for the whole identification), so a
    server that trickles or streams an info page cannot hold the caller; past it, DeadlineExceeded.
    """
    base = base_url.rstrip("/")
    with new_session() as session:
        get = _Pages(session, auth_headers(api_key), timeout, deadline or Deadline(3 * timeout))
        info = get.json(f"{base}/server_info")
        if not isinstance(info, dict):
            info = get.json(f"{base}/get_server_info")
        models = get.json(f"{base}/v1/models")
        model, owner = _first_model(models)
        model_len = _model_len(models)
        if isinstance(info, dict) and ("speculative_algorithm" in info or "max_running_requests" in info):
            found = _from_sglang(base, info, model, get.text(f"{base}/metrics"))
            return replace(found, context_tokens=found.context_tokens or model_len)
        props = get.json(f"{base}/props")
        if isinstance(props, dict) and ("default_generation_settings" in props or "total_slots" in props):
            slots = get.json(f"{base}/slots")  # 501 with --no-slots: None
            return _from_llamacpp(base, props, model, slots)
        if owner == "vllm":
            metrics = get.text(f"{base}/metrics") or ""
            spec = {"source": "metrics"} if "vllm:spec_decode_" in metrics else None
            return ServerIdentity(base, "vllm", model, spec, None, context_tokens=model_len)
        return ServerIdentity(base, "openai", model, None, None, context_tokens=model_len)


def _first_model(models: Any) -> tuple[str | None, str | None]:
    if isinstance(models, dict) and isinstance(models.get("data"), list) and models["data"]:
        first = models["data"][0]
        if isinstance(first, dict):
            return (str(first["id"]) if "id" in first else None), first.get("owned_by")
    return None, None


def _model_len(models: Any) -> int | None:
    """``max_model_len`` of the first model card (vLLM always sends it; newer SGLang too), else None."""
    if isinstance(models, dict) and isinstance(models.get("data"), list) and models["data"]:
        first = models["data"][0]
        if isinstance(first, dict):
            return _count(first.get("max_model_len"))
    return None


def _from_sglang(base: str, info: dict[str, Any], model: str | None, metrics: str | None = None) -> ServerIdentity:
    algorithm = info.get("speculative_algorithm")
    spec = {k.removeprefix("speculative_"): info.get(k) for k in _SGLANG_SPEC_KEYS} if algorithm else None
    states = info.get("internal_states")
    if spec is not None and isinstance(states, list) and states and isinstance(states[0], dict):
        spec["avg_spec_accept_length"] = states[0].get("avg_spec_accept_length")
    return ServerIdentity(
        url=base, kind="sglang", model=model or info.get("served_model_name") or info.get("model_path"),
        speculative=spec, max_running_requests=_sglang_cap(info, metrics),
        version=str(info["version"]) if info.get("version") is not None else None,
        context_tokens=_count(info.get("context_length")),
    )


def _count(value: Any) -> int | None:
    """A positive whole number (an int, or a float gauge value such as 48.0), else None."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != value or value < 1:
        return None
    return int(value) if float(value).is_integer() else None


def _sglang_cap(info: dict[str, Any], metrics: str | None) -> int | None:
    """SGLang's cap on running requests in force, whole server. First found wins:

    1. the gauge ``sglang:max_running_requests`` (old releases, and the newest, one series per DP rank), its
       series combined as every server metric is (summed over DP ranks, a TP rank's copy counted once);
    2. ``internal_states[*].effective_max_running_requests_per_dp``: the scheduler's cap after SGLang resolved it
       (lowered for memory, or chosen when no flag was given); one state per DP rank is summed, a single state
       of a ``dp_size`` > 1 server is multiplied by ``dp_size``;
    3. the top-level ``max_running_requests``: the ``--max-running-requests`` flag as given (null without it, the
       requested value where SGLang lowered it), kept for releases that report nothing else.
    """
    if metrics:
        try:
            gauge = _count(parse_metrics(metrics, 0.0)["values"].get("max_running"))
        except MetricsParseError:
            gauge = None
        if gauge is not None:
            return gauge
    states = info.get("internal_states")
    per_dp = [_count(s.get("effective_max_running_requests_per_dp")) for s in states if isinstance(s, dict)] \
        if isinstance(states, list) else []
    known = [v for v in per_dp if v is not None]
    if known:
        dp = _count(info.get("dp_size")) or 1
        return sum(known) if len(known) == dp else known[0] * dp
    return _count(info.get("max_running_requests"))


def _spec_types(params: dict[str, Any]) -> list[str]:
    """llama.cpp's ``speculative.types`` ("none,draft-simple"), or older builds' single ``speculative.type``,
    without the "none" entry."""
    value = params.get("speculative.types", params.get("speculative.type"))
    if not isinstance(value, str):
        return []
    return [t.strip() for t in value.split(",") if t.strip() and t.strip() != "none"]


def _from_llamacpp(base: str, props: dict[str, Any], model: str | None, slots: Any = None) -> ServerIdentity:
    """llama.cpp's identity. Speculation is read, first found wins, from:

    1. ``/slots``: every slot carries ``"speculative": true/false`` (the draft is loaded and a speculative type is
       set); a slot that has served a request also has ``params["speculative.types"]`` ("none,draft-simple");
    2. ``/props`` ``default_generation_settings``: older builds copy a slot there, ``speculative`` included;
    3. a speculative type other than "none" in ``/props`` params (0.3.36's build says "none" even with a draft,
       so "none" there proves nothing).

    Without ``/slots`` (``--no-slots``) and with a build like 0.3.36, a speculative server is reported as not
    speculative; the comparison then warns ``spec_not_speculative``.
    """
    settings = props.get("default_generation_settings")
    settings = settings if isinstance(settings, dict) else {}
    params = settings.get("params")
    params = params if isinstance(params, dict) else {}
    slot_list = [s for s in slots if isinstance(s, dict)] if isinstance(slots, list) else []
    flags = [s["speculative"] for s in slot_list if isinstance(s.get("speculative"), bool)]
    used = [s["params"] for s in slot_list if isinstance(s.get("params"), dict)]
    if flags:
        speculative, source = any(flags), "slots"
    elif isinstance(settings.get("speculative"), bool):
        speculative, source = settings["speculative"], "props"
    else:
        speculative, source = bool(_spec_types(params)), "props"
    spec = None
    if speculative:
        # Settings of a slot that has served a request are the real ones; /props may say types "none".
        with_types = [p for p in used if _spec_types(p)]
        chosen = with_types[0] if with_types else params
        spec = {k.removeprefix("speculative."): v for k, v in chosen.items() if k.startswith("speculative.")}
        types = _spec_types(chosen)
        if not types:
            spec.pop("types", None)
            spec.pop("type", None)
        spec["algorithm"] = types[-1] if types else spec.get("type") or "draft"
        spec["source"] = source
        if flags:
            spec["speculative_slots"] = sum(flags)
    slot_count = props.get("total_slots")
    if not isinstance(slot_count, int) and slot_list:
        slot_count = len(slot_list)
    build = props.get("build_info")
    return ServerIdentity(
        url=base, kind="llamacpp", model=model or props.get("model_path"), speculative=spec,
        max_running_requests=slot_count if isinstance(slot_count, int) else None,
        version=str(build) if build is not None else None,
        context_tokens=_count(settings.get("n_ctx")),
    )

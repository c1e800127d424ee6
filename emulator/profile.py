"""Emulator profiles: the YAML files in ``config/emulator/`` turned into frozen, validated objects.

A profile is the whole cost model of one emulated server. Every mistake in a file is reported as a
``ProfileError`` whose one-line message names the file and the offending key, so the CLI can print it
instead of a traceback. Times in a profile are at ``speed`` 1; ``Profile.scale`` converts them.
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from specbench.config import data_path
from specbench.config.yamlload import YamlInputError, load_yaml

from .depthschedule import DepthScheduleError, check_schedule, depth_at
from .divergence import Divergence, parse_divergence
from .textmodel import acceptance_alpha
from .vintage import DEFAULT_VINTAGE, VINTAGES, Vintage

__all__ = [
    "PROFILE_DIR",
    "Faults",
    "Profile",
    "ProfileError",
    "Speculative",
    "available_profiles",
    "load_profile",
    "with_depth",
]

#: The built-in profiles: ``config/emulator/`` in a checkout, the same files inside an installed wheel.
PROFILE_DIR = data_path("emulator")
_MAX_BASE_DEPTH = 5


class ProfileError(ValueError):
    """A profile file or dict is invalid; the message is one line naming the source and the key."""

    def __init__(self, source: str, key: str, problem: str) -> None:
        self.source, self.key, self.problem = source, key, problem
        super().__init__(f"{source}: key '{key}': {problem}" if key else f"{source}: {problem}")


@dataclass(frozen=True)
class Speculative:
    """EAGLE-style speculation: every step drafts ``num_steps`` tokens and verifies them in one pass.

    Each prompt gets a per-draft acceptance probability ``alpha`` drawn deterministically from its text,
    uniformly in ``[alpha_min, alpha_max]``, unless ``pinned_alpha`` names the prompt (exact key) or a
    ``text_alpha`` rule ``(contains, lo, hi)`` matches it (the first whose string occurs in the key draws in
    ``[lo, hi]``: the kind of text); a step accepts the longest accepted prefix of the drafts.
    """

    algorithm: str
    draft_model_path: str | None
    num_steps: int
    eagle_topk: int
    num_draft_tokens: int
    step_a_ms: float
    step_b_ms: float
    alpha_min: float
    alpha_max: float
    pinned_alpha: tuple[tuple[str, float], ...] = ()
    text_alpha: tuple[tuple[str, float, float], ...] = ()  # acceptance.by_text: (contains, alpha_min, alpha_max)
    # Acceptance that falls with load (a draft that degrades in big batches): alpha * 2**(-(B-1)/halving_batch)
    # in a step of B running requests; None keeps alpha independent of the batch (the closed-form cost model).
    halving_batch: float | None = None
    # n-gram style drafting: a decode step proposes nothing with this probability (no match to copy from) and is
    # a plain target pass of one token, which vLLM leaves out of num_spec_steps and num_drafts.
    no_draft_share: float = 0.0
    # The cost of depth (specbench tune): one draft token more per step adds ``draft_a_ms`` to the step and
    # ``draft_b_ms`` per running request, so a step at depth K lasts step_a_ms + (K - num_steps) * draft_a_ms +
    # B * (step_b_ms + (K - num_steps) * draft_b_ms): ``step_*_ms`` stay the cost at the configured depth.
    draft_a_ms: float = 0.0
    draft_b_ms: float = 0.0
    # A per-batch-size depth (vLLM's num_speculative_tokens_per_batch_size): (start, end, K) ranges by vLLM's rules
    # (``emulator.depthschedule``: a gap takes the previous K, beyond the last range its K). K = 0: a plain target
    # pass.
    k_schedule: tuple[tuple[int, int, int], ...] = ()

    def alpha_for(self, key: str) -> float:
        """The per-draft acceptance of a prompt key (``textmodel.prompt_key``): pinned, else by text, else the range."""
        return acceptance_alpha(key, self.alpha_min, self.alpha_max, self.pinned_alpha, self.text_alpha)

    def depth_for_batch(self, batch: int) -> int:
        """Draft tokens per request in a step of ``batch`` running requests."""
        return depth_at(self.k_schedule, batch, self.num_steps)

    def step_coefficients(self, depth: int) -> tuple[float, float]:
        """(a, b) in ms of a step at ``depth`` draft tokens: a + b * batch."""
        extra = depth - self.num_steps
        return self.step_a_ms + extra * self.draft_a_ms, self.step_b_ms + extra * self.draft_b_ms


@dataclass(frozen=True)
class Faults:
    """Fractions of requests that get each fault; at most one fault per request, chosen from ``seed``."""

    seed: int = 0
    error_503: float = 0.0
    error_500: float = 0.0
    error_429: float = 0.0
    cut_stream: float = 0.0
    malformed_chunk: float = 0.0
    stream_error: float = 0.0
    abort: float = 0.0
    stall: float = 0.0
    stall_s: float = 2.0

    def kinds(self) -> list[tuple[str, float]]:
        """Fault names with their fractions, in the fixed order used for deterministic selection."""
        return [
            ("error_503", self.error_503),
            ("error_500", self.error_500),
            ("error_429", self.error_429),
            ("cut_stream", self.cut_stream),
            ("malformed_chunk", self.malformed_chunk),
            ("stream_error", self.stream_error),
            ("stall", self.stall),
            ("abort", self.abort),
        ]


@dataclass(frozen=True)
class Profile:
    """One emulated server. ``step_*_ms`` and ``prefill_ms_per_token`` are at speed 1."""

    name: str
    source: str
    description: str
    served_model_name: str
    model_path: str
    version: str
    context_length: int
    max_running_requests: int  # the cap in force (SGLang's effective cap: after lowering it for memory)
    max_queued_requests: int | None  # waiting requests at most (SGLang's --max-queued-requests); beyond: refused
    step_a_ms: float
    step_b_ms: float
    prefill_ms_per_token: float
    chars_per_token: float
    answer_min_tokens: int
    answer_max_tokens: int
    eos_token_id: int
    speculative: Speculative | None
    faults: Faults = field(default_factory=Faults)
    startup_delay_s: float = 0.0
    health_probe_s: float = 1.0
    speed: float = 1.0
    drift_per_min: float = 0.0  # relative speed change per minute of wall time since start (emulator.drift)
    seed: int = 0
    prefix_cache: bool = False
    ledger_text: bool = False  # ledger entries carry the prompt and answer text (tests of multi-turn runs)
    ledger_chunk_times: bool = False  # ledger entries carry each chunk's write time (exact per-window truth)
    metrics_interval_steps: int = 40
    max_catchup_ms: float = 250.0
    vintage: str = DEFAULT_VINTAGE  # the server release imitated on the wire (emulator.vintage)
    divergence: Divergence = field(default_factory=Divergence)  # lossy / batch-variant answers (emulator.divergence)
    # What ``--max-running-requests`` said at launch, shown as /server_info's top-level ``max_running_requests``:
    # None, the flag was not given (SGLang then shows null); above ``max_running_requests``, the server lowered it.
    max_running_requests_flag: int | None = None
    refuse_status: int = 503  # a full queue's answer: 503 (the servers themselves) or 429 (a router or gateway)
    retry_after_s: float | None = None  # a full queue's Retry-After header in seconds; None: none sent (as vLLM)

    @property
    def scale(self) -> float:
        """Multiply a speed-1 time by this to get the emulator's real time."""
        return 1.0 / self.speed

    @property
    def max_total_num_tokens(self) -> int:
        """KV-cache capacity in tokens (SGLang's ``max_total_num_tokens``): four full contexts."""
        return self.context_length * 4

    @property
    def is_speculative(self) -> bool:
        return self.speculative is not None

    @property
    def wire(self) -> Vintage:
        """The wire format (``vintage``) as an object."""
        return VINTAGES[self.vintage]


def with_depth(profile: Profile, depth: int, schedule: tuple[tuple[int, int, int], ...] = ()) -> Profile:
    """The same server launched with ``depth`` draft tokens per step (and an optional per-batch-size schedule):
    step costs re-anchored at that depth, the cost per draft token kept. Raises ProfileError on a bad depth."""
    spec = profile.speculative
    if spec is None:
        raise ProfileError(profile.source, "speculative", "this profile does not speculate, so it has no depth")
    if depth < 0 or (depth == 0 and not schedule):
        raise ProfileError(profile.source, "speculative.num_steps", f"a depth must be >= 1, got {depth}")
    deepest = max((k for _, _, k in schedule), default=0)
    if deepest > depth:
        raise ProfileError(profile.source, "speculative.k_schedule",
                           f"a depth of {deepest} is more than the {depth} draft tokens the server was given")
    a_ms, b_ms = spec.step_coefficients(depth)
    if a_ms <= 0 or b_ms < 0:
        raise ProfileError(profile.source, "speculative.draft_a_ms", f"a step at depth {depth} would cost nothing")
    topk_tokens = depth + 1 if spec.eagle_topk == 1 else max(spec.num_draft_tokens, depth + 1)
    return replace(profile, speculative=replace(spec, num_steps=depth, num_draft_tokens=topk_tokens, step_a_ms=a_ms,
                                                step_b_ms=b_ms, k_schedule=schedule))


# ---------------------------------------------------------------- loading


def available_profiles() -> list[str]:
    """Names of the built-in profiles (``config/emulator/*.yaml``)."""
    return sorted(p.stem for p in PROFILE_DIR.glob("*.yaml"))


def load_profile(
    profile: str | Path | dict[str, Any] = "baseline",
    *,
    speed: float | None = None,
    overrides: dict[str, Any] | None = None,
) -> Profile:
    """Resolve a built-in name, a YAML path or a dict into a validated ``Profile``.

    ``overrides`` is deep-merged over the file (dotted keys such as ``"faults.error_503"`` allowed);
    ``speed`` wins over both.
    """
    raw, source, name = _read_source(profile, depth=0)
    if overrides:
        raw = _deep_merge(raw, _expand_dotted(overrides))
        source += " (with overrides)"
    if speed is not None:
        raw["speed"] = speed
    return _build(raw, source, name)


def _read_source(profile: str | Path | dict[str, Any], depth: int) -> tuple[dict[str, Any], str, str]:
    if isinstance(profile, dict):
        raw, source, name = copy.deepcopy(profile), "<dict>", str(profile.get("name", "custom"))
    else:
        path = _locate(profile)
        source, name = str(path), path.stem
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as exc:
            raise ProfileError(source, "", f"cannot read file ({exc.strerror})") from None
        except UnicodeDecodeError:
            raise ProfileError(source, "", "cannot read file (not UTF-8 text)") from None
        try:
            raw = load_yaml(text)
        except YamlInputError as exc:  # aliases, duplicate keys, NaN/infinities and broken YAML alike
            raise ProfileError(source, "", str(exc)) from None
        if raw is None:
            raw = {}
        if not isinstance(raw, dict):
            raise ProfileError(source, "", "top level must be a mapping")
    base = raw.pop("base", None)
    if base is not None:
        if depth >= _MAX_BASE_DEPTH or not isinstance(base, str):
            raise ProfileError(source, "base", "must name another profile (at most 5 levels deep)")
        base_raw, _, _ = _read_source(base, depth + 1)
        base_raw.pop("name", None)
        raw = _deep_merge(base_raw, raw)
    return raw, source, str(raw.pop("name", name))


def _locate(profile: str | Path) -> Path:
    text = str(profile)
    if text.endswith((".yaml", ".yml")) or "/" in text or "\\" in text:
        return Path(text)
    path = PROFILE_DIR / f"{text}.yaml"
    if not path.exists():
        known = ", ".join(available_profiles()) or "none"
        raise ProfileError(str(path), "", f"no built-in profile named '{text}' (known: {known})")
    return path


def _expand_dotted(overrides: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in overrides.items():
        parts = str(key).split(".")
        node = out
        for part in parts[:-1]:
            node = node.setdefault(part, {})
        node[parts[-1]] = _expand_dotted(value) if isinstance(value, dict) else value
    return out


def _deep_merge(base: dict[str, Any], top: dict[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(base)
    for key, value in top.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = _deep_merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


# ---------------------------------------------------------------- validation


class _Reader:
    """Pops typed values from a raw mapping, naming ``prefix.key`` in every error."""

    def __init__(self, raw: Any, source: str, prefix: str) -> None:
        if not isinstance(raw, dict):
            raise ProfileError(source, prefix, "must be a mapping")
        self.raw, self.source, self.prefix = dict(raw), source, prefix

    def _key(self, key: str) -> str:
        return f"{self.prefix}.{key}" if self.prefix else key

    def _fail(self, key: str, problem: str) -> ProfileError:
        return ProfileError(self.source, self._key(key), problem)

    def number(self, key: str, default: float | None = None, *, lo: float = 0.0, lo_open: bool = False,
               hi: float = math.inf) -> float:
        value = self.raw.pop(key, default)
        if value is None:
            raise self._fail(key, "is required")
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise self._fail(key, f"expected a number, got {value!r}")
        if value < lo or (lo_open and value == lo) or value > hi:
            bound = f"> {lo}" if lo_open else f">= {lo}"
            raise self._fail(key, f"must be {bound}" + (f" and <= {hi}" if hi != math.inf else ""))
        return float(value)

    def integer(self, key: str, default: int | None = None, *, lo: int = 0) -> int:
        value = self.raw.pop(key, default)
        if value is None:
            raise self._fail(key, "is required")
        if isinstance(value, bool) or not isinstance(value, int):
            raise self._fail(key, f"expected an integer, got {value!r}")
        if value < lo:
            raise self._fail(key, f"must be >= {lo}")
        return value

    def optional_integer(self, key: str, *, lo: int = 0) -> int | None:
        if self.raw.get(key) is None:
            self.raw.pop(key, None)
            return None
        return self.integer(key, lo=lo)

    def optional_number(self, key: str, *, lo: float = 0.0) -> float | None:
        if self.raw.get(key) is None:
            self.raw.pop(key, None)
            return None
        return self.number(key, lo=lo)

    def text(self, key: str, default: str | None = None) -> str:
        value = self.raw.pop(key, default)
        if value is None:
            raise self._fail(key, "is required")
        if isinstance(value, bool) or not isinstance(value, (str, int, float)):
            raise self._fail(key, f"expected a string, got {value!r}")
        return str(value)

    def flag(self, key: str, default: bool) -> bool:
        value = self.raw.pop(key, default)
        if not isinstance(value, bool):
            raise self._fail(key, f"expected true or false, got {value!r}")
        return value

    def sub(self, key: str) -> _Reader | None:
        value = self.raw.pop(key, None)
        return None if value is None else _Reader(value, self.source, self._key(key))

    def finish(self) -> None:
        if self.raw:
            key = sorted(map(str, self.raw))[0]
            raise self._fail(key, "unknown key")


def _build(raw: dict[str, Any], source: str, name: str) -> Profile:
    r = _Reader(raw, source, "")
    answer = r.sub("answer_tokens") or _Reader({}, source, "answer_tokens")
    answer_min = answer.integer("min", 64, lo=1)
    answer_max = answer.integer("max", 1024, lo=1)
    answer.finish()
    if answer_max < answer_min:
        raise ProfileError(source, "answer_tokens.max", "must be >= answer_tokens.min")
    spec_reader = r.sub("speculative")
    faults_reader = r.sub("faults")
    profile = Profile(
        name=name,
        source=source,
        description=r.text("description", ""),
        served_model_name=r.text("served_model_name", "default"),
        model_path=r.text("model_path", "emulated/model"),
        version=r.text("version", "0.5.23"),
        context_length=r.integer("context_length", 131072, lo=16),
        max_running_requests=r.integer("max_running_requests", lo=1),
        max_queued_requests=r.optional_integer("max_queued_requests", lo=1),
        step_a_ms=r.number("step_a_ms", lo=0.0, lo_open=True),
        step_b_ms=r.number("step_b_ms", lo=0.0),
        prefill_ms_per_token=r.number("prefill_ms_per_token", 0.0),
        chars_per_token=r.number("chars_per_token", 4.0, lo=0.0, lo_open=True),
        answer_min_tokens=answer_min,
        answer_max_tokens=answer_max,
        eos_token_id=r.integer("eos_token_id", 2),
        speculative=_build_speculative(spec_reader) if spec_reader else None,
        faults=_build_faults(faults_reader) if faults_reader else Faults(),
        startup_delay_s=r.number("startup_delay_s", 0.0),
        health_probe_s=r.number("health_probe_s", 1.0),
        speed=r.number("speed", 1.0, lo=0.0, lo_open=True),
        drift_per_min=r.number("drift_per_min", 0.0, lo=-math.inf),
        seed=r.integer("seed", 0),
        prefix_cache=r.flag("prefix_cache", False),
        ledger_text=r.flag("ledger_text", False),
        ledger_chunk_times=r.flag("ledger_chunk_times", False),
        metrics_interval_steps=r.integer("metrics_interval_steps", 40, lo=1),
        max_catchup_ms=r.number("max_catchup_ms", 250.0, lo=0.0, lo_open=True),
        vintage=r.text("vintage", DEFAULT_VINTAGE),
        divergence=parse_divergence(r.sub("lossy"), r.sub("batch_variance")),
        max_running_requests_flag=_cap_flag(r),
        refuse_status=r.integer("refuse_status", 503, lo=100),
        retry_after_s=r.optional_number("retry_after_s"),
    )
    r.finish()
    flag = profile.max_running_requests_flag
    if flag is not None and flag < profile.max_running_requests:
        raise ProfileError(source, "max_running_requests_flag", "must be >= max_running_requests (a server lowers "
                           "the cap it was given, never raises it)")
    if "max_running_requests_flag" not in raw:
        profile = replace(profile, max_running_requests_flag=profile.max_running_requests)
    if profile.refuse_status not in (429, 503):
        raise ProfileError(source, "refuse_status", "must be 429 or 503")
    if profile.vintage not in VINTAGES:
        raise ProfileError(source, "vintage", f"unknown vintage {profile.vintage!r} (known: {', '.join(VINTAGES)})")
    return profile


def _cap_flag(r: _Reader) -> int | None:
    """``max_running_requests_flag``: absent, the flag gave the cap in force (filled in by ``_build``); null, no
    flag was given."""
    return r.optional_integer("max_running_requests_flag", lo=1)


def _build_speculative(r: _Reader) -> Speculative:
    accept = r.sub("acceptance")
    if accept is None:
        raise ProfileError(r.source, f"{r.prefix}.acceptance", "is required")
    alpha_min = accept.number("alpha_min", hi=1.0)
    alpha_max = accept.number("alpha_max", hi=1.0)
    halving = accept.number("halving_batch", lo=0.0, lo_open=True) if accept.raw.get("halving_batch") is not None \
        else accept.raw.pop("halving_batch", None)
    pinned_reader = accept.sub("pinned")
    pinned: list[tuple[str, float]] = []
    if pinned_reader is not None:
        for key in list(pinned_reader.raw):
            pinned.append((str(key), pinned_reader.number(key, hi=1.0)))
    rules = _text_rules(accept)
    accept.finish()
    if alpha_max < alpha_min:
        raise ProfileError(r.source, f"{r.prefix}.acceptance.alpha_max", "must be >= alpha_min")
    spec = Speculative(
        algorithm=r.text("algorithm", "EAGLE3"),
        draft_model_path=r.text("draft_model_path", "emulated/draft"),
        num_steps=r.integer("num_steps", 3, lo=1),
        eagle_topk=r.integer("eagle_topk", 1, lo=1),
        num_draft_tokens=r.integer("num_draft_tokens", 4, lo=2),
        step_a_ms=r.number("step_a_ms", lo=0.0, lo_open=True),
        step_b_ms=r.number("step_b_ms", lo=0.0),
        alpha_min=alpha_min,
        alpha_max=alpha_max,
        pinned_alpha=tuple(pinned),
        text_alpha=rules,
        halving_batch=halving,
        no_draft_share=r.number("no_draft_share", 0.0, hi=1.0),
        draft_a_ms=r.number("draft_a_ms", 0.0),
        draft_b_ms=r.number("draft_b_ms", 0.0),
        k_schedule=_k_schedule(r),
    )
    r.finish()
    if spec.eagle_topk == 1 and spec.num_draft_tokens != spec.num_steps + 1:
        raise ProfileError(r.source, f"{r.prefix}.num_draft_tokens", "must be num_steps + 1 when eagle_topk is 1")
    if spec.num_draft_tokens < spec.num_steps + 1:
        raise ProfileError(r.source, f"{r.prefix}.num_draft_tokens", "must be >= num_steps + 1")
    deepest = max((depth for _, _, depth in spec.k_schedule), default=0)
    if deepest > spec.num_steps:
        raise ProfileError(r.source, f"{r.prefix}.k_schedule", f"a depth of {deepest} is more than num_steps "
                           f"({spec.num_steps}), the most a step drafts")
    if spec.step_coefficients(0)[0] <= 0 or spec.step_coefficients(0)[1] < 0:
        raise ProfileError(r.source, f"{r.prefix}.draft_a_ms", "a step at depth 0 would cost nothing or less: "
                           "draft_a_ms * num_steps must stay below step_a_ms (draft_b_ms likewise)")
    return spec


def _text_rules(accept: _Reader) -> tuple[tuple[str, float, float], ...]:
    """``acceptance.by_text``: ordered rules ``{contains, alpha_min, alpha_max}``; the first that matches wins."""
    raw = accept.raw.pop("by_text", None)
    key = accept._key("by_text")
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise ProfileError(accept.source, key, f"expected a list of {{contains, alpha_min, alpha_max}}, got {raw!r}")
    rules = []
    for index, item in enumerate(raw):
        rule = _Reader(item, accept.source, f"{key}[{index}]")
        contains = rule.raw.get("contains")
        if not isinstance(contains, str) or not contains:
            raise rule._fail("contains", f"expected a non-empty string, got {contains!r}")
        rule.raw.pop("contains")
        lo, hi = rule.number("alpha_min", hi=1.0), rule.number("alpha_max", hi=1.0)
        rule.finish()
        if hi < lo:
            raise rule._fail("alpha_max", "must be >= alpha_min")
        rules.append((contains, lo, hi))
    return tuple(rules)


def _k_schedule(r: _Reader) -> tuple[tuple[int, int, int], ...]:
    """``k_schedule``: checked by the rules vLLM applies to num_speculative_tokens_per_batch_size."""
    raw = r.raw.pop("k_schedule", None)
    if raw is None:
        return ()
    try:
        return check_schedule(raw)
    except DepthScheduleError as exc:
        raise ProfileError(r.source, f"{r.prefix}.k_schedule", str(exc)) from None


def _build_faults(r: _Reader) -> Faults:
    fractions = {kind: r.number(kind, 0.0, hi=1.0) for kind, _ in Faults().kinds()}
    faults = Faults(seed=r.integer("seed", 0), stall_s=r.number("stall_s", 2.0), **fractions)
    r.finish()
    if sum(fractions.values()) > 1.0 + 1e-9:
        raise ProfileError(r.source, r.prefix, "fault fractions add up to more than 1")
    return faults

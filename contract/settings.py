"""The suite's options: one table feeds Locust's parser (CLI and web UI), the YAML profile and validation.

Precedence: a value given on the command line wins; else the YAML profile (``--suite-config``); else the
default here. In the web UI, values edited in the form win over both. Bad values raise ``SettingsError``
whose message names the source (file and key, or flag) and what was expected.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import re
import time
import weakref
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from contract.lengths import LengthError, parse_length, parse_shared_prefix
from contract.limits import LIMITS, LimitError, check_limit, check_processes, check_scale, load_processes
from contract.policy import DEFAULT_LADDER
from contract.schema import APIS
from contract.slo import SloError, parse_rates, parse_slo

LOAD_MODES: tuple[str, ...] = ("ladder", "users")


@dataclass(frozen=True)
class Option:
    """One suite option: CLI flag ``--name``, YAML key ``name`` (dashes or underscores), attribute ``dest``."""

    name: str
    default: Any
    help: str
    choices: tuple[str, ...] | None = None
    in_web_ui: bool = True

    @property
    def dest(self) -> str:
        return self.name.replace("-", "_")


OPTIONS: tuple[Option, ...] = (
    Option("api", "auto", "API: auto (SGLang /generate when /server_info says SGLang, else chat), generate, "
           "chat or completions", choices=("auto", *APIS)),
    Option("max-tokens", 512, "output tokens asked for per request"),
    Option("ignore-eos", True, "ask the server to ignore EOS so every request yields exactly max-tokens"),
    Option("temperature", 0.0, "sampling temperature"),
    Option("prompts", "diverse", "built-in prompt set name (config/prompts/NAME.jsonl) or a JSONL/ShareGPT file"),
    Option("prompt-mode", "diverse", "diverse: seeded shuffle of the set; fixed: one prompt repeated",
           choices=("diverse", "fixed")),
    Option("prompt-id", "", "with --prompt-mode fixed: the prompt id to repeat (default: the first in order)"),
    Option("seed", 0, "seed of the prompt order"),
    Option("label", "run", "run label written into every record (e.g. baseline, eagle3)"),
    Option("out", "", "run directory (default runs/LABEL-YYYYmmdd-HHMMSS)", in_web_ui=False),
    Option("model", "", "model name for the OpenAI routes (default: the first of the server's /v1/models)"),
    Option("api-key-env", "", "name of the environment variable holding the API key (never the key itself)"),
    Option("connect-timeout", 10.0, "seconds to connect"),
    Option("read-timeout", 120.0, "seconds a stream may stay silent before it counts as a timeout"),
    Option("request-timeout", 900.0, "seconds a whole request may take before it counts as a timeout"),
    Option("load-mode", "ladder", "ladder: walk the --ladder levels (the Users field is not used); users: hold "
           "Locust's number of users as one measured step, for Run time if set, else until Stop",
           choices=LOAD_MODES),
    Option("ladder", ",".join(map(str, DEFAULT_LADDER)), "concurrency levels of the ladder, comma-separated"),
    Option("warmup-time", 0.0, "warm-up seconds per step; 0: until every user has finished one request or the "
           "requests in flight have stayed at C for a while (see README)"),
    Option("min-requests", 0, "requests each step must measure; 0: 30 with --step-ci, else max(30, 3*C)"),
    Option("min-step-time", 10.0, "minimum seconds of measured window per step"),
    Option("max-step-time", 600.0, "maximum seconds per step, warm-up included"),
    Option("step-ci", 0.03, "end a step once its throughput's 95%% CI half-width is below this "
           "fraction (0: off; then steps end on --min-requests and --min-step-time)"),
    Option("time-budget", "", "wall time for the whole ladder, e.g. 30m, 1h30m, 900s (specbench compare: "
           "for both runs); steps share it, unused time passes on"),
    Option("server-metrics", True, "sample the server's /metrics during the run into server_metrics.jsonl "
           "(--no-server-metrics: off)"),
    Option("check-output", False, "at temperature 0 keep each answer's identity (token ids, else text): a digest "
           "in the record, the answer in answers.jsonl, for the comparison's output-equivalence check (specbench "
           "compare|sweep|demo: on unless --no-check-output)"),
    Option("server-metrics-interval", 1.0, "seconds between two reads of the server's /metrics"),
    Option("max-error-rate", 0.05, "a step whose failed share of requests is above this fraction fails the run "
           "(exit 3) and gets no verdict in a comparison"),
    Option("overwrite", False, "reuse a non-empty --out run directory (its old run files are removed first)",
           in_web_ui=False),
    Option("allow-host-change", False, "let the web UI's start form change the host while an API key is in use",
           in_web_ui=False),
    Option("rate-ladder", "", "open loop: request rates (requests/s) to walk instead of --ladder, "
           "comma-separated, e.g. 0.5,1,2,4"),
    Option("arrivals", "poisson", "open loop: poisson (seeded exponential gaps) or constant (even gaps)",
           choices=("poisson", "constant")),
    Option("max-in-flight", 256, "open loop: most requests in flight per run; a request due when all are busy "
           "is dropped, counted and flagged"),
    Option("slo", "", "latency targets for SLO attainment and goodput, e.g. ttft=2s,tpot=50ms "
           "(keys ttft, tpot, e2e, itl_p99)"),
    Option("input-len", "", "prompt length in tokens per request: fixed:N, uniform:A-B, normal:MEAN,SD, or "
           "dataset (as the prompt file has it; the default): prompts are padded with, or cut to, real text"),
    Option("output-len", "", "output tokens per request: fixed:N, uniform:A-B or normal:MEAN,SD (default: "
           "--max-tokens for every request); exact with --ignore-eos"),
    Option("shared-prefix", "", "N:LEN: N shared system prompts of about LEN tokens of real text, each request "
           "drawn to one (exercises the server's prefix cache)"),
    Option("multi-turn", 1, "turns per conversation: each user holds one conversation at a time and resends the "
           "server's actual answers with a follow-up question (1: single requests)"),
    Option("emulator-profile", "baseline", "with no --host: built-in emulator profile to start", in_web_ui=False),
    Option("emulator-speed", 1.0, "with no --host: time scale of the built-in emulator", in_web_ui=False),
    Option("suite-config", "", "YAML profile setting any of these options (command line wins)",
           in_web_ui=False),
    Option("console", "locust", "terminal output: locust (Locust's own), progress (the suite's lines only; "
           "Locust's log and tables go to --logfile), all (everything, and --logfile too)",
           choices=("locust", "progress", "all"), in_web_ui=False),
    # crossover refinement (#27)
    Option("stop-after-saturation", -1, "skip the ladder's levels more than N levels beyond the level where "
           "throughput stopped rising while TTFT grew (specbench compare: beyond a saturation every server "
           "shows; levels stay paired); negative: off"),
)
_BY_DEST = {opt.dest: opt for opt in OPTIONS}


def option_default(dest: str) -> Any:
    """The default of an option, by attribute name: the one place defaults are written down."""
    return _BY_DEST[dest].default


class SettingsError(ValueError):
    """A user mistake in options or the YAML profile; the message says where and what was expected."""


def add_arguments(parser: Any) -> None:
    """Register every option on Locust's parser (its own add_argument knows include_in_web_ui)."""
    for opt in OPTIONS:
        kwargs: dict[str, Any] = {"default": opt.default, "help": opt.help, "dest": opt.dest}
        if isinstance(opt.default, bool):
            kwargs["action"] = argparse.BooleanOptionalAction
        else:
            kwargs["type"] = type(opt.default)
        if opt.choices:
            kwargs["choices"] = opt.choices
        if not opt.in_web_ui:
            kwargs["include_in_web_ui"] = False
        parser.add_argument(f"--{opt.name}", **kwargs)


def explicit_dests(argv: list[str]) -> set[str]:
    """Options given on the command line (so a YAML profile must not override them)."""
    found: set[str] = set()
    for arg in argv:
        if not arg.startswith("--"):
            continue
        name = arg[2:].split("=", 1)[0]
        if name.startswith("no-") and name[3:].replace("-", "_") in _BY_DEST:
            name = name[3:]
        dest = name.replace("-", "_")
        if dest in _BY_DEST:
            found.add(dest)
    return found


def load_profile(path: str) -> dict[str, Any]:
    """Read a YAML suite profile into {dest: value}, checking keys and types against OPTIONS."""
    file = Path(path)
    if not file.is_file():
        raise SettingsError(f"{path}: suite config file not found")
    try:
        data = yaml.safe_load(file.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" line {mark.line + 1}" if mark is not None else ""
        raise SettingsError(f"{path}:{where} not valid YAML ({getattr(exc, 'problem', exc)})") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise SettingsError(f"{path}: expected a mapping of option names to values at the top level")
    values: dict[str, Any] = {}
    for key, value in data.items():
        dest = str(key).replace("-", "_")
        opt = _BY_DEST.get(dest)
        if opt is None or dest == "suite_config":
            known = ", ".join(o.name for o in OPTIONS if o.dest != "suite_config")
            raise SettingsError(f"{path}: unknown key '{key}'; expected one of: {known}")
        values[dest] = _coerce(opt, value, f"{path}: key '{key}'")
    return values


def _coerce(opt: Option, value: Any, where: str) -> Any:
    if opt.dest in ("ladder", "rate_ladder") and isinstance(value, list):
        value = ",".join(str(v) for v in value)
    expected = type(opt.default)
    if expected is bool:
        if not isinstance(value, bool):
            raise SettingsError(f"{where}: expected true or false, got {value!r}")
    elif expected is float:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise SettingsError(f"{where}: expected a number, got {value!r}")
        value = float(value)
    elif expected is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise SettingsError(f"{where}: expected a whole number, got {value!r}")
    else:
        value = str(value)
    if opt.choices and value not in opt.choices:
        raise SettingsError(f"{where}: expected one of {', '.join(opt.choices)}, got {value!r}")
    return value



def apply_profile(options: Any, argv: list[str]) -> None:
    """Fill ``options`` (Locust's parsed_options) from its --suite-config, leaving CLI-given values alone."""
    path = getattr(options, "suite_config", "")
    if not path:
        return
    given = explicit_dests(argv)
    sources: dict[str, str] = {}
    for dest, value in load_profile(path).items():
        if dest not in given:
            setattr(options, dest, value)
            sources[f"--{_BY_DEST[dest].name}:"] = f"{path}: key '{_BY_DEST[dest].name}':"
    options.specbench_profile_sources = sources  # so a bad value is reported where it was written


def _where(options: Any, exc: SettingsError) -> SettingsError:
    """Name the profile file and key instead of the flag when the bad value came from the profile."""
    text = str(exc)
    for flag, where in (getattr(options, "specbench_profile_sources", None) or {}).items():
        if text.startswith(flag):
            return SettingsError(where + text[len(flag):])
    return exc


_DURATION_UNITS = {"h": 3600.0, "m": 60.0, "s": 1.0}


def parse_duration(text: str, where: str = "--time-budget") -> float:
    """'30m', '1h30m', '90s', '1.5h' or plain seconds '900' -> seconds (> 0); else a SettingsError naming ``where``."""
    raw = str(text).strip().lower()
    expected = f"{where}: expected a duration such as 30m, 1h30m or 900s"
    if not raw:
        raise SettingsError(f"{expected}, got an empty value")
    if re.fullmatch(r"\d+(?:\.\d+)?", raw):
        seconds = float(raw)
    else:
        parts = re.findall(r"(\d+(?:\.\d+)?)([hms])", raw)
        if not parts or "".join(n + u for n, u in parts) != raw:
            raise SettingsError(f"{expected}, got {text!r}")
        seconds = sum(float(n) * _DURATION_UNITS[u] for n, u in parts)
    if seconds <= 0:
        raise SettingsError(f"{where}: expected a positive duration, got {text!r}")
    return seconds


def parse_ladder(text: str, where: str = "--ladder") -> list[int]:
    """'1,2,5' -> [1, 2, 5]; every level a positive whole number."""
    levels: list[int] = []
    expected = "expected comma-separated positive whole numbers, each level once (e.g. 1,2,5)"
    parts = [p.strip() for p in str(text).split(",")]
    if parts and not parts[-1] and len(parts) > 1:
        parts.pop()  # one trailing comma is harmless
    for part in parts:
        if not part:
            raise SettingsError(f"{where}: {expected}; got an empty level in {text!r}")
        if not (part.isascii() and part.isdecimal()) or int(part) < 1:
            raise SettingsError(f"{where}: {expected}; got {part!r}")
        if int(part) in levels:
            raise SettingsError(f"{where}: {expected}; level {int(part)} appears twice")
        levels.append(int(part))
    if not levels:
        raise SettingsError(f"{where}: expected at least one concurrency level")
    return levels


def safe_label(label: str) -> str:
    """A label as a file name: letters, digits, '.', '_' and '-' only, never '..' or a path."""
    cleaned = re.sub(r"\.{2,}", ".", re.sub(r"[^A-Za-z0-9._-]+", "_", label)).strip("._-")
    return cleaned or "run"


def check_machine(options: Any, settings: SuiteSettings) -> None:
    """What depends on the machine: load processes, users and rates per process, the emulator's speed."""
    processes = int(getattr(options, "processes", 0) or 0)
    workers = int(getattr(options, "expect_workers", 0) or 0) if getattr(options, "master", False) else 0
    users = int(getattr(options, "num_users", 0) or 0) if settings.load_mode == "users" else 0
    levels = [*settings.ladder, *([users] if users else [])]
    try:
        check_processes(processes)
        check_scale(levels, settings.rate_ladder, settings.max_in_flight, load_processes(processes, workers))
        check_limit("emulator_speed", float(getattr(options, "emulator_speed", 1.0)))
    except LimitError as exc:
        raise SettingsError(str(exc)) from None


def check_api_key_env(name: str) -> None:
    """The variable must be set and non-empty; a name that may be the key itself is never echoed."""
    if not name:
        return
    from contract.redact import looks_like_env_name

    shown = name if looks_like_env_name(name) else "(name not shown: it does not look like a variable name)"
    if name not in os.environ:
        raise SettingsError(f"--api-key-env: environment variable {shown} is not set; "
                            "give the NAME of a variable that holds the key, never the key itself")
    if not os.environ[name].strip():
        raise SettingsError(f"--api-key-env: environment variable {shown} is empty")
def _rates(text: Any) -> list[float]:
    try:
        return parse_rates(str(text or ""))
    except SloError as exc:
        raise SettingsError(str(exc)) from None


def default_run_dir(label: str) -> Path:
    """runs/LABEL-YYYYmmdd-HHMMSS: a fresh directory for every run (and every Start in the web UI)."""
    return Path("runs") / f"{safe_label(label)}-{time.strftime('%Y%m%d-%H%M%S')}"


@dataclass(frozen=True)
class SuiteSettings:
    """Validated settings of one run, read from Locust's parsed options."""

    api: str
    max_tokens: int
    ignore_eos: bool
    temperature: float
    prompts: str
    prompt_mode: str
    prompt_id: str
    seed: int
    label: str
    out: str
    model: str
    api_key_env: str
    connect_timeout: float
    read_timeout: float
    request_timeout: float
    load_mode: str
    ladder: list[int]
    warmup_time: float
    min_requests: int
    min_step_time: float
    max_step_time: float
    step_ci: float
    server_metrics: bool
    server_metrics_interval: float
    check_output: bool
    max_error_rate: float
    overwrite: bool
    rate_ladder: list[float] = dataclasses.field(default_factory=list)  # empty: closed loop
    arrivals: str = "poisson"
    max_in_flight: int = 256
    slo: str = ""
    input_len: str = ""
    output_len: str = ""
    shared_prefix: str = ""
    multi_turn: int = 1  # turns per conversation (1: each request on its own)

    @property
    def open_loop(self) -> bool:
        return bool(self.rate_ladder)

    @property
    def checks_output(self) -> bool:
        """Answers are kept only at temperature 0: a sampled answer differs from run to run by design."""
        return self.check_output and self.temperature == 0
    time_budget: str = ""

    @classmethod
    def from_options(cls, options: Any) -> SuiteSettings:
        def get(dest: str) -> Any:
            return getattr(options, dest, option_default(dest))

        try:
            settings = cls._from_options(options, get)
            check_machine(options, settings)
            return settings
        except LimitError as exc:
            raise _where(options, SettingsError(str(exc))) from None
        except SettingsError as exc:
            raise _where(options, exc) from None

    @classmethod
    def _from_options(cls, options: Any, get: Any) -> SuiteSettings:
        settings = cls(
            api=str(get("api")), max_tokens=int(get("max_tokens")), ignore_eos=bool(get("ignore_eos")),
            temperature=float(get("temperature")), prompts=str(get("prompts")),
            prompt_mode=str(get("prompt_mode")), prompt_id=str(get("prompt_id") or ""), seed=int(get("seed")),
            label=str(get("label")), out=str(get("out") or ""), model=str(get("model") or ""),
            api_key_env=str(get("api_key_env") or ""), connect_timeout=float(get("connect_timeout")),
            read_timeout=float(get("read_timeout")), request_timeout=float(get("request_timeout")),
            load_mode=str(get("load_mode")), ladder=parse_ladder(get("ladder")), warmup_time=float(get("warmup_time")),
            min_requests=int(get("min_requests")), min_step_time=float(get("min_step_time")),
            max_step_time=float(get("max_step_time")), step_ci=float(get("step_ci")),
            server_metrics=bool(get("server_metrics")), check_output=bool(get("check_output")),
            server_metrics_interval=float(get("server_metrics_interval")),
            max_error_rate=float(get("max_error_rate")), overwrite=bool(get("overwrite")),
            rate_ladder=_rates(get("rate_ladder")), arrivals=str(get("arrivals")),
            max_in_flight=int(get("max_in_flight")), slo=str(get("slo") or ""),
            input_len=str(get("input_len") or ""), output_len=str(get("output_len") or ""),
            shared_prefix=str(get("shared_prefix") or ""), multi_turn=int(get("multi_turn")),
            time_budget=str(get("time_budget") or ""),
        )
        settings.validate()
        return settings

    def validate(self) -> None:
        if self.api not in ("auto", *APIS):
            raise SettingsError(f"--api: expected one of auto, {', '.join(APIS)}, got {self.api!r}")
        if self.load_mode not in LOAD_MODES:
            raise SettingsError(f"--load-mode: expected one of {', '.join(LOAD_MODES)}, got {self.load_mode!r}")
        self._validate_ranges()
        self._validate_workload()
        check_api_key_env(self.api_key_env)
        if self.time_budget:
            parse_duration(self.time_budget, "--time-budget")

    def _validate_ranges(self) -> None:
        """Every number within its row of ``contract.limits.LIMITS`` (one table, one reason per bound)."""
        for dest in LIMITS:
            if hasattr(self, dest):
                check_limit(dest, getattr(self, dest))
        if self.min_step_time > self.max_step_time:
            raise LimitError(f"--min-step-time: {self.min_step_time:g} s is above --max-step-time "
                             f"{self.max_step_time:g} s; a step could never end on time")

    def _validate_workload(self) -> None:
        """Open loop, SLO, lengths and shared prefixes (issue #16's options)."""
        if self.rate_ladder and self.load_mode == "users":
            raise SettingsError("--rate-ladder: open loop walks request rates; it cannot be combined with "
                                "--load-mode users (which holds a user count)")
        if self.arrivals not in ("poisson", "constant"):
            raise SettingsError(f"--arrivals: expected poisson or constant, got {self.arrivals!r}")
        if self.multi_turn < 1:
            raise SettingsError(f"--multi-turn: expected a whole number of turns per conversation, 1 or more "
                                f"(1: no conversations), got {self.multi_turn}")
        if self.max_in_flight < 1:
            raise SettingsError(f"--max-in-flight: expected a positive whole number, got {self.max_in_flight}")
        try:
            parse_slo(self.slo)
            parse_length(self.input_len, "--input-len")
            parse_length(self.output_len, "--output-len", allow_dataset=False)
            parse_shared_prefix(self.shared_prefix)
        except (SloError, LengthError) as exc:
            raise SettingsError(str(exc)) from None

    def api_key(self) -> str | None:
        """The secret itself, read from the environment at the moment it is needed; never stored."""
        return os.environ.get(self.api_key_env) if self.api_key_env else None

    def public(self) -> dict[str, Any]:
        """Settings for meta.json: no field holds a secret (the key's env var name is kept, never its value)."""
        return dataclasses.asdict(self)


_VALIDATED: weakref.WeakKeyDictionary[Any, tuple[tuple[Any, ...], SuiteSettings]] = weakref.WeakKeyDictionary()


def settings_of(options: Any) -> SuiteSettings:
    """The one validated ``SuiteSettings`` for Locust's parsed options, built once per distinct set of values.

    The users' context, the ladder and the hooks all ask here, so each Start (whose web-UI form may have
    changed the values) is validated once and everyone reads the same object. Cached beside the options
    object, never on it: Locust ships the options' attributes to workers.
    """
    values = tuple(getattr(options, opt.dest, None) for opt in OPTIONS)
    try:
        cached = _VALIDATED.get(options)
    except TypeError:  # an options object that takes no weak reference (tests' SimpleNamespace)
        return SuiteSettings.from_options(options)
    if cached is not None and cached[0] == values:
        return cached[1]
    settings = SuiteSettings.from_options(options)
    _VALIDATED[options] = (values, settings)
    return settings

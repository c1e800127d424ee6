"""The suite's options, each declared once: a field of ``SuiteSettings`` made with ``option(...)``.

Everything else is derived from that one declaration: the settings object (the field's type and default),
Locust's parser and the web UI's form (``add_arguments``), the YAML profile's keys and types (``load_profile``),
the ``specbench`` commands' pass-through flags (``add_option``, ``passthrough_argv``), validation (the
choices, the field's row in ``contract.limits.LIMITS``, its ``check``) and meta.json's ``settings`` (``public``).

To add an option, add one field to ``SuiteSettings``, and nothing elsewhere; a feature's options go together in
one commented block (``# -- trace replay (#28) --``) above the block of options about this process. The fields'
order is the order of ``--help``::

    trace_speed: float = option(1.0, "replay speed of --trace (2: twice as fast)")

The flag is the field's name with dashes (``--trace-speed``); the default's type is the flag's type (a bool
gives ``--x``/``--no-x``). ``choices=`` lists the allowed values; ``parse=`` turns the flag's text into the
field's value (``--ladder 1,2,5`` -> ``[1, 2, 5]``; the default is then given as text too); ``check=`` raises
``SettingsError`` on a bad value; a number's range is its row in ``contract.limits.LIMITS`` (same name);
``web_ui=False`` keeps it off the web UI's form; ``meta=False`` keeps it out of meta.json (options about this
process, such as the console, rather than about the run); ``refers_to=`` names what the value points at that must
exist besides it (``"a file"``, ``"an environment variable"``, ``"--trace"``), so tests that try arbitrary values
(tests/test_cli_fuzz.py) leave it to its own tests. A ``specbench`` command that takes an option itself
registers it with ``add_option`` (and names it in ``specbench.cli.PASSED_ON`` when the Locust child gets it as
given); options it does not know go to the child untouched. tests/test_one_declaration.py fails when an
option's flag is registered by hand anywhere else.

Precedence: a value given on the command line wins; else the YAML profile (``--suite-config``); else the
default here. In the web UI, values edited in the form win over both. Bad values raise ``SettingsError``
whose message names the source (file and key, or flag) and what was expected.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import os
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from specbench.config.yamlload import YamlInputError, load_yaml
from specbench.contract.apis import APIS
from specbench.contract.lengths import LengthError, parse_length, parse_shared_prefix
from specbench.contract.limits import LIMITS, LimitError, check_limit, check_processes, check_scale, load_processes
from specbench.contract.optionchecks import (
    check_api_key_env,
    check_budget_fits,
    check_budget_text,
    check_ca_bundle_option,
    check_emulator_profile,
    check_gpu_metrics,
    check_path_text,
    check_text,
)
from specbench.contract.optionvalues import (
    SettingsError,
    default_run_dir,
    duration_arg,
    parse_budget,
    parse_duration,
    parse_gpu_metrics,
    parse_ladder,
    parse_rate_ladder,
    safe_label,
)
from specbench.contract.policy import DEFAULT_LADDER
from specbench.contract.slo import SloError, parse_slo
from specbench.contract.traces import FORMATS as TRACE_FORMATS
from specbench.contract.traces import ReplayStep, TraceError, load_trace, parse_windows, replay_steps

# The value parsers (contract.optionvalues) and checks (contract.optionchecks) live beside this module; their
# public names are re-exported here, so every caller imports the settings from this one module.
__all__ = [
    "LOAD_MODES", "MACHINE_OPTIONS", "OPTIONS", "Check", "Option", "Parse", "SettingsError", "SuiteSettings",
    "add_arguments", "add_option", "apply_profile", "check_api_key_env", "check_budget_fits", "check_emulator_profile",
    "check_machine", "check_path_text", "check_text", "default_run_dir", "duration_arg", "explicit_dests",
    "given_argv", "load_profile", "option", "parse_budget", "parse_duration", "parse_ladder", "passthrough_argv",
    "safe_label", "settings_of",
]

ARRIVALS: tuple[str, ...] = ("poisson", "constant", "gamma")
LOAD_MODES: tuple[str, ...] = ("ladder", "users")
_OPTION = "specbench_option"  # key of an option's declaration in its field's metadata

Parse = Callable[[Any, str], Any]  # (raw value, flag) -> the field's value; raises SettingsError
Check = Callable[[Any, str], Any]  # (field's value, flag) -> anything; raises SettingsError on a bad value


@dataclass(frozen=True)
class Option:
    """One suite option: CLI flag ``--name``, YAML key ``name`` (dashes or underscores), attribute ``dest``.

    ``default`` is written as on the command line (text for a parsed option such as ``--ladder``).
    ``refers_to`` says what a value names outside itself (a file, an environment variable, another option's
    input), empty when the value means what it says: such a value is only usable when that thing exists.
    """

    name: str
    default: Any
    help: str
    choices: tuple[str, ...] | None = None
    in_web_ui: bool = True
    parse: Parse | None = None
    check: Check | None = None
    in_meta: bool = True
    refers_to: str = ""

    @property
    def dest(self) -> str:
        return self.name.replace("-", "_")

    @property
    def flag(self) -> str:
        return f"--{self.name}"

    def value(self, raw: Any) -> Any:
        """The field's value from a raw one (command line, web form, profile), typed like the default."""
        if self.parse is not None:
            return self.parse(raw, self.flag)
        kind = type(self.default)
        if kind is str:
            return "" if raw is None else str(raw)
        return kind(raw)

    def validate(self, value: Any) -> None:
        if self.choices and value not in self.choices:
            raise SettingsError(f"{self.flag}: expected one of {', '.join(self.choices)}, got {value!r}")
        if self.dest in LIMITS:
            check_limit(self.dest, value)
        if self.check is not None:
            try:
                self.check(value, self.flag)
            except (SloError, LengthError) as exc:
                raise SettingsError(str(exc)) from None


def option(default: Any, help: str, *, choices: tuple[str, ...] | None = None, web_ui: bool = True,
           parse: Parse | None = None, check: Check | None = None, meta: bool = True, refers_to: str = "") -> Any:
    """Declare a ``SuiteSettings`` field as an option (see the module docstring); its name comes from the field."""
    spec = Option("", default, help, choices, web_ui, parse, check, meta, refers_to)
    if parse is not None:
        return dataclasses.field(default_factory=lambda: parse(default, "default"), metadata={_OPTION: spec})
    return dataclasses.field(default=default, metadata={_OPTION: spec})


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
    try:
        if not file.is_file():
            raise SettingsError(f"--suite-config {path[:200]}: no such file")
        data = load_yaml(file.read_text(encoding="utf-8"))
    except OSError as exc:  # a name the file system refuses (too long, NUL byte) or an unreadable file
        raise SettingsError(f"--suite-config {path[:200]!r}: cannot read it ({exc.strerror or exc})") from None
    except UnicodeDecodeError:
        raise SettingsError(f"--suite-config {path[:200]!r}: cannot read it (not UTF-8 text)") from None
    except YamlInputError as exc:  # aliases, duplicate keys, NaN/infinities and broken YAML alike
        raise SettingsError(f"{path}: {exc}") from None
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
    if opt.parse is not None and isinstance(value, list):
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


def check_machine(options: Any, settings: SuiteSettings) -> None:
    """What depends on the machine: load processes, users and rates per process."""
    processes = int(getattr(options, "processes", 0) or 0)
    workers = int(getattr(options, "expect_workers", 0) or 0) if getattr(options, "master", False) else 0
    users = int(getattr(options, "num_users", 0) or 0) if settings.load_mode == "users" else 0
    levels = [*settings.ladder, *([users] if users else [])]
    try:
        check_processes(processes)
        check_scale(levels, settings.rate_ladder, settings.max_in_flight, load_processes(processes, workers))
    except LimitError as exc:
        raise SettingsError(str(exc)) from None


@dataclass(frozen=True)
class SuiteSettings:
    """Validated settings of one run, read from Locust's parsed options: every field is an option."""

    api: str = option("auto", "API: auto (SGLang /generate when /server_info says SGLang, else chat), generate, "
                      "chat or completions", choices=("auto", *APIS))
    max_tokens: int = option(512, "output tokens asked for per request")
    ignore_eos: bool = option(True, "ask the server to ignore EOS so every request yields exactly max-tokens")
    temperature: float = option(0.0, "sampling temperature")
    prompts: str = option("diverse", "built-in prompt set name (config/prompts/NAME.jsonl), a JSONL/ShareGPT file, "
                          "or a standard set: mt-bench, spec-bench, speed-bench:qualitative, gsm8k, humaneval, ... "
                          "(NAME, NAME=PATH or NAME=hf:DATASET; docs/guides/comparable-results.md)",
                          refers_to="a prompt set or file")
    prompt_mode: str = option("diverse", "diverse: seeded shuffle of the set; fixed: one prompt repeated",
                              choices=("diverse", "fixed"))
    prompt_id: str = option("", "with --prompt-mode fixed: the prompt id to repeat (default: the first in order)",
                            refers_to="a prompt of --prompts")
    seed: int = option(0, "seed of the prompt order")
    label: str = option("run", "run label written into every record (e.g. baseline, eagle3)", check=check_text)
    out: str = option("", "run directory (default runs/LABEL-YYYYmmdd-HHMMSS)", web_ui=False, check=check_path_text)
    model: str = option("", "model name for the OpenAI routes (default: the first of the server's /v1/models)",
                        check=check_text)
    api_key_env: str = option("", "name of the environment variable holding the API key (never the key itself)",
                              check=check_api_key_env, refers_to="an environment variable")
    connect_timeout: float = option(10.0, "seconds to connect")
    read_timeout: float = option(120.0, "seconds a stream may stay silent before it counts as a timeout")
    request_timeout: float = option(900.0, "seconds a whole request may take before it counts as a timeout")
    receive_clock: str = option("kernel", "when each chunk arrived: kernel (the kernel's receive time of its "
                                "bytes, Linux plain TCP; elsewhere as user) or user (when the load process's event "
                                "loop saw them)", choices=("kernel", "user"))
    load_mode: str = option("ladder", "ladder: walk the --ladder levels (the Users field is not used); users: hold "
                            "Locust's number of users as one measured step, for Run time if set, else until Stop",
                            choices=LOAD_MODES)
    ladder: list[int] = option(",".join(map(str, DEFAULT_LADDER)), "concurrency levels of the ladder, "
                               "comma-separated", parse=parse_ladder)
    warmup_time: float = option(0.0, "warm-up seconds per step; 0: until every user has finished one request or "
                                "the requests in flight have stayed at C for a while (docs/guides/ladder.md)")
    min_requests: int = option(0, "requests each step must measure; 0: 30 with --step-ci, else max(30, 3*C)")
    min_step_time: float = option(10.0, "minimum seconds of measured window per step")
    max_step_time: float = option(600.0, "maximum seconds per step, warm-up included")
    step_ci: float = option(0.03, "end a step once its throughput's 95%% CI half-width is below this "
                            "fraction (0: off; then steps end on --min-requests and --min-step-time)")
    time_budget: str = option("", "wall time for the whole ladder, e.g. 30m, 1h30m, 900s (specbench compare: "
                              "for both runs); steps share it, unused time passes on", check=check_budget_text)
    server_metrics: bool = option(True, "sample the server's /metrics during the run into server_metrics.jsonl "
                                  "(--no-server-metrics: off)")
    check_output: bool = option(False, "at temperature 0 keep each answer's identity (token ids, else text): a "
                                "digest in the record, the answer in answers.jsonl, for the comparison's "
                                "output-equivalence check (specbench compare|sweep|demo: on unless "
                                "--no-check-output)")
    equivalence_probe: bool = option(False, "specbench compare: end with a paired output-equivalence probe (each "
                                     "prompt at temperature 0 to the baseline twice and to each spec once; a "
                                     "quarter of --time-budget is kept for it)", web_ui=False, meta=False)
    server_metrics_interval: float = option(1.0, "seconds between two reads of the server's /metrics")
    max_error_rate: float = option(0.05, "a step whose failed share of requests is above this fraction fails the "
                                   "run (exit 3) and gets no verdict in a comparison")
    overwrite: bool = option(False, "reuse a non-empty --out run directory (its old run files are removed first)",
                             web_ui=False)
    allow_host_change: bool = option(False, "let the web UI's start form change the host while an API key is in "
                                     "use", web_ui=False, meta=False)
    # -- open loop, SLO, workload shapes (issue #16) --
    rate_ladder: list[float] = option("", "open loop: request rates (requests/s) to walk instead of --ladder, "
                                      "comma-separated, e.g. 0.5,1,2,4", parse=parse_rate_ladder)  # empty: closed loop
    arrivals: str = option("poisson", "open loop: poisson (seeded exponential gaps), constant (even gaps) or gamma "
                           "(seeded gamma gaps, shaped by --burstiness)", choices=ARRIVALS)
    burstiness: float = option(1.0, "open loop, --arrivals gamma: the gaps' shape; 1 is Poisson, below 1 burstier "
                               "(bunched sends, long lulls), above 1 more even (as vLLM's benchmark --burstiness)")
    max_in_flight: int = option(256, "open loop: most requests in flight per run; a request due when all are busy "
                                "is dropped, counted and flagged")
    slo: str = option("", "latency targets for SLO attainment and goodput, e.g. ttft=2s,tpot=50ms "
                      "(keys ttft, tpot, e2e, itl_p99)", check=lambda v, _f: parse_slo(v))
    input_len: str = option("", "prompt length in tokens per request: fixed:N, uniform:A-B, normal:MEAN,SD, or "
                            "dataset (as the prompt file has it; the default): prompts are padded with, or cut "
                            "to, real text", check=lambda v, f: parse_length(v, f))
    output_len: str = option("", "output tokens per request: fixed:N, uniform:A-B or normal:MEAN,SD (default: "
                             "--max-tokens for every request); exact with --ignore-eos",
                             check=lambda v, f: parse_length(v, f, allow_dataset=False))
    shared_prefix: str = option("", "N:LEN: N shared system prompts of about LEN tokens of real text, each "
                                "request drawn to one (exercises the server's prefix cache)",
                                check=lambda v, _f: parse_shared_prefix(v))
    multi_turn: int = option(1, "turns per conversation: each user holds one conversation at a time and resends "
                             "the server's actual answers with a follow-up question (1: single requests)")
    # -- trace replay (#28) --
    trace: str = option("", "replay a request trace file (Mooncake JSONL, BurstGPT CSV or Azure CSV): its arrival "
                        "times, input and output lengths (and Mooncake hash_ids as shared prefix blocks), one "
                        "open-loop step per --trace-window", refers_to="a file")
    trace_format: str = option("", "format of --trace: mooncake, burstgpt or azure (default: detected from the "
                               "content)", choices=("", *TRACE_FORMATS), refers_to="--trace")
    trace_speed: float = option(1.0, "replay speed of --trace: 2 sends it twice as fast (times divided by this)")
    trace_window: str = option("", "slices of --trace to replay, START:LEN in trace seconds, comma-separated, one "
                               "step each (default: the whole trace)", refers_to="--trace")
    # -- crossover refinement (#27) --
    stop_after_saturation: int = option(-1, "skip the ladder's levels more than N levels beyond the level where "
                                        "throughput stopped rising while TTFT grew (specbench compare: beyond a "
                                        "saturation every server shows; levels stay paired); -1: off")
    # -- energy and cost per token (#40) --
    gpu_metrics: list[str] = option("", "DCGM exporter URLs, comma-separated (dcgm-exporter: http://GPU-HOST:9400; "
                                    "an URL without a path gets /metrics), or nvml (this machine's GPUs through "
                                    "NVML; nvml:0,1 for some; pip install 'locust-specbench[nvml]'), read every "
                                    "--server-metrics-interval into gpu_metrics.jsonl: energy, power and GPU use per "
                                    "step (docs/guides/energy.md)",
                                    parse=parse_gpu_metrics, check=check_gpu_metrics,
                                    refers_to="a running DCGM exporter")
    gpu_hour_price: float = option(0.0, "USD per GPU-hour: the reports add the cost per million output tokens, for "
                                   "the GPUs the exporters show (0: no cost figures)")
    kwh_price: float = option(0.0, "USD per kWh: the reports add the energy cost per million output tokens, the GPUs' "
                              "measured energy at this price (0: no energy cost figures)")
    # -- this process, not the run (kept out of meta.json) --
    emulator_profile: str = option("baseline", "with no --host: built-in emulator profile to start", web_ui=False,
                                   meta=False, check=check_emulator_profile,
                                   refers_to="a built-in profile or a file")
    emulator_speed: float = option(1.0, "with no --host: time scale of the built-in emulator", web_ui=False,
                                   meta=False)
    ca_bundle: str = option("", "PEM file of certificate authorities an https:// server is checked against "
                            "(default: SSL_CERT_FILE, REQUESTS_CA_BUNDLE or CURL_CA_BUNDLE if set, else the system's)",
                            web_ui=False, meta=False, check=check_ca_bundle_option, refers_to="a file")
    suite_config: str = option("", "YAML profile setting any of these options (command line wins)", web_ui=False,
                               meta=False, check=check_path_text, refers_to="a file")
    console: str = option("locust", "terminal output: locust (Locust's own), progress (the suite's lines only; "
                          "Locust's log and tables go to --logfile), all (everything, and --logfile too)",
                          choices=("locust", "progress", "all"), web_ui=False, meta=False)

    @property
    def open_loop(self) -> bool:
        return bool(self.rate_ladder) or bool(self.trace)

    @property
    def checks_output(self) -> bool:
        """Answers are kept only at temperature 0: a sampled answer differs from run to run by design."""
        return self.check_output and self.temperature == 0

    @classmethod
    def from_options(cls, options: Any) -> SuiteSettings:
        """Read and validate every option from Locust's parsed options (or the web form's trial copy)."""
        try:
            settings = cls(**{opt.dest: opt.value(getattr(options, opt.dest, opt.default)) for opt in OPTIONS})
            settings.validate()
            check_machine(options, settings)
            return settings
        except LimitError as exc:
            raise _where(options, SettingsError(str(exc))) from None
        except SettingsError as exc:
            raise _where(options, exc) from None

    @classmethod
    def from_public(cls, data: dict[str, Any]) -> SuiteSettings:
        """Settings as a meta.json holds them, of any version: unknown keys are ignored, missing ones take their
        default (the option did not exist yet, so the run behaved as its default), a value of the wrong type too.
        Not validated: a run is read where its key's variable need not be set."""
        values: dict[str, Any] = {}
        for opt in OPTIONS:
            if opt.dest not in data or not opt.in_meta:
                continue
            raw = data[opt.dest]
            try:
                values[opt.dest] = list(raw) if opt.parse is not None and isinstance(raw, list) else opt.value(raw)
            except (SettingsError, ValueError, TypeError):
                continue
        return cls(**values)

    def validate(self) -> None:
        """Each option by its own declaration, then what involves two options."""
        for opt in OPTIONS:
            opt.validate(getattr(self, opt.dest))
        if self.min_step_time > self.max_step_time:
            raise LimitError(f"--min-step-time: {self.min_step_time:g} s is above --max-step-time "
                             f"{self.max_step_time:g} s; a step could never end on time")
        if self.burstiness != 1.0 and self.arrivals != "gamma":
            raise SettingsError(f"--burstiness: shapes --arrivals gamma; with --arrivals {self.arrivals} it would "
                                f"be ignored (give --arrivals gamma, or leave --burstiness out)")
        if self.rate_ladder and self.load_mode == "users":
            raise SettingsError("--rate-ladder: open loop walks request rates; it cannot be combined with "
                                "--load-mode users (which holds a user count)")
        if self.load_mode != "users" and not self.trace:
            check_budget_fits(parse_budget(self.time_budget), len(self.rate_ladder or self.ladder))
        self._validate_trace()

    def _validate_trace(self) -> None:
        """Trace replay (#28): the file is read and every window checked now, so a bad trace is one line."""
        if not self.trace:
            if self.trace_window or self.trace_format:
                raise SettingsError("--trace-window and --trace-format apply to a replay: give --trace FILE")
            return
        if self.rate_ladder:
            raise SettingsError("--trace: a replay sends the trace's own arrivals; it cannot be combined with "
                                "--rate-ladder")
        if self.load_mode == "users":
            raise SettingsError("--trace: a replay is open loop; it cannot be combined with --load-mode users")
        if self.multi_turn > 1:
            raise SettingsError("--trace: each trace row is one request; it cannot be combined with --multi-turn")
        if self.input_len or self.output_len or self.shared_prefix:
            raise SettingsError("--trace: the trace sets each request's lengths and shared blocks; leave out "
                                "--input-len, --output-len and --shared-prefix")
        try:
            self.trace_steps  # noqa: B018 - read now, so a bad trace fails here; kept for the shape and the users
        except TraceError as exc:
            raise SettingsError(str(exc)) from None

    @functools.cached_property
    def trace_steps(self) -> list[ReplayStep]:
        """--trace: each window's rows and due times, the file read and parsed once per settings object (the
        validation, the shape and the users' replay all read it here); TraceError for a bad trace."""
        return replay_steps(load_trace(self.trace, self.trace_format), parse_windows(self.trace_window),
                            self.trace_speed)

    def api_key(self) -> str | None:
        """The secret itself, read from the environment at the moment it is needed; never stored."""
        return os.environ.get(self.api_key_env) if self.api_key_env else None

    def public(self) -> dict[str, Any]:
        """meta.json's ``settings``: the run's options; no field holds a secret (the key's variable name only)."""
        return {opt.dest: _copy(getattr(self, opt.dest)) for opt in OPTIONS if opt.in_meta}


def _copy(value: Any) -> Any:
    return list(value) if isinstance(value, list) else value


OPTIONS: tuple[Option, ...] = tuple(
    dataclasses.replace(f.metadata[_OPTION], name=f.name.replace("_", "-")) for f in dataclasses.fields(SuiteSettings)
)
_BY_DEST = {opt.dest: opt for opt in OPTIONS}


def add_arguments(parser: Any) -> None:
    """Register every option on Locust's parser (its own add_argument knows include_in_web_ui)."""
    for opt in OPTIONS:
        add_option(parser, opt.dest, **({} if opt.in_web_ui else {"include_in_web_ui": False}))


def add_option(parser: Any, dest: str, **overrides: Any) -> None:
    """Register one option on an argparse parser as its declaration says (``overrides``: a command's own
    default or help where the command gives the option another meaning, e.g. the demo's default profile)."""
    opt = _BY_DEST[dest]
    kwargs: dict[str, Any] = {"default": opt.default, "help": opt.help, "dest": opt.dest}
    if isinstance(opt.default, bool):
        kwargs["action"] = argparse.BooleanOptionalAction
    else:
        kwargs["type"] = type(opt.default)
    if opt.choices:
        kwargs["choices"] = opt.choices
        if "" in opt.choices:  # '' is the default's own value (detect, none): not offered as a choice in the help
            kwargs["metavar"] = "{" + ",".join(c for c in opt.choices if c) + "}"
    kwargs.update(overrides)
    parser.add_argument(opt.flag, **kwargs)


def passthrough_argv(args: Any, dests: tuple[str, ...]) -> list[str]:
    """The options ``dests`` of a parsed ``specbench`` command as flags for the Locust child: those that differ
    from their default, written as the child's parser reads them."""
    return given_argv(args, tuple(d for d in dests if getattr(args, d, None) != _BY_DEST[d].default))


def given_argv(args: Any, dests: tuple[str, ...]) -> list[str]:
    """The options ``dests`` that ``args`` holds (not None), as flags for the Locust child, default or not."""
    argv: list[str] = []
    for dest in dests:
        opt, value = _BY_DEST[dest], getattr(args, dest, None)
        if value is None:
            continue
        if isinstance(opt.default, bool):
            argv.append(opt.flag if value else f"--no-{opt.name}")
        else:
            argv += [opt.flag, str(value)]
    return argv


#: Locust's own options that ``check_machine`` reads: a change (the web form's user count) validates anew
MACHINE_OPTIONS = ("processes", "expect_workers", "master", "num_users")
#: id(options) -> (a weak reference to them, their values, the settings validated from those values)
_VALIDATED: dict[int, tuple[weakref.ref[Any], tuple[Any, ...], SuiteSettings]] = {}


def settings_of(options: Any) -> SuiteSettings:
    """The one validated ``SuiteSettings`` for Locust's parsed options, built once per distinct set of values.

    The users' context, the ladder and the hooks all ask here, so each Start (whose web-UI form may have
    changed the values) is validated once (a --trace file read once) and everyone reads the same object.
    Cached beside the options object, never on it: Locust ships the options' attributes to workers. Keyed by
    identity: an argparse Namespace compares by value and so cannot be a dictionary key itself.
    """
    values = tuple(getattr(options, dest, None) for dest in (*_BY_DEST, *MACHINE_OPTIONS))
    key = id(options)
    cached = _VALIDATED.get(key)
    if cached is not None and cached[0]() is options and cached[1] == values:
        return cached[2]
    settings = SuiteSettings.from_options(options)
    try:
        ref = weakref.ref(options, lambda _ref: _VALIDATED.pop(key, None))
    except TypeError:  # an options object that takes no weak reference: validated at every call
        return settings
    _VALIDATED[key] = (ref, values, settings)
    return settings

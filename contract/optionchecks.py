"""Validating an option's value: what each option's ``check=`` runs, and the budget's fit to the ladder.

Each check raises ``SettingsError`` naming the flag. ``contract.settings`` declares the options with these as their
``check=`` and re-exports the public names, so callers import them from there.
"""

from __future__ import annotations

import math
import os
import re
from pathlib import Path

from specbench.config import data_path
from specbench.contract.gpu_metrics import is_nvml
from specbench.contract.nvml import NvmlError, check_nvml
from specbench.contract.optionvalues import SettingsError, parse_budget
from specbench.contract.policy import DRAIN_RESERVE, MIN_STEP_SHARE_S
from specbench.contract.redact import key_problem, looks_like_env_name, register_key_env
from specbench.contract.tls import CaBundleError, check_ca_bundle, trust


def check_budget_fits(budget_s: float, levels: int, where: str = "--time-budget") -> None:
    """Refuse a plan whose levels would each get less than ``MIN_STEP_SHARE_S``: every window would be empty."""
    if budget_s <= 0 or levels <= 0:
        return
    share = budget_s * (1 - DRAIN_RESERVE) / levels
    if share < MIN_STEP_SHARE_S:
        needed = math.ceil(MIN_STEP_SHARE_S * levels / (1 - DRAIN_RESERVE))
        shown = math.floor(share * 100) / 100  # never rounded up to the floor it missed
        raise SettingsError(f"{where}: {budget_s:g} s for {levels} levels gives each {shown:.2f} s; a step needs at "
                            f"least {MIN_STEP_SHARE_S:g} s (its warm-up and a window): give at least {needed} s or "
                            "fewer levels")



def check_api_key_env(name: str, _flag: str = "--api-key-env") -> None:
    """The variable must be set and hold a key that can be sent and hidden (``key_problem``: 8 characters or
    more, no control character, Latin-1 only); neither the key nor a name that may be the key is ever echoed.

    Runs once in each process that validates the settings, before any request, and registers the key there,
    so its logs never show it."""
    if not name:
        return
    register_key_env(name)
    shown = name if looks_like_env_name(name) else "(name not shown: it does not look like a variable name)"
    if name not in os.environ:
        raise SettingsError(f"--api-key-env: environment variable {shown} is not set; "
                            "give the NAME of a variable that holds the key, never the key itself")
    if not os.environ[name].strip():
        raise SettingsError(f"--api-key-env: environment variable {shown} is empty")
    problem = key_problem(os.environ[name])
    if problem is not None:
        raise SettingsError(f"--api-key-env: environment variable {shown}: {problem}")



def check_gpu_metrics(entries: list[str], flag: str) -> None:
    """``nvml``: the package, the driver and the GPUs asked for are there (NVML opened and closed once, here)."""
    for entry in entries:
        if is_nvml(entry):
            try:
                check_nvml(entry, flag)
            except NvmlError as exc:
                raise SettingsError(str(exc)) from None


def check_ca_bundle_option(text: str, flag: str) -> None:
    """Load the CA bundle (the flag's, else SSL_CERT_FILE, REQUESTS_CA_BUNDLE or CURL_CA_BUNDLE) once, and make it
    this process's choice for every TLS client (contract.tls)."""
    try:
        trust(check_ca_bundle(text))
    except CaBundleError as exc:
        raise SettingsError(str(exc)) from None


def check_budget_text(text: str, flag: str) -> None:
    parse_budget(text, flag)


_NAME_MAX_BYTES = 255  # one file-name component on Linux, macOS and Windows file systems
_PATH_MAX_BYTES = 4096


def check_text(text: str, flag: str) -> None:
    """Names and labels go into records, headers and file names: a control character is a paste error."""
    bad = next((i for i, ch in enumerate(text) if ord(ch) < 32 or ord(ch) == 127), None)
    if bad is not None:
        raise SettingsError(f"{flag}: control character {ord(text[bad]):#04x} at position {bad + 1}; "
                            "expected printable text")


def check_path_text(text: str, flag: str) -> None:
    """A path the file system can hold: printable, each name at most 255 bytes, the whole at most 4096."""
    check_text(text, flag)
    if len(text.encode("utf-8")) > _PATH_MAX_BYTES:
        raise SettingsError(f"{flag}: a path of {len(text.encode('utf-8'))} bytes; expected at most {_PATH_MAX_BYTES}")
    longest = max((part for part in re.split(r"[/\\]", text)), key=lambda p: len(p.encode("utf-8")), default="")
    if len(longest.encode("utf-8")) > _NAME_MAX_BYTES:
        raise SettingsError(f"{flag}: the name {longest[:40]!r}... is {len(longest.encode('utf-8'))} bytes; a file "
                            f"system holds at most {_NAME_MAX_BYTES} per name")


def check_emulator_profile(name: str, flag: str) -> None:
    """A built-in profile name or a YAML file, known before any process starts (no --host needs it)."""
    check_path_text(name, flag)
    if name.endswith((".yaml", ".yml")) or "/" in name or "\\" in name:
        if not Path(name).is_file():
            raise SettingsError(f"{flag}: {name}: no such profile file")
        return
    builtin = sorted(p.stem for p in data_path("emulator").glob("*.yaml"))
    if name not in builtin:
        raise SettingsError(f"{flag}: no built-in profile named {name!r}; expected one of {', '.join(builtin)} "
                            "or a YAML file")

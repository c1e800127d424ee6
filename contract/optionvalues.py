"""Parsing an option's text into its value: durations and budgets, ladders, labels and run directories.

Each parser raises ``SettingsError`` (declared here, the lowest of the settings' modules) with a message naming the
flag or profile key it read. ``contract.settings`` declares the options with these as their ``parse=`` and
re-exports the public names, so callers import them from there.
"""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Any

from specbench.contract.gpu_metrics import parse_exporter_urls
from specbench.contract.servertext import file_slug
from specbench.contract.slo import SloError, parse_rates
from specbench.contract.urls import UrlError


class SettingsError(ValueError):
    """A user mistake in options or the YAML profile; the message says where and what was expected."""


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


def parse_budget(text: str | None, where: str = "--time-budget") -> float:
    """A --time-budget in seconds; empty or zero in any unit ('0', '0s', '0m') means none (0.0)."""
    raw = str(text or "").strip().lower()
    if not raw or re.fullmatch(r"(?:0+(?:\.0*)?[hms]?)+", raw):
        return 0.0
    return parse_duration(str(text), where)


def duration_arg(seconds: float) -> str:
    """Seconds as a --time-budget value a child reads back exactly enough: '90s', '0.5s' (never '0s' for 0.5)."""
    return f"{seconds:.1f}".rstrip("0").rstrip(".") + "s"


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
    """A label as a file name (``servertext.file_slug``: safe characters, a short hash where it had to change)."""
    return file_slug(label) or "run"


def default_run_dir(label: str) -> Path:
    """runs/LABEL-YYYYmmdd-HHMMSS: a fresh directory for every run (and every Start in the web UI)."""
    return Path("runs") / f"{safe_label(label)}-{time.strftime('%Y%m%d-%H%M%S')}"


def parse_rate_ladder(text: Any, where: str) -> list[float]:
    """--rate-ladder's text as its request rates (``contract.slo.parse_rates``)."""
    try:
        return parse_rates(str(text or ""))
    except SloError as exc:
        raise SettingsError(str(exc)) from None


def parse_gpu_metrics(text: Any, where: str) -> list[str]:
    """--gpu-metrics's text as its exporter URLs or ``nvml`` entries (``contract.gpu_metrics``)."""
    try:
        return parse_exporter_urls(str(text or ""), "--gpu-metrics")
    except UrlError as exc:
        raise SettingsError(str(exc)) from None

"""A server's speculative settings as text people read: ``key=value`` pairs, never a Python dict.

Shared by the preflight line and every report header. SGLang's ``avg_spec_accept_length`` is not a setting but
the server's running average over its traffic so far: read before a run it is 0 (or 1, after the preflight's
tiny request accepted nothing), which would look like a measurement, so it reads "not measured yet" until it
carries information; the run's own acceptance figures are in the report's tables.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

RUNTIME_FIGURES = {"avg_spec_accept_length": "acceptance length"}  # reported by the server, not set on it


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list | tuple):
        return ",".join(_text(v) for v in value)
    return str(value)


def _runtime(label: str, value: Any) -> str:
    if isinstance(value, bool) or not isinstance(value, int | float) or value <= 1.0:
        return f"{label} not measured yet"
    return f"{label} {value:.2f} (the server's average before this run)"


def describe_speculative(spec: Mapping[str, Any] | str | None, *, runtime: bool = True) -> str:
    """``speculative algorithm=EAGLE3, num_steps=3, ..., acceptance length not measured yet`` or ``no speculation``.

    ``runtime=False`` (a report's header, written after the run): the settings alone, without the server's
    pre-run figures, which the run's own acceptance columns supersede."""
    if not spec:
        return "no speculation"
    if not isinstance(spec, Mapping):  # an older or hand-written meta.json may name just the algorithm
        return f"speculative {_text(spec)}"
    keys = sorted(spec, key=lambda k: (k != "algorithm", k))
    settings = [f"{k}={_text(spec[k])}" for k in keys
                if k not in RUNTIME_FIGURES and spec[k] not in (None, "", [], {})]
    figures = [_runtime(label, spec[k]) for k, label in RUNTIME_FIGURES.items() if k in spec and runtime]
    return "speculative " + ", ".join(settings + figures)

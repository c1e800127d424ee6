"""Reading a run directory for analysis: ``schema.read_run`` plus the type checks analysis relies on.

``read_run`` checks structure (required keys, statuses, versions); this adds the value types the figures
need, so a malformed file ends in one ``RunFormatError`` naming the file and the record, not a traceback.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from analysis.schema import META_FILE, RECORDS_FILE, STEPS_FILE, RunData, RunFormatError, read_run


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


_RECORD_NUMBERS = ("start_s", "e2e_s")
_RECORD_OPTIONAL_NUMBERS = ("ttft_s",)
_RECORD_OPTIONAL_INTS = ("step", "target_c")
_STEP_OPTIONAL_NUMBERS = ("steady_start_s", "end_s", "min_requests")


def load_run(run_dir: str | Path) -> RunData:
    """Read and type-check a run directory; raises ``RunFormatError`` with one line on bad input."""
    run = read_run(run_dir)
    for n, rec in enumerate(run.records, start=1):
        _check_record(run.path / RECORDS_FILE, n, rec)
    for step in run.steps:
        for key in _STEP_OPTIONAL_NUMBERS:
            if step.get(key) is not None and not _is_number(step.get(key)):
                raise RunFormatError(f"{run.path / STEPS_FILE}: step {step['index']}: {key!r} should be a number, "
                                     f"got {step.get(key)!r}")
    for key in ("server", "prompts", "settings"):
        if not isinstance(getattr(run.meta, key), dict):
            raise RunFormatError(f"{run.path / META_FILE}: {key!r} should be an object")
    if not isinstance(run.meta.ladder, list):
        raise RunFormatError(f"{run.path / META_FILE}: 'ladder' should be a list of concurrencies")
    return run


def _check_record(path: Path, n: int, rec: Any) -> None:
    where = f"{path}: record {n} ({rec.get('request_id')!r})"

    def bad(key: str, expected: str) -> RunFormatError:
        return RunFormatError(f"{where}: {key!r} should be {expected}, got {rec.get(key)!r}")

    for key in _RECORD_NUMBERS:
        if not _is_number(rec.get(key)):
            raise bad(key, "a number")
    for key in _RECORD_OPTIONAL_NUMBERS:
        if rec.get(key) is not None and not _is_number(rec.get(key)):
            raise bad(key, "a number or null")
    for key in _RECORD_OPTIONAL_INTS:
        if rec.get(key) is not None and not _is_int(rec.get(key)):
            raise bad(key, "an integer or null")
    if not _is_int(rec.get("output_tokens")):
        raise bad("output_tokens", "an integer")
    if not isinstance(rec["chunk_ms"], list) or not all(_is_number(x) for x in rec["chunk_ms"]):
        raise bad("chunk_ms", "a list of numbers")
    if not isinstance(rec["chunk_tokens"], list) or not all(_is_number(x) for x in rec["chunk_tokens"]):
        raise bad("chunk_tokens", "a list of numbers")
    if rec.get("spec") is not None and not isinstance(rec.get("spec"), dict):
        raise bad("spec", "an object or null")

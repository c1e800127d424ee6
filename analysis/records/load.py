"""Reading a run directory for analysis: ``contract.rundir.RunDir.read`` plus the type checks analysis relies on.

``RunDir.read`` checks structure (required keys, statuses, versions); this adds the value types the figures
need, so a malformed file ends in one ``RunFormatError`` naming the file and the record, not a traceback. Records
of the right types that still cannot be true (``contract.evidence``: a request twice, times not finite, negative or
backwards, impossible token counts) are left out of ``records`` and counted in ``left_out``, for a warning.
"""

from __future__ import annotations

import math
from array import array
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

from specbench.contract.evidence import screen_records
from specbench.contract.rundir import RunDir
from specbench.contract.schema import RunData, RunFormatError


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


_RECORD_NUMBERS = ("start_s", "e2e_s")
_RECORD_OPTIONAL_NUMBERS = ("ttft_s",)
_RECORD_OPTIONAL_INTS = ("step", "target_c")
_STEP_OPTIONAL_NUMBERS = ("start_s", "steady_start_s", "end_s", "min_requests")


def load_run(run_dir: str | Path) -> RunData:
    """Read and type-check a run directory; raises ``RunFormatError`` with one line on bad input."""
    try:
        return _load_run(run_dir)
    except RunFormatError:
        raise
    except (TypeError, KeyError, AttributeError, ValueError, RecursionError) as exc:  # any other bytes
        raise RunFormatError(f"{run_dir}: not a readable run directory ({type(exc).__name__}: {exc})") from None


def _load_run(run_dir: str | Path) -> RunData:
    files = RunDir.of(run_dir)
    run = files.read()
    if not getattr(run.records, "typed", False):  # read as columns (contract.columnar): typed as they were read
        for n, rec in enumerate(run.records, start=1):
            _check_record(files.records_file, n, rec)
    run.records, run.left_out = screen_records(run.records)  # evidence: the impossible and the repeated kept out
    for step in run.steps:
        for key in _STEP_OPTIONAL_NUMBERS:
            # finite: JSON readers take NaN and Infinity, and a window that ends at NaN has no length (#53)
            value = step.get(key)
            if value is not None and not (_is_number(value) and math.isfinite(cast(float, value))):
                raise RunFormatError(f"{files.steps_file}: step {step['index']}: {key!r} should be a finite "
                                     f"number, got {value!r}")
    for key in ("server", "prompts"):  # "settings" is checked as it is read (contract.schema.read_meta)
        if not isinstance(getattr(run.meta, key), dict):
            raise RunFormatError(f"{files.meta_file}: {key!r} should be an object")
    if not isinstance(run.meta.ladder, list):
        raise RunFormatError(f"{files.meta_file}: 'ladder' should be a list of concurrencies")
    return run


def _number_list(value: Any) -> bool:
    """A list of numbers, or the ``array`` that ``contract.compact`` made of one (numbers by construction)."""
    return isinstance(value, array) or (isinstance(value, list) and all(_is_number(x) for x in value))


#: (field, test, what the field should be) for every typed field of a record.
_RECORD_CHECKS: tuple[tuple[str, Callable[[Any], bool], str], ...] = (
    *((key, _is_number, "a number") for key in _RECORD_NUMBERS),
    *((key, lambda v: v is None or _is_number(v), "a number or null") for key in _RECORD_OPTIONAL_NUMBERS),
    *((key, lambda v: v is None or _is_int(v), "an integer or null") for key in _RECORD_OPTIONAL_INTS),
    ("output_tokens", _is_int, "an integer"),
    ("chunk_ms", _number_list, "a list of numbers"),
    ("chunk_tokens", _number_list, "a list of numbers"),
    ("spec", lambda v: v is None or isinstance(v, dict), "an object or null"),
)


def _check_record(path: Path, n: int, rec: Any) -> None:
    for key, is_valid, expected in _RECORD_CHECKS:
        if not is_valid(rec.get(key)):
            raise RunFormatError(f"{path}: record {n} ({rec.get('request_id')!r}): {key!r} should be {expected}, "
                                 f"got {rec.get(key)!r}")

"""The one progress line printed when a ladder step closes, made of the report's own cells for that step.

The ladder prints it from ``summary.closed_step_row``, the row ``summarize`` and the report compute for the same
step, and each figure through the step table's column (``columns.STEP_COLUMNS``): the line may show fewer
fields than the report, never different ones (#61). ``parse_step_line`` reads it back, for tests and tools.
"""

from __future__ import annotations

import re

from specbench.analysis.records.checks import refusal_statuses_text
from specbench.analysis.records.steprow import StepRow
from specbench.analysis.reporting.columns import RATE_COLUMNS, REFUSAL_COLUMNS, STEP_COLUMNS
from specbench.contract.policy import RETRY_AFTER_MAX_S

#: The report's columns the line carries, in order, with the words it prints them after.
LINE_FIELDS: tuple[tuple[str, str], ...] = (
    ("achieved C", "achieved C"), ("ok/total", "ok/total"), ("tok/s", "tok/s"), ("tok/s 95% CI", "95% CI"),
    ("per-req tok/s", "per-req tok/s"),
)
RATE_FIELDS: tuple[tuple[str, str], ...] = (("sent req/s", "sent req/s"), ("dropped", "dropped"))
#: where the server refused work: the count and share, then (not a column) its statuses and the Retry-After asked
REFUSED_FIELDS: tuple[tuple[str, str], ...] = (("refused", "refused"), ("back-off s", "back-off s"))
_CELLS = {c.header: c for c in (*STEP_COLUMNS, *RATE_COLUMNS, *REFUSAL_COLUMNS)}


def step_line(row: StepRow, n_steps: int, ended_by: str, *, lost: str = "") -> str:
    """'step 4/8 C=30: ended (ci) after 12.3 s window; achieved C 29.9; ok/total 84/84; tok/s 2984.6; ...'."""
    fields = (*LINE_FIELDS, *(RATE_FIELDS if row.target_rate is not None else ()),
              *(REFUSED_FIELDS if row.requests_refused else ()))
    cells = "; ".join(f"{words} {_CELLS[header].cell(row)}" for header, words in fields) + _refusals(row)
    window = f"after {row.window_s:.1f} s window" if row.window_s else "with no window"
    flags = f"; FLAGS: {_CELLS['flags'].cell(row)}" if row.flags else ""
    return f"step {row.step + 1}/{n_steps} {row.level_text}: ended ({ended_by}) {window}; {cells}{flags}{lost}"


def _refusals(row: StepRow) -> str:
    """'; as HTTP 503 with Retry-After up to 3600 s (honoured up to 30 s)': what the server said, beyond the
    count and the back-off (the report's columns)."""
    if not row.requests_refused:
        return ""
    asked = (f" with Retry-After up to {row.retry_after_max_s:g} s (honoured up to {RETRY_AFTER_MAX_S:g} s)"
             if row.retry_after_max_s is not None else "")
    return f"; as {refusal_statuses_text(row)}{asked}"


_LINE = re.compile(r"step (?P<n>\d+)/\d+ (?P<level>\S+): ended \((?P<ended_by>\w+)\) (?P<window>[^;]+); "
                   r"(?P<rest>.*)$")


def parse_step_line(line: str) -> dict[str, str] | None:
    """The report column -> cell text of a step line (plus ``step`` and ``flags``); None for another line."""
    match = _LINE.search(line)
    if match is None:
        return None
    words = {w: header for header, w in (*LINE_FIELDS, *RATE_FIELDS, *REFUSED_FIELDS)}
    out = {"step": str(int(match["n"]) - 1), "level": match["level"], "ended_by": match["ended_by"], "flags": ""}
    for part in match["rest"].split("; "):
        if part.startswith("FLAGS: "):
            out["flags"] = part[len("FLAGS: "):].split(" (lost")[0]
            continue
        word = next((w for w in sorted(words, key=len, reverse=True) if part.startswith(w + " ")), None)
        if word is not None:
            out[words[word]] = part[len(word) + 1:]
    return out

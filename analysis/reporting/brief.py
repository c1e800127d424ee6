"""The terminal's report after a comparison: the answer first, then one compact table.

Why: the full report is about 140 lines (decomposition, server-side tables, categories); on a terminal the
verdict sat in the middle of them. Here the verdict, the crossover, the recommendation, saturation, the
output-equivalence sentence, the why lines, single-prompt traps and the warnings come first, then the
per-level throughput table (C, tok/s of each side, ratio with its interval, winner), then where the rest is.
The full text is ``render_comparison`` / ``render_multi`` (``--verbose``, and report.md / report.html always).
Both leave through ``plain_lines``: data in a sentence reaches the terminal as visible escapes (#70).
"""

from __future__ import annotations

from collections.abc import Sequence

from specbench.analysis.records.checks import ValidityWarning
from specbench.analysis.reporting.category_report import category_brief
from specbench.analysis.reporting.columns import LEVEL_COLUMNS, REFINED_NOTE
from specbench.analysis.reporting.energy_report import brief_energy_line
from specbench.analysis.reporting.equivalence_report import multi_equivalence_lines
from specbench.analysis.reporting.multi_render import (
    best_text,
    level_columns,
    multi_saturation,
    refined_levels,
    switch_lines,
)
from specbench.analysis.reporting.render import render_warnings, saturation_lines, unfinished_lines, why_lines
from specbench.analysis.table import text_table
from specbench.analysis.verdicts.compare import Comparison
from specbench.analysis.verdicts.multi import MultiComparison, multi_equivalences
from specbench.contract.servertext import plain_lines

#: the per-level table's columns on the terminal (the report has them all)
BRIEF_HEADERS = ("C", "spec tok/s", "base tok/s", "ratio", "95% CI", "winner")
MORE = "Full tables (latency, why the ratio moves, server side, categories): report.md / report.html, or --verbose"
#: the most why lines and warning lines the terminal shows (the rest: report.md), so that the answer and its
#: table stay on one screen: the demo's terminal report had grown to 43 lines with 8 levels measured (#76)
BRIEF_WHY = 4
BRIEF_WARNINGS = 6


def brief_comparison(c: Comparison) -> str:
    """Verdict, crossover, recommendation, saturation, equivalence, why lines and warnings; then the table."""
    out = [f"Verdict: {c.verdict.text}",
           *(f"Rests on: {line}" for line in unfinished_lines(c)),
           *(f"Crossover: {line}" for line in c.crossover_lines),
           f"Recommendation: {c.recommendation.text}",
           *saturation_lines(c.saturation),
           *([f"Output equivalence: {c.equivalence.text}"] if c.equivalence is not None else []),
           *_capped([f"Why, C={line.removeprefix('C=')}" for line in why_lines(c)], BRIEF_WHY,
                    "Why: {} more levels in report.md"),
           *brief_energy_line(c),
           *(f"Note: {trap}" for trap in c.categories.traps),  # the single-prompt trap: the seed's own lesson
           *category_brief(c),
           *([f"Skipped: {c.skipped}"] if c.skipped else []),
           _brief_warnings(c.warnings)]
    if not c.open_loop and c.levels:
        columns = [col for col in LEVEL_COLUMNS if col.header in BRIEF_HEADERS]
        out += ["", text_table(columns, c.levels), *([REFINED_NOTE] if any(lv.refined for lv in c.levels) else [])]
    return plain_lines("\n".join([*out, MORE]))


def brief_multi(m: MultiComparison) -> str:
    """Best per level, the policy and its switch points, saturation, equivalence and warnings; then the table."""
    equivalences = multi_equivalences(m)
    out = [f"Best: {best_text(m)}", f"Policy: {m.policy.text}",
           *(f"Switch point: {line}" for line in switch_lines(m)),
           *(f"Saturation: {s.text}" for s in multi_saturation(m)),
           *(multi_equivalence_lines(equivalences, markdown=False) if equivalences else []),
           _brief_warnings(m.warnings)]
    if m.levels:
        out += ["", text_table(level_columns(m), m.levels), *([REFINED_NOTE] if refined_levels(m) else [])]
    return plain_lines("\n".join([*out, MORE]))


def _capped(lines: list[str], most: int, more: str) -> list[str]:
    """At most ``most`` lines: the first ``most - 1`` and one saying how many more (all of them when they fit)."""
    return lines if len(lines) <= most else [*lines[:most - 1], more.format(len(lines) - most + 1)]


def _brief_warnings(warnings: Sequence[ValidityWarning]) -> str:
    """The warnings' head line and at most ``BRIEF_WARNINGS`` of them (their count stays the whole count)."""
    head, *lines = render_warnings(warnings).splitlines()
    return "\n".join([head, *_capped(lines, BRIEF_WARNINGS, "  ... {} more in report.md")])

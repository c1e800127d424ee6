"""The per-category verdict in the outputs: its sentence, its category x level table and its JSON.

Category names come from prompt files (a dataset's own labels): they are data, escaped in Markdown
(``markdown_text``, the table's ``data`` column), one plain line on the terminal and written as plain strings in
JSON.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict
from typing import Any

from specbench.analysis.table import Column, fmt_num, markdown_table, text_table
from specbench.analysis.verdicts.category_verdict import FAMILY_CONFIDENCE, CategoryCell, CategoryVerdict
from specbench.analysis.verdicts.compare import Comparison
from specbench.contract.servertext import markdown_text, plain

CATEGORY_VERDICT_NOTE = (
    "Each cell: the category's throughput ratio (spec / baseline: achieved concurrency x the category's output "
    "tokens over its requests' summed lifetimes, in the same windows as the level's ratio), its interval, and "
    "the spec run's tokens per verify pass for the category. The intervals hold together at "
    f"{FAMILY_CONFIDENCE:.0%} (each at {{each}}, Bonferroni over {{cells}} cells); '+' the interval is above 1, "
    "'-' below, '?' it holds 1, 'n/a' too few requests for an interval.")


def verdict_of(c: Comparison) -> CategoryVerdict | None:
    """The comparison's per-category verdict where there is one to show: closed loop, two categories or more."""
    v = c.by_category
    if v is None or c.open_loop or len({cell.category for cell in v.cells}) < 2:
        return None
    return v


def cell_text(cell: CategoryCell | None) -> str:
    """'1.23x [1.05-1.41] + 2.9/pass'; 'n/a' parts where there is no interval."""
    if cell is None:
        return "-"
    mark = {"spec": "+", "baseline": "-", "unclear": "?"}.get(cell.winner or "", "n/a")
    # Three decimals where two would show an interval that excludes 1 as "1.00": the mark must be readable.
    places = 3 if any(v is not None and f"{v:.2f}" == "1.00" for v in (cell.low, cell.high)) else 2
    ratio = "-" if cell.ratio is None else f"{cell.ratio:.{places}f}x"
    interval = (f" [{cell.low:.{places}f}-{cell.high:.{places}f}]" if cell.low is not None and cell.high is not None
                else "")
    passes = f" {fmt_num(cell.tokens_per_pass, 1)}/pass" if cell.tokens_per_pass is not None else ""
    return f"{ratio}{interval} {mark}{passes}"


def _columns(v: CategoryVerdict) -> list[Column[str]]:
    levels = sorted({cell.target_c for cell in v.cells})
    at = {(cell.category, cell.target_c): cell for cell in v.cells}
    cols: list[Column[str]] = [Column("category", str, left=True, data=True)]
    cols += [Column(f"C={level}", _cell_of(at, level), left=True) for level in levels]
    return cols


def _cell_of(at: dict[tuple[str, int], CategoryCell], level: int) -> Callable[[str], str]:
    return lambda category: cell_text(at.get((category, level)))


def _note(v: CategoryVerdict) -> str:
    return CATEGORY_VERDICT_NOTE.format(each=f"{v.confidence:.2%}", cells=v.family_cells)


def category_verdict_markdown(c: Comparison) -> list[str]:
    """The report's section: the sentence, the table, the heat map's place is the Plots section."""
    v = verdict_of(c)
    if v is None:
        return []
    names = sorted({cell.category for cell in v.cells})
    gaps = [cell for cell in v.cells if cell.note]
    return ["### Where speculation pays, per category", "", f"**{markdown_text(v.sentence, None)}**", "",
            _note(v), "", markdown_table(_columns(v), names), "",
            *(f"- C={cell.target_c} {markdown_text(cell.category, None)}: {markdown_text(cell.note, None)}"
              for cell in gaps), *([""] if gaps else [])]


def category_verdict_text(c: Comparison) -> list[str]:
    """The terminal's lines: the sentence and the table."""
    v = verdict_of(c)
    if v is None:
        return []
    names = sorted({cell.category for cell in v.cells})
    return [f"Per category: {plain(v.sentence, None)}", _note(v),
            text_table(_columns(v), names)]


def category_brief(c: Comparison) -> list[str]:
    """The sentence on the short terminal output, where at least one category decided something."""
    v = verdict_of(c)
    if v is None or v.sentence is None or all(o.kind == "unclear" for o in v.outcomes):
        return []
    return [f"Per category: {plain(v.sentence, None)}"]


def category_verdict_json(c: Comparison) -> dict[str, Any] | None:
    v = c.by_category
    if v is None:
        return None
    return {"sentence": v.sentence, "confidence_each": v.confidence, "confidence_family": FAMILY_CONFIDENCE,
            "cells": [{**asdict(cell), "winner": cell.winner} for cell in v.cells],
            "outcomes": [{**asdict(o), "last_pays": o.last_pays, "first_loses": o.first_loses} for o in v.outcomes]}

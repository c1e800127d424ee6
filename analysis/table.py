"""Table layout and cell formats shared by the terminal and report.md, so both show identical cells.

A table is a list of ``Column``s (header, how to turn a row into a cell, alignment); the same columns
render as aligned text or as Markdown. Missing figures show as "-", ratios as "0.84x".

A cell may hold a server's or a dataset's text (a category, a prompt id): such a column says so (``data``), and
each renderer applies its output's rule to it (``contract.servertext``): words in Markdown, never markup; and no
cell of any column reaches a terminal with a control character in it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

from specbench.contract.servertext import markdown_text, plain

Row = TypeVar("Row")
MISSING = "-"


@dataclass(frozen=True)
class Column(Generic[Row]):
    """One column: its header (units included), its cell text for a row, right- or left-aligned; ``data``: the
    cell holds text from a server or a dataset, escaped as Markdown in report.md."""

    header: str
    cell: Callable[[Row], str]
    left: bool = False
    data: bool = False


def text_table(columns: Sequence[Column[Row]], rows: Sequence[Row]) -> str:
    """Aligned plain-text table with a rule under the header."""
    cells = [[plain(col.cell(row), None) for col in columns] for row in rows]
    widths = [max([len(col.header)] + [len(line[i]) for line in cells]) for i, col in enumerate(columns)]

    def line(values: Sequence[str]) -> str:
        parts = [v.ljust(w) if col.left else v.rjust(w) for v, w, col in zip(values, widths, columns, strict=True)]
        return "  ".join(parts).rstrip()

    rule = "  ".join("-" * w for w in widths)
    return "\n".join([line([c.header for c in columns]), rule, *(line(c) for c in cells)])


def markdown_table(columns: Sequence[Column[Row]], rows: Sequence[Row]) -> str:
    """GitHub-flavoured Markdown table with the same cells as ``text_table``."""
    head = "| " + " | ".join(c.header for c in columns) + " |"
    align = "|" + "|".join(":---" if c.left else "---:" for c in columns) + "|"
    body = ["| " + " | ".join(_markdown_cell(c, row) for c in columns) + " |" for row in rows]
    return "\n".join([head, align, *body])


def _markdown_cell(column: Column[Row], row: Row) -> str:
    """A data cell as escaped words (its pipes too), any other with its pipes escaped and its newlines gone."""
    text = column.cell(row)
    return markdown_text(text, None) if column.data else plain(text, None).replace("|", "\\|")


def fmt_num(value: float | None, decimals: int = 1) -> str:
    return MISSING if value is None else f"{value:.{decimals}f}"


def fmt_pct(value: float | None) -> str:
    return MISSING if value is None else f"{value:.0%}"


def fmt_ratio(value: float | None) -> str:
    return MISSING if value is None else f"{value:.2f}x"


def fmt_interval(low: float | None, high: float | None) -> str:
    return MISSING if low is None or high is None else f"{low:.2f}-{high:.2f}x"


def fmt_ms(seconds: float | None) -> str:
    """Seconds shown in milliseconds, with precision that suits the size."""
    if seconds is None:
        return MISSING
    ms = seconds * 1000.0
    return f"{ms:.2f}" if ms < 10 else f"{ms:.1f}" if ms < 1000 else f"{ms:.0f}"


def fmt_s(seconds: float | None) -> str:
    if seconds is None:
        return MISSING
    return f"{seconds:.2f}" if seconds < 10 else f"{seconds:.1f}"


def joined(*cells: str) -> str:
    """Several figures in one cell, 'p50/p99' style; a single dash when all are missing."""
    return MISSING if all(c == MISSING for c in cells) else "/".join(cells)

"""report.md for a comparison: the verdict and its picture first (the ratio with its intervals, #61), then the
terminal's content as Markdown, both runs' step tables and the other plots.

Every sentence that can carry a run's or a dataset's text (a label in a run's name, a category, a prompt id) is
written through ``_md`` (``contract.servertext.markdown_text``): words, never markup (#70). Our own marks in such a
sentence are escaped too, which CommonMark renders as the same characters.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from specbench.analysis.reporting.category_report import category_verdict_markdown
from specbench.analysis.reporting.columns import (
    CATEGORY_COLUMNS,
    LEVEL_COLUMNS,
    REFINED_NOTE,
    REFINED_RATE_NOTE,
    SWITCH_COLUMNS,
    has_server_side,
    server_columns,
    slo_level_columns,
    step_columns,
)
from specbench.analysis.reporting.decompose_report import DECOMPOSITION_COLUMNS, DECOMPOSITION_NOTE
from specbench.analysis.reporting.energy_report import energy_lines
from specbench.analysis.reporting.equivalence_report import equivalence_markdown
from specbench.analysis.reporting.render import (
    PERCENTILE_NOTE,
    SERVER_NOTE,
    decompositions,
    describe_run,
    slo_heading,
    unfinished_lines,
    unreported_note,
    why_lines,
)
from specbench.analysis.table import fmt_num, markdown_table
from specbench.analysis.verdicts.categories import ALL
from specbench.analysis.verdicts.compare import Comparison
from specbench.contract.servertext import markdown_text


def _md(text: str) -> str:
    """A sentence with data in it as Markdown words, whole (uncut)."""
    return markdown_text(text, None)


PLOT_CAPTIONS = {
    "throughput_vs_c.png": "Throughput against concurrency",
    "ratio_vs_c.png": "Spec / baseline throughput ratio with 95% intervals and the crossover band",
    "latency_vs_c.png": "TTFT and end-to-end latency percentiles",
    "categories.png": "Acceptance length and per-request speed-up by category",
    "category_ratio.png": "Throughput ratio per category and level (spec / baseline), marked where its interval is "
                          "above or below 1",
    "acceptance_hist.png": "Tokens per verify pass per request, and the server's acceptance by draft position",
    "energy_vs_c.png": "GPU energy per output token against concurrency, and the spec / baseline ratio",
    "server_timeline.png": "Requests running and queued, and KV-cache use, as the servers reported them",
    "equivalence_vs_c.png": "Changed answers at temperature 0 against C, with each server's noise floor",
}


def render_report(comparison: Comparison, plots: Sequence[Path] = ()) -> str:
    """The whole comparison as one Markdown document; ``plots`` are embedded by file name."""
    c = comparison
    answer, others = answer_plot(plots)
    md = [
        "# Speculative decoding against baseline",
        "",
        "## Verdict",
        "",
        _md(c.verdict.text[0].upper() + c.verdict.text[1:] + "."),
        "",
        *(f"- **Rests on**: {_md(line)}" for line in unfinished_lines(c)),
        *(f"- **Crossover**: {_md(line)}" for line in c.crossover_lines),
        *(f"- **Saturation**: {_md(s.text)}" for s in c.saturation),
        *([f"- **Skipped**: {_md(c.skipped)}"] if c.skipped else []),
        *([""] if c.crossover_lines or c.saturation or c.skipped or unfinished_lines(c) else []),
        *plot_lines(answer),
        "## Runs",
        "",
        f"- **Baseline**: {describe_run(c.baseline, markdown=True)}",
        f"- **Spec**: {describe_run(c.spec, markdown=True)}",
        "",
        "## Recommendation",
        "",
        _md(c.recommendation.text[0].upper() + c.recommendation.text[1:] + "."),
        "",
    ]
    if c.recommendation.levels:
        md += [markdown_table(SWITCH_COLUMNS, c.recommendation.levels), ""]
    md += equivalence_markdown(c.equivalence) if c.equivalence is not None else []
    if c.slo is not None:
        s = c.slo
        md += [
            "## Under the SLO", "", slo_heading(c) + ".", "",
            f"- **Capacity under the SLO, spec**: {s.spec_capacity.text(s.unit)}",
            f"- **Capacity under the SLO, baseline**: {s.baseline_capacity.text(s.unit)}", "",
            markdown_table(slo_level_columns(s.open_loop), s.levels) if s.levels else "No level with SLO figures.",
            "",
            *([REFINED_RATE_NOTE, ""] if any(lv.baseline.refined or lv.spec.refined for lv in s.levels) else []),
        ]
    if not c.open_loop:
        md += [
            "## Per level",
            "",
            "Ratios are spec / baseline. 95% intervals: `bm` = batch means with the batch length taken from the "
            "token rate's own autocorrelation (Welch t on the log ratio); `life` = the conservative fallback, a "
            f"bootstrap over batches of one median request (seed {c.seed}, {c.n_boot} resamples).",
            "",
            markdown_table(LEVEL_COLUMNS, c.levels) if c.levels else "No level was measured in both runs.",
            "",
            *([REFINED_NOTE, ""] if any(lv.refined for lv in c.levels) else []),
        ]
    if decompositions(c):
        md += ["### Why the ratio moves", "", DECOMPOSITION_NOTE[0].upper() + DECOMPOSITION_NOTE[1:] + ".", "",
               markdown_table(DECOMPOSITION_COLUMNS, decompositions(c)), ""]
    if why_lines(c):
        md += ["### Why, per level", "", "From the servers' own figures (`/metrics`), the load processes' CPU and "
               "the decomposition above:", "", *(f"- {_md(line)}" for line in why_lines(c)), ""]
    if energy_lines(c):
        head, *rest = energy_lines(c)
        md += ["### Energy per output token", "", _md(head), "", *(f"- {_md(line.strip())}" for line in rest), ""]
    md += _categories(c)
    md += ["## Warnings", ""]
    md += [f"- `{w.code}`: {_md(w.message)}" for w in c.warnings] or ["None."]
    md += [""]
    for summary in (c.baseline, c.spec):
        md += [f"## Steps: {_md(summary.name)}", "", markdown_table(step_columns(summary), summary.rows), "",
               PERCENTILE_NOTE, ""]
        if has_server_side(summary.rows):
            md += [f"Server side ({SERVER_NOTE}):", "", markdown_table(server_columns(summary), summary.rows), "",
                   *(f"{line}\n" for line in unreported_note(summary))]
    if others:
        md += ["## Plots", "", *plot_lines(others)]
    md += ["Figures are defined in `analysis/README.md` (throughput in the measured window, per-token ITL, "
           "TPOT, acceptance length, bootstrap interval).", ""]
    return "\n".join(md)


#: The one picture that answers the question, shown beside the verdict (#61): the ratio against concurrency
#: with its 95% intervals and the crossover band.
ANSWER_PLOT = "ratio_vs_c.png"


def answer_plot(plots: Sequence[Path], name: str = ANSWER_PLOT) -> tuple[list[Path], list[Path]]:
    """The plots split into the answer's picture (shown beside the verdict) and the rest (the Plots section)."""
    answer = [p for p in plots if p.name == name]
    return answer, [p for p in plots if p.name != name]


def plot_lines(plots: Sequence[Path], captions: dict[str, str] | None = None) -> list[str]:
    """Markdown image lines for ``plots``, each captioned and followed by a blank line."""
    named = PLOT_CAPTIONS if captions is None else captions
    return [f"![{named.get(p.name, p.stem)}]({p.name})\n" for p in plots]


def _categories(c: Comparison) -> list[str]:
    rows = c.categories.rows
    if not rows:
        return []
    md = ["## Per category", "", *category_verdict_markdown(c)]
    for level in sorted({r.target_c for r in rows}):
        at_level = [r for r in rows if r.target_c == level]
        if level != min(r.target_c for r in rows) and not any(r.category != ALL for r in at_level):
            continue
        md += [f"### C={level}", "", markdown_table(CATEGORY_COLUMNS, at_level), ""]
    md += [f"- {_md(t)}" for t in c.categories.traps]
    accept = ", ".join(f"{_md(cat)} {fmt_num(v, 2)}" for cat, v in c.categories.accept_by_category)
    md += ["", f"Acceptance length by category (spec run, all compared levels): {accept or '-'}.", ""]
    return md

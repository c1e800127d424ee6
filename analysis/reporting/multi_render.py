"""Terminal text and report.md of a many-configuration comparison, from the same columns.

The per-level table has one throughput/ratio pair per configuration, then the best configuration, its ratio
to the runner-up with the 95% interval and whether that is significant. Every figure comes from
``multi.compare_many``; nothing is recomputed here.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from specbench.analysis.reporting.columns import REFINED_MARK, REFINED_NOTE, STEP_COLUMNS
from specbench.analysis.reporting.decompose_report import DECOMPOSITION_COLUMNS, DECOMPOSITION_NOTE
from specbench.analysis.reporting.energy_report import energy_lines
from specbench.analysis.reporting.equivalence_report import multi_equivalence_lines
from specbench.analysis.reporting.render import decompositions, describe_run, render_warnings, why_lines
from specbench.analysis.reporting.report import answer_plot, plot_lines
from specbench.analysis.table import Column, fmt_interval, fmt_num, fmt_ratio, markdown_table, text_table
from specbench.analysis.verdicts.multi import MultiComparison, MultiLevel, multi_equivalences
from specbench.analysis.verdicts.policy import PolicyLevel
from specbench.analysis.verdicts.refine import added_near, crossing_statement
from specbench.analysis.verdicts.saturation import Saturation, saturation_of
from specbench.contract.servertext import file_slug, markdown_text, plain_lines

ANSWER_PLOT = "throughput_vs_c.png"  # its lower panel: each configuration's ratio with 95% intervals
PLOT_CAPTIONS = {
    "throughput_vs_c.png": "Every configuration's throughput, and its ratio to the baseline with 95% intervals",
    "ratio_heatmap.png": "Throughput ratio to the baseline, configuration x concurrency (best per level boxed)",
}


def refined_levels(m: MultiComparison) -> list[int]:
    """Levels added after the ladders to pin a switch point (#27)."""
    return sorted({lv.target_c for pair in m.pairs for lv in pair.levels if lv.refined})


def switch_lines(m: MultiComparison) -> list[str]:
    """Each switch point with its interval and how it was found ('C = 6.1 (5.5-6.8), from 3 added levels')."""
    levels = [p.target_c for p in m.policy.levels]
    added = refined_levels(m)
    return [f"{s.from_name} -> {s.to_name} at {crossing_statement(s, added_near(s, levels, added))}"
            for s in m.policy.switches]


def multi_saturation(m: MultiComparison) -> list[Saturation]:
    """Each server's saturation, under its name in this report."""
    if not m.pairs:
        return []
    sides = [(m.baseline_name, m.pairs[0].baseline), *((n, p.spec) for n, p in zip(m.names, m.pairs, strict=True))]
    return [saturation_of(replace(summary, name=name)) for name, summary in sides]


def level_columns(m: MultiComparison) -> list[Column[MultiLevel]]:
    """C, the baseline's tok/s, each configuration's tok/s and ratio (95% CI), then the best and its margin."""
    added = set(refined_levels(m))
    cols: list[Column[MultiLevel]] = [
        Column("C", lambda lv: f"{lv.target_c}{REFINED_MARK if lv.target_c in added else ''}")]
    base = m.baseline_name
    cols.append(_tok_column(base))
    for name in m.names:
        cols += [_tok_column(name), _ratio_column(name)]
    cols += [
        Column("best", lambda lv: lv.best or "-", left=True),
        Column("runner-up", lambda lv: lv.runner_up or "-", left=True),
        Column("best/runner-up (95% CI)", lambda lv: _margin_cell(lv)),
        Column("significant", lambda lv: _significant(lv), left=True),
    ]
    return cols


def policy_columns(m: MultiComparison) -> list[Column[PolicyLevel]]:
    fixed = m.policy.fixed or "fixed"
    return [
        Column("C", lambda p: str(p.target_c)),
        Column("policy runs", lambda p: p.uses, left=True),
        Column("policy tok/s", lambda p: fmt_num(p.policy_tok_s)),
        Column(f"fixed ({fixed}) tok/s", lambda p: fmt_num(p.fixed_tok_s)),
        Column("vs fixed", lambda p: fmt_ratio(p.vs_fixed)),
    ]


def _tok_column(name: str) -> Column[MultiLevel]:
    return Column(f"{name} tok/s", lambda lv: fmt_num(_tok(lv, name)))


def _ratio_column(name: str) -> Column[MultiLevel]:
    return Column(f"{name} ratio (95% CI)", lambda lv: _ratio_cell(lv, name))


def _tok(lv: MultiLevel, name: str) -> float | None:
    cl = lv.config(name)
    return cl.tok_s if cl else None


def _ratio_cell(lv: MultiLevel, name: str) -> str:
    cl = lv.config(name)
    if cl is None or cl.ratio is None:
        return "-"
    interval = fmt_interval(cl.ratio_low, cl.ratio_high)
    return fmt_ratio(cl.ratio) + (f" ({interval})" if interval != "-" else "")


def _margin_cell(lv: MultiLevel) -> str:
    if lv.best_ratio is None:
        return "-"
    interval = fmt_interval(lv.best_low, lv.best_high)
    return fmt_ratio(lv.best_ratio) + (f" ({interval})" if interval != "-" else "")


def _significant(lv: MultiLevel) -> str:
    return {True: "yes", False: "no", None: "-"}[lv.significant]


def best_text(m: MultiComparison) -> str:
    """One sentence: the best configuration at each level, and where it is not clearly ahead."""
    if not m.levels:
        return "no level was measured in the baseline and a configuration; nothing to compare"
    parts = [f"C={lv.target_c}: {lv.best or '-'}" for lv in m.levels]
    weak = [lv for lv in m.levels if lv.runner_up and lv.significant is not True]
    text = "best per level: " + ", ".join(parts)
    if weak:
        text += ("; not significantly better than the runner-up at "
                 + ", ".join(f"C={lv.target_c} ({lv.runner_up} within noise)" if lv.significant is False
                             else f"C={lv.target_c} (no interval)" for lv in weak))
    else:
        text += "; each significantly better than the runner-up (95% interval of their ratio above 1)"
    return text


def render_multi(m: MultiComparison) -> str:
    """The terminal report: runs, the per-level table, the best per level, the policy and the warnings."""
    out = [f"{m.baseline_name:<12}{describe_run(m.baseline)}"]
    out += [f"{name:<12}{describe_run(pair.spec)}" for name, pair in zip(m.names, m.pairs, strict=True)]
    out += ["", "Per level: ratios are configuration / baseline; 95% CI from batch means sized by the token rate's "
            "autocorrelation, or by bootstrap over batches of one median request where the data allow no shorter "
            f"batch (seed {m.seed}, {m.n_boot} resamples)",
            text_table(level_columns(m), m.levels) if m.levels else "(no level to compare)", "",
            *([REFINED_NOTE] if refined_levels(m) else []),
            f"Best: {best_text(m)}", f"Policy: {m.policy.text}",
            *(f"Switch point: {line}" for line in switch_lines(m)),
            *(f"Saturation: {s.text}" for s in multi_saturation(m))]
    if m.policy.levels:
        out += ["", text_table(policy_columns(m), m.policy.levels)]
    out += why_section(m, markdown=False)
    out += energy_section(m, markdown=False)
    out += ["", *multi_equivalence_lines(multi_equivalences(m), markdown=False)]
    out += ["", render_warnings(m.warnings)]
    return plain_lines("\n".join(out))


def render_multi_report(m: MultiComparison, plots: Sequence[Path] = ()) -> str:
    """report.md of a many-configuration comparison; ``plots`` are embedded by file name."""
    answer, rest = answer_plot(plots, ANSWER_PLOT)  # the ratios with their intervals, beside the verdict (#61)
    md = ["# Speculative configurations against baseline", ""]
    md += ["## Verdict", "", _md(_sentence(best_text(m))), "", *plot_lines(answer, PLOT_CAPTIONS), "## Runs", ""]
    md += [f"- **{_md(m.baseline_name)}** (baseline): {describe_run(m.baseline, markdown=True)}"]
    md += [f"- **{_md(name)}**: {describe_run(pair.spec, markdown=True)}"
           for name, pair in zip(m.names, m.pairs, strict=True)]
    md += ["", "## Policy", "", _md(_sentence(m.policy.text)), ""]
    md += [*(f"- **Switch point**: {_md(line)}" for line in switch_lines(m)),
           *(f"- **Saturation**: {_md(s.text)}" for s in multi_saturation(m)), ""]
    if m.policy.levels:
        md += [markdown_table(policy_columns(m), m.policy.levels), ""]
    md += multi_equivalence_lines(multi_equivalences(m), markdown=True)
    md += ["## Per level", "",
           "Ratios are configuration / baseline. Intervals: 95% bootstrap over each window's time batches "
           f"(seed {m.seed}, {m.n_boot} resamples); best/runner-up uses the same batches.", "",
           markdown_table(level_columns(m), m.levels) if m.levels else "No level to compare.", ""]
    if rest:
        md += ["## Plots", "", *plot_lines(rest, PLOT_CAPTIONS)]
    md += ["## Each configuration against the baseline", ""]
    for name, pair in zip(m.names, m.pairs, strict=True):
        md += [f"- **{_md(name)}**: {_md(pair.verdict.text)}. Recommendation: {_md(pair.recommendation.text)}. "
               f"Full two-run report: `pairs/{pair_dir(name)}/report.md`."]
    md += why_section(m, markdown=True)
    md += energy_section(m, markdown=True)
    md += ["", "## Warnings", ""]
    md += [f"- `{w.code}`: {_md(w.message)}" for w in m.warnings] or ["None."]
    md += [""]
    for name, summary in ((m.baseline_name, m.baseline), *((n, p.spec) for n, p in zip(m.names, m.pairs,
                                                                                      strict=True))):
        md += [f"## Steps: {_md(name)}", "", markdown_table(STEP_COLUMNS, summary.rows), ""]
    md += ["Figures are defined in `analysis/README.md` (throughput in the measured window, bootstrap interval, "
           "switching policy).", ""]
    return "\n".join(md)


def why_section(m: MultiComparison, *, markdown: bool) -> list[str]:
    """Each configuration's decomposition table and why lines (``analysis.verdicts.decompose``), as its pair
    has them."""
    out = ["", "## Why the ratio moves, per configuration" if markdown else "Why the ratio moves, per configuration "
           f"({DECOMPOSITION_NOTE})"]
    if markdown:
        out += ["", _sentence(DECOMPOSITION_NOTE)]
    shown = False
    for name, pair in zip(m.names, m.pairs, strict=True):
        found = decompositions(pair)
        if not found:
            continue
        shown = True
        table = markdown_table if markdown else text_table
        out += ["", f"### {_md(name)}" if markdown else f"{name}:", *([""] if markdown else []),
                table(DECOMPOSITION_COLUMNS, found)]
        out += [("- " + _md(line) if markdown else "  " + line) for line in why_lines(pair)]
    return out if shown else []


def energy_section(m: MultiComparison, *, markdown: bool) -> list[str]:
    """Each configuration's energy per output token against the baseline's, as its pair report has it (#40);
    nothing where no run had GPU telemetry."""
    out: list[str] = []
    for name, pair in zip(m.names, m.pairs, strict=True):
        lines = energy_lines(pair)
        if lines:
            out += ["", f"### {_md(name)}" if markdown else f"{name}:", *([""] if markdown else []),
                    *(("- " + _md(line.strip()) if markdown else "  " + line) for line in lines)]
    if not out:
        return []
    return ["", "## Energy per output token, per configuration" if markdown
            else "Energy per output token, per configuration (configuration / baseline)", *out]


def _md(text: str) -> str:
    """A name or a sentence with data in it as Markdown words (#70)."""
    return markdown_text(text, None)


def pair_dir(name: str) -> str:
    """The directory of a configuration's two-run report under ``pairs/``: its name, if that is a safe file name
    (the command line and the sweep file allow only such names), else a slug of it (``file_slug``)."""
    return file_slug(name) or "unnamed"


def _sentence(text: str) -> str:
    return text[0].upper() + text[1:] + "." if text else ""

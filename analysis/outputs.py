"""Writing a summary's or a comparison's files into an output directory."""

from __future__ import annotations

import json
from pathlib import Path

from specbench.analysis.records.summary import RunSummary
from specbench.analysis.reporting.equivalence_report import Named, equivalence_csv
from specbench.analysis.reporting.files import make_out_dir, write_whole
from specbench.analysis.reporting.html import write_html
from specbench.analysis.reporting.render import render_comparison, render_summary_table
from specbench.analysis.reporting.report import render_report
from specbench.analysis.reporting.serialize import (
    comparison_csv,
    comparison_json,
    decomposition_csv,
    steps_csv,
    summary_json,
)
from specbench.analysis.verdicts.compare import Comparison
from specbench.analysis.verdicts.multi import MultiComparison, multi_equivalences


def _equivalence_plot(named: Named, out: Path, baseline_name: str) -> list[Path]:
    """equivalence_vs_c.png when at least one pair's answers were checked."""
    if not any(eq.checked for _, eq in named):
        return []
    from specbench.analysis.charts.equivalence_plots import plot_equivalence

    return [plot_equivalence(named, out / "equivalence_vs_c.png", baseline_name)]


def _write(path: Path, text: str) -> Path:
    return write_whole(path, text)


def write_summary_outputs(summary: RunSummary, out_dir: str | Path) -> list[Path]:
    """summary.txt, summary.json, summary.csv and the run's plots; returns the paths written."""
    from specbench.analysis.charts.plots import summary_plots  # matplotlib only when files are asked for

    out = make_out_dir(Path(out_dir))
    return [
        _write(out / "summary.txt", render_summary_table(summary) + "\n"),
        _write(out / "summary.json", json.dumps(summary_json(summary), indent=2) + "\n"),
        _write(out / "summary.csv", steps_csv(summary)),
        *summary_plots(summary, out),
    ]


def write_comparison_outputs(comparison: Comparison, out_dir: str | Path) -> list[Path]:
    """comparison.txt, report.md, report.html, comparison.csv, comparison.json and four plots; the paths."""
    from specbench.analysis.charts.plots import comparison_plots  # matplotlib only when files are asked for

    out = make_out_dir(Path(out_dir))
    plots = comparison_plots(comparison, out)
    named = [("spec", comparison.equivalence)] if comparison.equivalence is not None else []
    plots += _equivalence_plot(named, out, "baseline")
    report = render_report(comparison, plots)
    return [
        _write(out / "comparison.txt", render_comparison(comparison) + "\n"),
        _write(out / "report.md", report),
        write_html(report, out, title="Speculative decoding against baseline", images=plots),
        _write(out / "comparison.csv", comparison_csv(comparison)),
        _write(out / "decomposition.csv", decomposition_csv(comparison)),
        _write(out / "equivalence.csv", equivalence_csv(named)),
        _write(out / "comparison.json", json.dumps(comparison_json(comparison), indent=2) + "\n"),
        *plots,
    ]


def write_outputs(multi: MultiComparison, out_dir: str | Path) -> list[Path]:
    """Any comparison's files: the two-run files for one configuration, else the many-configuration ones."""
    if len(multi.pairs) == 1:
        return write_comparison_outputs(multi.pairs[0], out_dir)
    return write_multi_outputs(multi, out_dir)


def write_multi_outputs(multi: MultiComparison, out_dir: str | Path) -> list[Path]:
    """comparison.txt, report.md, report.html, comparison.csv/.json, two plots, and pairs/NAME/ per configuration.

    Each ``pairs/NAME/`` holds that configuration's full two-run report against the baseline (latency and
    per-category figures included), so nothing the two-run report shows is lost in the combined one.
    """
    from specbench.analysis.charts.multi_plots import multi_plots  # matplotlib only when files are asked for
    from specbench.analysis.reporting.multi_render import pair_dir, render_multi, render_multi_report
    from specbench.analysis.reporting.multi_serialize import multi_csv, multi_json

    out = make_out_dir(Path(out_dir))
    named = multi_equivalences(multi)
    plots = [*multi_plots(multi, out), *_equivalence_plot(named, out, multi.baseline_name)]
    report = render_multi_report(multi, plots)
    written = [
        _write(out / "comparison.txt", render_multi(multi) + "\n"),
        _write(out / "report.md", report),
        write_html(report, out, title="Speculative configurations against baseline", images=plots),
        _write(out / "comparison.csv", multi_csv(multi)),
        _write(out / "equivalence.csv", equivalence_csv(named)),
        _write(out / "comparison.json", json.dumps(multi_json(multi), indent=2) + "\n"),
        *plots,
    ]
    for name, pair in zip(multi.names, multi.pairs, strict=True):
        written += write_comparison_outputs(pair, out / "pairs" / pair_dir(name))
    return written

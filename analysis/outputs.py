"""Writing a summary's or a comparison's files into an output directory."""

from __future__ import annotations

import json
from pathlib import Path

from analysis.compare import Comparison
from analysis.render import render_comparison, render_summary_table
from analysis.report import render_report
from analysis.serialize import comparison_csv, comparison_json, steps_csv, summary_json
from analysis.summary import RunSummary


def _write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def write_summary_outputs(summary: RunSummary, out_dir: str | Path) -> list[Path]:
    """summary.txt, summary.json, summary.csv and the run's plots; returns the paths written."""
    from analysis.plots import summary_plots  # matplotlib only when files are asked for

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    return [
        _write(out / "summary.txt", render_summary_table(summary) + "\n"),
        _write(out / "summary.json", json.dumps(summary_json(summary), indent=2) + "\n"),
        _write(out / "summary.csv", steps_csv(summary)),
        *summary_plots(summary, out),
    ]


def write_comparison_outputs(comparison: Comparison, out_dir: str | Path) -> list[Path]:
    """comparison.txt, report.md, comparison.csv, comparison.json and four plots; returns the paths."""
    from analysis.plots import comparison_plots  # matplotlib only when files are asked for

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    plots = comparison_plots(comparison, out)
    return [
        _write(out / "comparison.txt", render_comparison(comparison) + "\n"),
        _write(out / "report.md", render_report(comparison, plots)),
        _write(out / "comparison.csv", comparison_csv(comparison)),
        _write(out / "comparison.json", json.dumps(comparison_json(comparison), indent=2) + "\n"),
        *plots,
    ]

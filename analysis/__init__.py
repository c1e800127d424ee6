"""Analysis of run directories: per-step summaries and baseline-vs-speculative comparisons.

Pure Python, numpy and matplotlib; never imports Locust, so a run can be analysed anywhere. Public API:
``summarize_run``, ``compare_runs``, ``render_summary_table``, ``render_comparison``,
``write_comparison_outputs``, ``write_summary_outputs``, ``load_run`` and ``main`` (the CLI); for many
configurations against one baseline ``compare_many``, ``render_multi``, ``write_outputs`` and ``multi_json``.
Names are resolved lazily, so ``import contract.window`` (the live ladder's import) stays light.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

_EXPORTS = {
    "summarize_run": "specbench.analysis.records.summary",
    "RunSummary": "specbench.analysis.records.summary",
    "StepRow": "specbench.analysis.records.summary",
    "compare_runs": "specbench.analysis.verdicts.compare",
    "Comparison": "specbench.analysis.verdicts.compare",
    "LevelComparison": "specbench.analysis.verdicts.compare",
    "render_summary_table": "specbench.analysis.reporting.render",
    "render_comparison": "specbench.analysis.reporting.render",
    "write_comparison_outputs": "specbench.analysis.outputs",
    "write_summary_outputs": "specbench.analysis.outputs",
    "summary_json": "specbench.analysis.reporting.serialize",
    "comparison_json": "specbench.analysis.reporting.serialize",
    "compare_many": "specbench.analysis.verdicts.multi",
    "MultiComparison": "specbench.analysis.verdicts.multi",
    "render_multi": "specbench.analysis.reporting.multi_render",
    "write_outputs": "specbench.analysis.outputs",
    "write_multi_outputs": "specbench.analysis.outputs",
    "multi_json": "specbench.analysis.reporting.multi_serialize",
    "load_run": "specbench.analysis.records.load",
    "ValidityWarning": "specbench.analysis.records.checks",
    "main": "specbench.analysis.cli",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'analysis' has no attribute {name!r}")

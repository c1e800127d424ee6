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
    "summarize_run": "analysis.records.summary",
    "RunSummary": "analysis.records.summary",
    "StepRow": "analysis.records.summary",
    "compare_runs": "analysis.verdicts.compare",
    "Comparison": "analysis.verdicts.compare",
    "LevelComparison": "analysis.verdicts.compare",
    "render_summary_table": "analysis.reporting.render",
    "render_comparison": "analysis.reporting.render",
    "write_comparison_outputs": "analysis.outputs",
    "write_summary_outputs": "analysis.outputs",
    "summary_json": "analysis.reporting.serialize",
    "comparison_json": "analysis.reporting.serialize",
    "compare_many": "analysis.verdicts.multi",
    "MultiComparison": "analysis.verdicts.multi",
    "render_multi": "analysis.reporting.multi_render",
    "write_outputs": "analysis.outputs",
    "write_multi_outputs": "analysis.outputs",
    "multi_json": "analysis.reporting.multi_serialize",
    "load_run": "analysis.records.load",
    "ValidityWarning": "analysis.records.checks",
    "main": "analysis.cli",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'analysis' has no attribute {name!r}")

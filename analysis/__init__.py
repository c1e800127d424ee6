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
    "summarize_run": "analysis.summary",
    "RunSummary": "analysis.summary",
    "StepRow": "analysis.summary",
    "compare_runs": "analysis.compare",
    "Comparison": "analysis.compare",
    "LevelComparison": "analysis.compare",
    "render_summary_table": "analysis.render",
    "render_comparison": "analysis.render",
    "write_comparison_outputs": "analysis.outputs",
    "write_summary_outputs": "analysis.outputs",
    "summary_json": "analysis.serialize",
    "comparison_json": "analysis.serialize",
    "compare_many": "analysis.multi",
    "MultiComparison": "analysis.multi",
    "render_multi": "analysis.multi_render",
    "write_outputs": "analysis.outputs",
    "write_multi_outputs": "analysis.outputs",
    "multi_json": "analysis.multi_serialize",
    "load_run": "analysis.load",
    "ValidityWarning": "analysis.checks",
    "main": "analysis.cli",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'analysis' has no attribute {name!r}")

"""The terminal's answer stays on one screen (#76): at most BRIEF_WHY why lines and BRIEF_WARNINGS warning lines,
the rest counted and sent to report.md; at the cap itself every line is shown (the near miss)."""

from __future__ import annotations

from dataclasses import replace

from synthetic_runs import seed_specs, write_run

from specbench.analysis.records.checks import ValidityWarning
from specbench.analysis.records.load import load_run
from specbench.analysis.reporting.brief import BRIEF_WARNINGS, BRIEF_WHY, brief_comparison
from specbench.analysis.verdicts.compare import compare_runs


def test_why_lines_and_warnings_are_capped_on_the_terminal_and_all_shown_at_the_cap(tmp_path) -> None:
    base, spec = seed_specs()
    found = compare_runs(load_run(write_run(tmp_path / "b", base)), load_run(write_run(tmp_path / "s", spec)),
                         n_boot=50)
    levels = [replace(lv, why=f"reason {i}") for i, lv in enumerate(found.levels)]
    assert len(levels) > BRIEF_WHY
    warnings = [ValidityWarning("few_requests", f"warning {i}") for i in range(BRIEF_WARNINGS + 3)]
    lines = brief_comparison(replace(found, levels=levels, warnings=warnings)).splitlines()
    assert sum(line.startswith("Why, C=") for line in lines) == BRIEF_WHY - 1
    assert f"Why: {len(levels) - BRIEF_WHY + 1} more levels in report.md" in lines
    assert f"Warnings ({len(warnings)}):" in lines and "  ... 4 more in report.md" in lines
    assert sum("[few_requests] warning" in line for line in lines) == BRIEF_WARNINGS - 1
    # At the cap: every why line and every warning, nothing counted away.
    at_cap = brief_comparison(replace(found, levels=[*levels[:BRIEF_WHY - 1], *(
        replace(lv, why=None) for lv in levels[BRIEF_WHY - 1:-1]), levels[-1]], warnings=warnings[:BRIEF_WARNINGS]))
    assert at_cap.count("Why, C=") == BRIEF_WHY and "more levels in report.md" not in at_cap
    assert at_cap.count("[few_requests] warning") == BRIEF_WARNINGS and "more in report.md" not in at_cap

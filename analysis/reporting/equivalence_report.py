"""Output equivalence in every output: terminal lines, report.md section, JSON, CSV (one definition of the
figures, ``analysis.verdicts.equivalence``; this module only formats them, for one or several configurations)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from specbench.analysis.reporting.csvtext import csv_text
from specbench.analysis.table import MISSING, Column, fmt_num, markdown_table, text_table
from specbench.analysis.verdicts.equivalence import (
    Changes,
    Equivalence,
    LevelEquivalence,
    ProbeEquivalence,
    histogram,
)

Named = Sequence[tuple[str, Equivalence]]  # (configuration name, its check against the baseline)

EQUIVALENCE_CSV_FIELDS: tuple[str, ...] = (
    "config", "target_c", "compared", "changed", "identical_share", "first_diff_median", "unit",
    "baseline_noise_compared", "baseline_noise_changed", "spec_noise_compared", "spec_noise_changed")


def _changed(ch: Changes | None) -> str:
    if ch is None:
        return "(reference)"
    if not ch.compared:
        return MISSING
    return f"{ch.changed}/{ch.compared} ({(ch.share or 0.0):.0%})"


def _identical(ch: Changes) -> str:
    return MISSING if not ch.compared else f"{1.0 - (ch.share or 0.0):.0%}"


def level_columns(unit: str) -> list[Column[LevelEquivalence]]:
    return [
        Column("C", lambda lv: str(lv.target_c)),
        Column("identical", lambda lv: _identical(lv.spec_vs_baseline)),
        Column("spec vs baseline changed", lambda lv: _changed(lv.spec_vs_baseline)),
        Column(f"first diff ({unit}, median)", lambda lv: fmt_num(lv.spec_vs_baseline.median_position, 0)),
        Column("baseline vs its lowest C", lambda lv: _changed(lv.baseline_noise)),
        Column("spec vs its lowest C", lambda lv: _changed(lv.spec_noise)),
    ]


HEADING = ("Output equivalence at temperature 0 (answers paired by prompt position; noise floor: each server "
           "against its own answer at the lowest level)")


def equivalence_lines(eq: Equivalence, name: str = "speculation") -> list[str]:
    """Terminal: the table (when checked) and the verdict line."""
    if not eq.checked:
        return [f"Output equivalence: {eq.text}"]
    return [HEADING, text_table(level_columns(eq.unit), eq.levels), f"Output equivalence: {_named(eq, name)}"]


def _named(eq: Equivalence, name: str) -> str:
    return eq.text if name == "speculation" else eq.text.replace("speculation", name, 1)


def equivalence_markdown(eq: Equivalence) -> list[str]:
    """report.md: the section for one configuration."""
    md = ["## Output equivalence", "", eq.text[0].upper() + eq.text[1:] + ".", ""]
    if not eq.checked:
        return md
    if eq.probe is not None:
        pr = eq.probe
        md += [f"Paired probe: the same {pr.compared} prompts to the baseline at C={pr.reference_c} (the reference) "
               f"and at C={pr.probe_c} (its repeat), and to the speculative server at C={pr.probe_c}; changed against "
               f"the reference: speculation {pr.spec_changed}, the repeat {pr.repeat_changed}; discordant prompts: "
               f"{pr.spec_only} changed by speculation alone, {pr.repeat_only} by the repeat alone (one-sided exact "
               f"sign test p = {pr.p_value:.2g}). The table below is the ladder's own levels, under load.", ""]
    md += [f"Answers are paired by prompt position at each level; positions are in {eq.unit}s. "
           "The noise floor compares each server with its own answer to the same prompt at the lowest level "
           f"(C={eq.lowest_c}).", "", markdown_table(level_columns(eq.unit), eq.levels), ""]
    hist = histogram(eq.total.positions)
    if hist:
        md += ["First difference, spec against baseline (all levels): "
               + ", ".join(f"{lo}-{hi - 1}: {n}" if hi - lo > 1 else f"{lo}: {n}" for lo, hi, n in hist if n) + ".",
               ""]
    return md


def multi_equivalence_lines(named: Named, *, markdown: bool) -> list[str]:
    """Many configurations: one verdict line each (the per-level tables are in pairs/NAME/)."""
    bullet = "- " if markdown else "  "
    lines = [f"{bullet}{name}: {_named(eq, name)}" for name, eq in named]
    if markdown:
        return ["## Output equivalence", "", "Each configuration against the baseline at temperature 0 (per-level "
                "tables in each pair's report):", "", *lines, ""]
    return ["Output equivalence (each configuration against the baseline):", *lines]


def _changes_json(ch: Changes | None) -> dict[str, Any] | None:
    if ch is None:
        return None
    return {"compared": ch.compared, "changed": ch.changed, "share_changed": ch.share,
            "first_diff_median": ch.median_position}


def probe_json(pr: ProbeEquivalence | None) -> dict[str, Any] | None:
    """The paired probe's counts and verdict (null where it did not run)."""
    if pr is None:
        return None
    return {"kind": pr.kind, "text": pr.text, "reference_c": pr.reference_c, "probe_c": pr.probe_c,
            "compared": pr.compared, "spec_changed": pr.spec_changed, "repeat_changed": pr.repeat_changed,
            "spec_only": pr.spec_only, "repeat_only": pr.repeat_only, "p_value": pr.p_value,
            "first_diff_positions": list(pr.positions)}


def equivalence_json(eq: Equivalence) -> dict[str, Any]:
    return {
        "kind": eq.kind, "text": eq.text, "unit": eq.unit, "lowest_c": eq.lowest_c,
        "total": _changes_json(eq.total), "baseline_noise": _changes_json(eq.baseline_noise),
        "spec_noise": _changes_json(eq.spec_noise),
        "first_diff_histogram": [{"from": lo, "to": hi, "count": n} for lo, hi, n in histogram(eq.total.positions)],
        "levels": [{"target_c": lv.target_c, "spec_vs_baseline": _changes_json(lv.spec_vs_baseline),
                    "first_diff_positions": list(lv.spec_vs_baseline.positions),
                    "baseline_noise": _changes_json(lv.baseline_noise), "spec_noise": _changes_json(lv.spec_noise)}
                   for lv in eq.levels],
        "probe": probe_json(eq.probe),
    }


def equivalence_csv(named: Named) -> str:
    """equivalence.csv: one row per (configuration, level)."""
    rows = []
    for name, eq in named:
        for lv in eq.levels:
            sv, bn, sn = lv.spec_vs_baseline, lv.baseline_noise, lv.spec_noise
            rows.append({
                "config": name, "target_c": lv.target_c, "compared": sv.compared, "changed": sv.changed,
                "identical_share": None if sv.share is None else 1.0 - sv.share,
                "first_diff_median": sv.median_position, "unit": eq.unit,
                "baseline_noise_compared": bn.compared if bn else None,
                "baseline_noise_changed": bn.changed if bn else None,
                "spec_noise_compared": sn.compared if sn else None, "spec_noise_changed": sn.changed if sn else None})
    return csv_text(EQUIVALENCE_CSV_FIELDS, rows)

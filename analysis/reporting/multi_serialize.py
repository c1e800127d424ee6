"""comparison.json and comparison.csv of a many-configuration comparison (schema in analysis/README.md)."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from specbench.analysis.reporting.csvtext import csv_text
from specbench.analysis.reporting.decompose_report import decomposition_json
from specbench.analysis.reporting.energy_report import energy_json
from specbench.analysis.reporting.equivalence_report import equivalence_json
from specbench.analysis.reporting.multi_render import multi_saturation, refined_levels, switch_lines
from specbench.analysis.reporting.render import decompositions
from specbench.analysis.reporting.serialize import clean, method_json, run_json, warning_json
from specbench.analysis.verdicts.multi import MultiComparison

MULTI_SCHEMA = 3  # 2: decomposition rows as comparison.json schema 2; 3: each configuration's energy (#40)
MULTI_CSV_FIELDS: tuple[str, ...] = ("target_c", "config", "is_baseline", "tok_s", "ratio", "ratio_low",
                                     "ratio_high", "is_best", "policy_uses")


def multi_json(m: MultiComparison) -> dict[str, Any]:
    """What a many-configuration comparison.json holds and ``compare --json`` prints."""
    p = m.policy
    return clean({
        "schema": MULTI_SCHEMA,
        "kind": "multi_comparison",
        "method": {**method_json("configuration / baseline; best / runner-up", m.seed, m.n_boot),
                   "fixed_choice": "highest geometric-mean throughput over the levels of the policy"},
        "baseline_name": m.baseline_name,
        "baseline": run_json(m.baseline),
        "configurations": [
            {"name": name, "run": run_json(pair.spec), "verdict": {"kind": pair.verdict.kind,
                                                                   "text": pair.verdict.text},
             "recommendation": {"kind": pair.recommendation.kind, "text": pair.recommendation.text},
             "report": f"pairs/{name}/report.md", "decomposition": decomposition_json(decompositions(pair)),
             "why": [{"target_c": lv.target_c, "why": lv.why} for lv in pair.levels if lv.why],
             "equivalence": equivalence_json(pair.equivalence) if pair.equivalence is not None else None,
             "energy": energy_json(pair)}
            for name, pair in zip(m.names, m.pairs, strict=True)
        ],
        "levels": [
            {"target_c": lv.target_c, "best": lv.best, "runner_up": lv.runner_up,
             "best_vs_runner_up": lv.best_ratio, "best_vs_runner_up_low": lv.best_low,
             "best_vs_runner_up_high": lv.best_high, "significant": lv.significant,
             "configs": [{"name": cl.name, "is_baseline": cl.is_baseline, "tok_s": cl.tok_s, "ratio": cl.ratio,
                          "ratio_low": cl.ratio_low, "ratio_high": cl.ratio_high, "batches": len(cl.batches)}
                         for cl in lv.configs]}
            for lv in m.levels
        ],
        "policy": {
            "kind": p.kind, "text": p.text, "fixed": p.fixed, "mean_gain": p.mean_gain,
            "segments": [{"config": n, "from_c": a, "to_c": b} for n, a, b in p.segments],
            "switches": [asdict(s) for s in p.switches],
            "switch_lines": switch_lines(m),
            "levels": [{**asdict(pl), "vs_fixed": pl.vs_fixed} for pl in p.levels],
        },
        "saturation": [asdict(s) for s in multi_saturation(m)],
        "refined_levels": refined_levels(m),
        "warnings": [warning_json(w) for w in m.warnings],
    })


def multi_csv(m: MultiComparison) -> str:
    """One row per (level, configuration), the baseline included."""
    uses = {pl.target_c: pl.uses for pl in m.policy.levels}
    rows = [{"target_c": lv.target_c, "config": cl.name, "is_baseline": cl.is_baseline, "tok_s": cl.tok_s,
             "ratio": cl.ratio, "ratio_low": cl.ratio_low, "ratio_high": cl.ratio_high,
             "is_best": cl.name == lv.best, "policy_uses": uses.get(lv.target_c)}
            for lv in m.levels for cl in lv.configs]
    return csv_text(MULTI_CSV_FIELDS, clean(rows))

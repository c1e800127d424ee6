"""JSON and CSV shapes of a run summary and a comparison: stable, versioned, documented in analysis/README.md.

Field names follow the dataclasses (seconds in ``*_s``, speeds in ``*_tok_s``); non-finite numbers become
null so every file is strict JSON. Bump the schema constants on any incompatible change.
"""

from __future__ import annotations

import math
from dataclasses import asdict, fields
from pathlib import Path
from typing import Any

from specbench.analysis.records.checks import ValidityWarning
from specbench.analysis.records.server_side import unreported_figures
from specbench.analysis.records.summary import RunSummary, StepRow
from specbench.analysis.reporting.category_report import category_verdict_json
from specbench.analysis.reporting.csvtext import csv_text
from specbench.analysis.reporting.decompose_report import DECOMPOSITION_FIELDS, decomposition_json, decomposition_row
from specbench.analysis.reporting.energy_report import LEVEL_ENERGY_FIELDS, energy_json, level_energy_json
from specbench.analysis.reporting.equivalence_report import equivalence_json
from specbench.analysis.stats.bootstrap import CONFIDENCE, MAX_BATCHES, MIN_BATCHES
from specbench.analysis.verdicts.compare import Comparison, LevelComparison
from specbench.analysis.verdicts.decompose import Decomposition

SUMMARY_SCHEMA = 1
COMPARISON_SCHEMA = 2  # 2: decomposition rows lost "gap" (a covariance), gained server_tokens_per_pass, server_gap
STEP_FIELDS: tuple[str, ...] = tuple(f.name for f in fields(StepRow))
LEVEL_FIELDS: tuple[str, ...] = (
    "target_c", "spec_tok_s", "baseline_tok_s", "ratio", "ratio_low", "ratio_high", "winner", "interval_method",
    "batches_spec", "batches_baseline", "spec_per_request_tok_s", "baseline_per_request_tok_s", "per_request_ratio",
    "ttft_p50_ratio", "ttft_p99_ratio", "e2e_p50_ratio", "e2e_p99_ratio", "spec_accept_length",
    "spec_achieved_c", "baseline_achieved_c", "policy_uses", "policy_tok_s", "flags",
    "spec_server_running", "baseline_server_running", "spec_server_queued", "baseline_server_queued",
    "spec_server_kv_usage", "baseline_server_kv_usage", "spec_server_accept_length",
    "spec_server_accept_by_position", "baseline_server_accept_by_position", "why", "refined",
    "spec_refused_share", "baseline_refused_share", "spec_refusal_backoff_s", "baseline_refusal_backoff_s",
    *LEVEL_ENERGY_FIELDS,
)


def clean(value: Any) -> Any:
    """JSON-safe copy: tuples to lists, paths to strings, NaN/inf to None."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {str(k): clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [clean(v) for v in value]
    if isinstance(value, Path):
        return str(value)
    return value


def warning_json(warning: ValidityWarning) -> dict[str, Any]:
    return {"code": warning.code, "run": warning.run, "target_c": warning.target_c, "message": warning.message}


def run_json(summary: RunSummary) -> dict[str, Any]:
    """The run's identity and settings, its per-step rows and its warnings."""
    meta, settings = summary.meta, summary.meta.settings
    return clean({
        "name": summary.name,
        "path": summary.path,
        "label": settings.label if settings else "",
        "has_meta": summary.has_meta,
        "partial": meta.partial,
        "skipped_lines": summary.skipped_lines,
        "api": meta.api,
        "max_tokens": settings.max_tokens if settings else None,
        "ignore_eos": settings.ignore_eos if settings else None,
        "temperature": settings.temperature if settings else None,
        "ladder": meta.ladder,
        "prompts": meta.prompts,
        "server": meta.server,
        "slo": _slo_json(summary),
        "open_loop": {"rate_ladder": settings.rate_ladder, "arrivals": settings.arrivals,
                      "burstiness": settings.burstiness,
                      "max_in_flight": settings.max_in_flight} if summary.open_loop and settings else None,
        "steps": [asdict(row) for row in summary.rows],
        "server_not_reported": unreported_figures(summary.server_samples, meta.server,
                                                  [r.accept_length for r in summary.rows]),
        "warnings": [warning_json(w) for w in summary.warnings],
    })


def _slo_json(summary: RunSummary) -> dict[str, Any] | None:
    slo = summary.slo
    if slo is None:
        return None
    return {"text": slo.text(), "ttft_s": slo.ttft_s, "tpot_s": slo.tpot_s, "e2e_s": slo.e2e_s,
            "itl_p99_s": slo.itl_p99_s}


def summary_json(summary: RunSummary) -> dict[str, Any]:
    """What ``summarize --json`` prints."""
    return {"schema": SUMMARY_SCHEMA, "kind": "run_summary", **run_json(summary)}


def level_json(level: LevelComparison, comparison: Comparison) -> dict[str, Any]:
    """One compared level: the flat row that is also a line of comparison.csv."""
    policy = {s.target_c: s for s in comparison.recommendation.levels}.get(level.target_c)
    return clean({
        "target_c": level.target_c,
        "spec_tok_s": level.spec.throughput_tok_s,
        "baseline_tok_s": level.baseline.throughput_tok_s,
        "ratio": level.ratio,
        "ratio_low": level.ratio_low,
        "ratio_high": level.ratio_high,
        "winner": level.winner,
        "interval_method": level.interval_method,
        "batches_spec": level.batches_spec,
        "batches_baseline": level.batches_baseline,
        "spec_per_request_tok_s": level.spec.per_request_tok_s,
        "baseline_per_request_tok_s": level.baseline.per_request_tok_s,
        "per_request_ratio": level.per_request_ratio,
        "ttft_p50_ratio": level.ttft_p50_ratio,
        "ttft_p99_ratio": level.ttft_p99_ratio,
        "e2e_p50_ratio": level.e2e_p50_ratio,
        "e2e_p99_ratio": level.e2e_p99_ratio,
        "spec_accept_length": level.spec.accept_length,
        "spec_achieved_c": level.spec.achieved_c,
        "baseline_achieved_c": level.baseline.achieved_c,
        "policy_uses": policy.uses if policy else None,
        "policy_tok_s": policy.switch_tok_s if policy else None,
        "flags": list(level.flags),
        "spec_server_running": level.spec.server_running,
        "baseline_server_running": level.baseline.server_running,
        "spec_server_queued": level.spec.server_queued,
        "baseline_server_queued": level.baseline.server_queued,
        "spec_server_kv_usage": level.spec.server_kv_usage,
        "baseline_server_kv_usage": level.baseline.server_kv_usage,
        "spec_server_accept_length": level.spec.server_accept_length,
        "spec_server_accept_by_position": level.spec.server_accept_by_position,
        "baseline_server_accept_by_position": level.baseline.server_accept_by_position,
        "why": level.why,
        "refined": level.refined,
        "spec_refused_share": level.spec.refused_share,
        "baseline_refused_share": level.baseline.refused_share,
        "spec_refusal_backoff_s": level.spec.refusal_backoff_s,
        "baseline_refusal_backoff_s": level.baseline.refusal_backoff_s,
        **level_energy_json(level.spec, level.baseline, level.energy),
    })


def method_json(ratio: str, seed: int, n_boot: int) -> dict[str, Any]:
    """How the ratios and their intervals were computed: one text for every report that carries ratios."""
    return {
        "ratio": ratio,
        "confidence": CONFIDENCE,
        "interval": "batch_means: Welch t on the log ratio of batch means, batches sized from the token "
                    "rate's autocorrelation; lifetime_batches (fallback): bootstrap over batches of one "
                    "median request, small-sample widened",
        "seed": seed,
        "n_boot": n_boot,
        "min_batches": MIN_BATCHES,
        "max_batches": MAX_BATCHES,
    }


def comparison_json(comparison: Comparison) -> dict[str, Any]:
    """What comparison.json holds and ``compare --json`` prints."""
    c = comparison
    rec = c.recommendation
    return clean({
        "schema": COMPARISON_SCHEMA,
        "kind": "comparison",
        "method": method_json("spec / baseline", c.seed, c.n_boot),
        "baseline": run_json(c.baseline),
        "spec": run_json(c.spec),
        "levels": [level_json(lv, c) for lv in c.levels],
        "verdict": {
            "kind": c.verdict.kind,
            "text": c.verdict.text,
            "crossovers": [asdict(x) for x in c.verdict.crossovers],
            "unclear_levels": list(c.verdict.unclear_levels),
            "crossover_lines": list(c.crossover_lines),
        },
        "saturation": [asdict(s) for s in c.saturation],
        "skipped": c.skipped,
        "recommendation": {
            "kind": rec.kind,
            "threshold_c": rec.threshold_c,
            "text": rec.text,
            "levels": [{**asdict(s), "vs_always_on": s.vs_always_on, "vs_always_off": s.vs_always_off}
                       for s in rec.levels],
        },
        "slo": _slo_comparison_json(c),
        "equivalence": equivalence_json(c.equivalence) if c.equivalence is not None else None,
        "decomposition": decomposition_json(_decompositions(c)),
        "energy": energy_json(c),
        "by_category": category_verdict_json(c),
        "categories": {
            "rows": [asdict(r) for r in c.categories.rows],
            "accept_by_category": [{"category": k, "accept_length": v} for k, v in c.categories.accept_by_category],
            "traps": list(c.categories.traps),
        },
        "warnings": [warning_json(w) for w in c.warnings],
    })


def _slo_comparison_json(c: Comparison) -> dict[str, Any] | None:
    s = c.slo
    if s is None:
        return None
    return {
        "slo": s.slo.text(), "threshold": s.threshold, "open_loop": s.open_loop, "unit": s.unit,
        "spec_capacity": {**asdict(s.spec_capacity), "text": s.spec_capacity.text(s.unit)},
        "baseline_capacity": {**asdict(s.baseline_capacity), "text": s.baseline_capacity.text(s.unit)},
        "verdict": s.verdict, "recommendation": s.recommendation,
        "levels": [{
            "level": lv.level, "goodput_ratio": lv.goodput_ratio, "goodput_tok_ratio": lv.goodput_tok_ratio,
            "refined": lv.baseline.refined or lv.spec.refined,
            **{f"{side}_{key}": getattr(row, key) for side, row in (("spec", lv.spec), ("baseline", lv.baseline))
               for key in ("slo_attainment", "goodput_req_s", "goodput_tok_s", "slo_requests", "achieved_rate",
                           "dropped", "ttft_p99_s", "tpot_p99_s")},
        } for lv in s.levels],
    }


def steps_csv(summary: RunSummary) -> str:
    """summary.csv: one row per step; ``failures`` as status=count pairs."""
    rows = []
    for step in run_json(summary)["steps"]:
        step["failures"] = [f"{k}={v}" for k, v in step["failures"].items()]
        rows.append(step)
    return csv_text(STEP_FIELDS, rows)


def comparison_csv(comparison: Comparison) -> str:
    """comparison.csv: one row per compared level, same fields as comparison.json's ``levels``."""
    return csv_text(LEVEL_FIELDS, [level_json(lv, comparison) for lv in comparison.levels])


def _decompositions(c: Comparison) -> list[Decomposition]:
    return [lv.decomposition for lv in c.levels if lv.decomposition is not None]


def decomposition_csv(comparison: Comparison) -> str:
    """decomposition.csv: one row per level with a decomposition, the fields of comparison.json's rows."""
    return csv_text(DECOMPOSITION_FIELDS, clean([decomposition_row(d) for d in _decompositions(comparison)]))

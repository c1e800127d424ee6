"""Energy and cost per token in the outputs: the step table's columns, the comparison's sentences and JSON.

Everything here formats figures made elsewhere (``analysis.records.energy`` per step, ``analysis.verdicts.energy``
per level); "-" in a table and null in JSON mean not measured, never zero.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from specbench.analysis.records.steprow import StepRow
from specbench.analysis.table import Column, fmt_num
from specbench.analysis.verdicts.compare import Comparison
from specbench.analysis.verdicts.energy import BOOTSTRAP_BATCHES, SAMPLES_PER_BATCH, energy_crossings

ENERGY_NOTE = ("J/tok: the GPUs' energy over the window (DCGM energy counter, else power integrated: 'src') per "
               "output token; GPU W: mean power summed over the GPUs; GPU use: mean utilisation; '-': not measured")
SOURCE_TAGS = {"counter": "ctr", "power": "pwr", "counter+power": "ctr+pwr"}


def _cost(row: StepRow) -> str:
    return "-" if row.cost_per_mtok_usd is None else f"${row.cost_per_mtok_usd:.2f}"


def energy_columns(rows: list[StepRow]) -> list[Column[StepRow]]:
    """The step table's energy columns: none without telemetry, the cost only with --gpu-hour-price."""
    if not any(r.gpus for r in rows):
        return []
    cols: list[Column[StepRow]] = [
        Column("J/tok", lambda r: fmt_num(r.energy_per_token_j, 3)),
        Column("src", lambda r: SOURCE_TAGS.get(r.energy_source or "", "-"), left=True),
        Column("GPU W", lambda r: fmt_num(r.gpu_power_w, 0)),
        Column("GPU use", lambda r: "-" if r.gpu_util_pct is None else f"{r.gpu_util_pct:.0f}%"),
    ]
    if any(r.cost_per_mtok_usd is not None for r in rows):
        cols.append(Column("$/Mtok", _cost))
    if any(r.energy_cost_per_mtok_usd is not None for r in rows):
        cols.append(Column("kWh $/Mtok", lambda r: "-" if r.energy_cost_per_mtok_usd is None
                           else f"${r.energy_cost_per_mtok_usd:.3f}"))
    return cols


def energy_notes(rows: list[StepRow]) -> list[str]:
    """One line per step whose energy was not measured though the run had telemetry."""
    return [f"{r.level_text}: energy {r.energy_note}" for r in rows if r.gpus and r.energy_note]


def energy_lines(comparison: Comparison) -> list[str]:
    """'Energy per output token (spec / baseline): ...' then one sentence per level; nothing without telemetry."""
    found = [lv.energy for lv in comparison.levels if lv.energy is not None]
    if not found:
        return []
    costs = [f"C={lv.target_c}: spec ${lv.spec.cost_per_mtok_usd:.2f}, baseline ${lv.baseline.cost_per_mtok_usd:.2f}"
             for lv in comparison.levels
             if lv.spec.cost_per_mtok_usd is not None and lv.baseline.cost_per_mtok_usd is not None]
    energy_costs = [f"C={lv.target_c}: spec ${lv.spec.energy_cost_per_mtok_usd:.3f}, baseline "
                    f"${lv.baseline.energy_cost_per_mtok_usd:.3f}" for lv in comparison.levels
                    if lv.spec.energy_cost_per_mtok_usd is not None
                    and lv.baseline.energy_cost_per_mtok_usd is not None]
    return ["Energy per output token (spec / baseline; >1x: speculation uses more; 95% CI by bootstrap over "
            f"batches of one median request and at least {SAMPLES_PER_BATCH:g} GPU samples):",
            *(f"  {e.sentence}" for e in found),
            *(x.sentence for x in energy_crossings(found)),
            *([f"Cost per million output tokens (--gpu-hour-price): {'; '.join(costs)}"] if costs else []),
            *([f"Energy cost per million output tokens (--kwh-price): {'; '.join(energy_costs)}"]
              if energy_costs else [])]


def brief_energy_line(comparison: Comparison) -> list[str]:
    """The terminal's one line: the level with the largest measured difference, else nothing."""
    found = [lv.energy for lv in comparison.levels if lv.energy is not None and lv.energy.ratio is not None]
    if not found:
        return [] if not any(lv.energy for lv in comparison.levels) else ["Energy: not measured at any level"]
    pick = max(found, key=lambda e: abs(e.ratio - 1.0) if e.ratio is not None else 0.0)
    return [f"Energy: at {pick.sentence.replace(':', ',', 1)}", *(x.sentence for x in energy_crossings(found))]


LEVEL_ENERGY_FIELDS = ("spec_energy_per_token_j", "baseline_energy_per_token_j", "energy_ratio", "energy_ratio_low",
                       "energy_ratio_high", "energy_interval_method", "spec_energy_source",
                       "baseline_energy_source", "spec_gpu_power_w", "baseline_gpu_power_w", "spec_gpu_util_pct",
                       "baseline_gpu_util_pct", "spec_cost_per_mtok_usd", "baseline_cost_per_mtok_usd",
                       "spec_energy_cost_per_mtok_usd", "baseline_energy_cost_per_mtok_usd")


def level_energy_json(spec: StepRow, baseline: StepRow, energy: Any) -> dict[str, Any]:
    """The energy fields of a compared level (``LEVEL_ENERGY_FIELDS``); null where not measured."""
    return {
        "spec_energy_per_token_j": spec.energy_per_token_j,
        "baseline_energy_per_token_j": baseline.energy_per_token_j,
        "energy_ratio": energy.ratio if energy is not None else None,
        "energy_ratio_low": energy.ratio_low if energy is not None else None,
        "energy_ratio_high": energy.ratio_high if energy is not None else None,
        "energy_interval_method": energy.interval_method if energy is not None else None,
        "spec_energy_source": spec.energy_source,
        "baseline_energy_source": baseline.energy_source,
        "spec_gpu_power_w": spec.gpu_power_w,
        "baseline_gpu_power_w": baseline.gpu_power_w,
        "spec_gpu_util_pct": spec.gpu_util_pct,
        "baseline_gpu_util_pct": baseline.gpu_util_pct,
        "spec_cost_per_mtok_usd": spec.cost_per_mtok_usd,
        "baseline_cost_per_mtok_usd": baseline.cost_per_mtok_usd,
        "spec_energy_cost_per_mtok_usd": spec.energy_cost_per_mtok_usd,
        "baseline_energy_cost_per_mtok_usd": baseline.energy_cost_per_mtok_usd,
    }


def energy_json(comparison: Comparison) -> dict[str, Any] | None:
    """comparison.json's ``energy``: the method and each level's sentence; null when neither run had telemetry."""
    found = [lv for lv in comparison.levels if lv.energy is not None]
    if not found:
        return None
    return {
        "ratio": "spec energy per output token / baseline's",
        "interval": f"{BOOTSTRAP_BATCHES}: bootstrap over (energy, tokens) batch pairs of one median request and at "
                    f"least {SAMPLES_PER_BATCH:g} GPU samples, ratio of sums, small-sample widened",
        "levels": [{"target_c": lv.target_c, "sentence": lv.energy.sentence, "note": lv.energy.note,
                    "batches": lv.energy.batches} for lv in found if lv.energy is not None],
        "crossovers": [{**asdict(x), "sentence": x.sentence}
                       for x in energy_crossings([lv.energy for lv in found if lv.energy is not None])],
    }

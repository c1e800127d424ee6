"""A depth tune as text and JSON: the per-level table, the schedule and the best single depth (pure)."""

from __future__ import annotations

from typing import Any

from specbench.analysis.verdicts.tune import Interval, TunedLevel, TuneResult

HOW = {"within_noise": "the smallest depth within noise of the best",
       "best": "the best (no shallower depth was shown within 2% of it)",
       "point": "the best point value (too few window batches for an interval)",
       "none": "nothing measured",
       "energy": "the least energy per token among the depths shown to keep the throughput floor",
       "no_energy": "by throughput: no energy figure for the depths that kept the floor",
       "failed": "none: a candidate failed more than --max-error-rate here",
       "unmeasured": "none: a candidate was not measured here"}


def depth_name(depth: int | None) -> str:
    return "-" if depth is None else "off" if depth == 0 else f"K={depth}"


def _interval_json(interval: Interval) -> dict[str, float | None]:
    return {"ratio": interval.ratio, "low": interval.low, "high": interval.high}


def tune_json(result: TuneResult) -> dict[str, Any]:
    """Everything the tune decided, with the figures behind each choice."""
    return {
        "complete": result.complete,
        "problems": list(result.problems),
        "depths": list(result.depths),
        "keyed_on": result.keyed_on,
        "key_note": result.key_note,
        "schedule": [list(entry) for entry in result.schedule],
        "best_single": result.best_single,
        "objective": result.objective,
        "throughput_floor": result.floor,
        "levels": [{
            "target_c": lv.target_c,
            "best": lv.best,
            "chosen": lv.chosen,
            "how": lv.how,
            "batch_mean": (chosen := lv.candidate(lv.chosen)) and chosen.running,
            "batch_max": chosen and chosen.running_max,
            "candidates": [{"depth": c.depth, "name": c.name, "tok_s": c.tok_s, "vs_best": _interval_json(c.vs_best),
                            "vs_baseline": _interval_json(c.vs_baseline), "batch_mean": c.running,
                            "batch_max": c.running_max, "energy_per_token_j": c.energy_per_token_j}
                           for c in lv.candidates],
            "chosen_over": {str(k): _interval_json(iv) for k, iv in lv.over},
            "predicted": {"tok_s": lv.prediction.tok_s, "low": lv.prediction.low, "high": lv.prediction.high,
                          "method": lv.prediction.method, "chosen_by_half": list(lv.prediction.chosen_by_half)},
        } for lv in result.levels],
    }


def _batch(level: TunedLevel) -> str:
    chosen = level.candidate(level.chosen)
    if chosen is None or chosen.running is None:
        return "-"
    most = f" (max {chosen.running_max:.0f})" if chosen.running_max is not None else ""
    return f"{chosen.running:.1f}{most}"


def tune_table(result: TuneResult) -> str:
    """Per level: the server's batch, the depth chosen and why, its throughput, and its ratio over the baseline and
    over every other depth (95% intervals)."""
    others = [k for k in result.depths]
    energy = any(c.energy_per_token_j for lv in result.levels for c in lv.candidates)
    head = ["C", "server batch", "chosen", "tok/s", "predicted (95%)", *(["J/token"] if energy else []),
            *(f"over {depth_name(k)}" for k in others), "why"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for lv in result.levels:
        chosen = lv.candidate(lv.chosen)
        over = dict(lv.over)
        cells = [str(lv.target_c), _batch(lv), depth_name(lv.chosen),
                 f"{chosen.tok_s:.0f}" if chosen is not None and chosen.tok_s else "-", _prediction(lv),
                 *([_joules(chosen.energy_per_token_j if chosen is not None else None)] if energy else []),
                 *("=" if k == lv.chosen else over[k].text() if k in over else "-" for k in others),
                 HOW[lv.how]]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _prediction(level: TunedLevel) -> str:
    """The cross-fitted prediction and its interval ('-' without one)."""
    p = level.prediction
    if p.tok_s is None:
        return "-"
    return f"{p.tok_s:.0f}" + (f" ({p.low:.0f}-{p.high:.0f})" if p.low is not None and p.high is not None else "")


def _joules(value: float | None) -> str:
    return "-" if not value else f"{value:.3g}"


def schedule_text(result: TuneResult) -> str:
    """The schedule in words: 'batch 1-3: K=5; 4-7: K=4; ...'."""
    if not result.complete:
        return f"no schedule: the tune is partial ({len(result.problems)} level(s) could not be chosen from)"
    unit = "batch" if result.keyed_on == "batch" else "concurrency"
    parts = [f"{lo}-{hi}: {depth_name(k)}" for lo, hi, k in result.schedule]
    return f"{unit} " + "; ".join(parts) if parts else "no schedule (no level was measured)"


__all__ = ["depth_name", "schedule_text", "tune_json", "tune_table"]

"""Per-category spread: acceptance length and per-request speed-up by prompt category and by prompt.

Speed-up is the spec run's mean per-request tok/s over the baseline's, for the same requests set (same
level, same category), using the requests the step table uses. Prompts are matched across runs by
``prompt_id``, and the best single prompt's speed-up is shown beside the mean: one lucky prompt can show a
win while the mean loses (the single-prompt trap that misled the seed case).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from specbench.analysis.records.request_metrics import acceptance_length, mean_or_none, per_request_tok_s
from specbench.analysis.table import fmt_ratio
from specbench.contract.schema import RequestRecord

ALL = "(all)"


@dataclass(frozen=True)
class LevelRequests:
    """The measured ok requests of both runs at one matched level."""

    target_c: int
    baseline: Sequence[RequestRecord]
    spec: Sequence[RequestRecord]


@dataclass(frozen=True)
class CategoryRow:
    target_c: int
    category: str  # ALL for the level as a whole
    prompts: int  # prompt ids with ok requests in both runs
    spec_requests: int
    baseline_requests: int
    accept_length: float | None  # spec run: output tokens / verify passes
    spec_per_request_tok_s: float | None
    baseline_per_request_tok_s: float | None
    speedup: float | None  # spec_per_request_tok_s / baseline_per_request_tok_s
    best_prompt_id: str | None
    best_prompt_speedup: float | None
    worst_prompt_id: str | None
    worst_prompt_speedup: float | None


@dataclass(frozen=True)
class CategorySpread:
    rows: tuple[CategoryRow, ...]  # per level: ALL first, then categories by name
    accept_by_category: tuple[tuple[str, float | None], ...]  # spec run, pooled over matched levels
    traps: tuple[str, ...]  # sentences where the best (or worst) prompt contradicts the mean


def category_spread(levels: Sequence[LevelRequests]) -> CategorySpread:
    """Rows for every matched level and category, the pooled acceptance lengths and the trap notes."""
    rows: list[CategoryRow] = []
    traps: list[str] = []
    for level in sorted(levels, key=lambda lv: lv.target_c):
        categories = sorted({_category(r) for r in [*level.baseline, *level.spec]})
        overall = _row(level.target_c, ALL, level.baseline, level.spec)
        rows.append(overall)
        rows.extend(
            _row(level.target_c, cat, [r for r in level.baseline if _category(r) == cat],
                 [r for r in level.spec if _category(r) == cat])
            for cat in categories
        )
        trap = _trap_note(overall)
        if trap:
            traps.append(trap)
    pooled: dict[str, list[RequestRecord]] = {}
    for level in levels:
        for rec in level.spec:
            pooled.setdefault(_category(rec), []).append(rec)
    accept = tuple((cat, acceptance_length(recs)) for cat, recs in sorted(pooled.items()))
    return CategorySpread(tuple(rows), accept, tuple(traps))


def _category(rec: RequestRecord) -> str:
    return rec.get("category") or "uncategorised"


def _mean_speed(records: Iterable[RequestRecord]) -> float | None:
    return mean_or_none([s for s in (per_request_tok_s(r) for r in records) if s is not None])


def _row(target_c: int, category: str, base: Sequence[RequestRecord], spec: Sequence[RequestRecord]) -> CategoryRow:
    base_speed, spec_speed = _mean_speed(base), _mean_speed(spec)
    per_prompt = _prompt_speedups(base, spec)
    best = max(per_prompt, key=lambda p: p[1], default=(None, None))
    worst = min(per_prompt, key=lambda p: p[1], default=(None, None))
    return CategoryRow(
        target_c=target_c,
        category=category,
        prompts=len(per_prompt),
        spec_requests=len(spec),
        baseline_requests=len(base),
        accept_length=acceptance_length(spec),
        spec_per_request_tok_s=spec_speed,
        baseline_per_request_tok_s=base_speed,
        speedup=spec_speed / base_speed if spec_speed is not None and base_speed else None,
        best_prompt_id=best[0],
        best_prompt_speedup=best[1],
        worst_prompt_id=worst[0],
        worst_prompt_speedup=worst[1],
    )


def _prompt_speedups(base: Sequence[RequestRecord], spec: Sequence[RequestRecord]) -> list[tuple[str, float]]:
    """(prompt_id, spec mean speed / baseline mean speed) for prompts with ok requests in both runs."""
    def by_prompt(records: Sequence[RequestRecord]) -> dict[str, list[RequestRecord]]:
        groups: dict[str, list[RequestRecord]] = {}
        for rec in records:
            if rec.get("prompt_id") is not None:
                groups.setdefault(str(rec["prompt_id"]), []).append(rec)
        return groups

    base_groups, spec_groups = by_prompt(base), by_prompt(spec)
    result = []
    for pid in sorted(base_groups.keys() & spec_groups.keys()):
        b, s = _mean_speed(base_groups[pid]), _mean_speed(spec_groups[pid])
        if b and s is not None:
            result.append((pid, s / b))
    return result


def _trap_note(row: CategoryRow) -> str | None:
    """A sentence when one prompt's speed-up points the other way from the level's mean."""
    if row.speedup is None or row.prompts < 2:
        return None
    if row.best_prompt_speedup is not None and row.best_prompt_speedup > 1.0 > row.speedup:
        pid, value, verb = row.best_prompt_id, row.best_prompt_speedup, "a win"
    elif row.worst_prompt_speedup is not None and row.worst_prompt_speedup < 1.0 < row.speedup:
        pid, value, verb = row.worst_prompt_id, row.worst_prompt_speedup, "a loss"
    else:
        return None
    return (f"single-prompt trap at C={row.target_c}: prompt {pid!r} alone shows {verb} "
            f"({fmt_ratio(value)} per-request speed) while the mean over {row.prompts} prompts is "
            f"{fmt_ratio(row.speedup)}")

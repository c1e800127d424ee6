"""The decomposition's table, JSON rows, CSV and histograms: one layout for terminal, report.md and files.

Every figure comes from ``analysis.verdicts.decompose``; this module only formats it, so the terminal, report.md,
comparison.json, decomposition.csv and the plots can never disagree.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from specbench.analysis.table import MISSING, Column
from specbench.analysis.verdicts.decompose import CONFIDENCE, N_BOOT, Decomposition, Estimate

HIST_BIN = 0.25  # tokens per pass; a pass yields a whole number of tokens, a request's mean any value >= 1
DECOMPOSITION_NOTE = ("decode phase only, first to last output chunk; ratio = tokens per pass x (baseline step / "
                      "verify pass), each factor a request-weighted mean; 'measured' = baseline mean time per "
                      "decode token / spec's (product and measured share their times: they differ by a "
                      "covariance only); vs = tok/pass tok-wt / the server's own acceptance over the window - 1; "
                      "95% CI: bootstrap over requests")
METHOD = {
    "identity": "per-request speed ratio (baseline mean time per decode token / spec's) = tokens per pass x "
                "(baseline step time / verify pass time), decode phase (first to last output chunk) only",
    "tokens_per_pass": "request-weighted: 1 / mean over requests of passes per decode token; token-weighted: "
                       "sum of decode tokens / sum of passes",
    "pass_time": "mean over requests of decode time (chunk_ms[-1] - chunk_ms[0]) / passes (baseline: passes = "
                 "output_tokens - 1)",
    "interval": "percentile bootstrap over requests, each run resampled on its own",
    "confidence": CONFIDENCE,
    "n_boot": N_BOOT,
}


def fmt_estimate(est: Estimate, decimals: int = 2, scale: float = 1.0, suffix: str = "") -> str:
    """'2.30 (2.18-2.43)': the figure and its interval; '-' when missing."""
    if est.value is None:
        return MISSING
    text = f"{est.value * scale:.{decimals}f}{suffix}"
    if est.low is None or est.high is None:
        return text
    return f"{text} ({est.low * scale:.{decimals}f}-{est.high * scale:.{decimals}f})"


def _server_check(d: Decomposition) -> str:
    if d.server_tokens_per_pass is None or d.server_gap is None:
        return MISSING
    return f"{d.server_tokens_per_pass:.2f} ({d.server_gap:+.1%})"


DECOMPOSITION_COLUMNS: list[Column[Decomposition]] = [
    Column("C", lambda d: str(d.target_c)),
    Column("spec/base reqs", lambda d: f"{d.spec.requests}/{d.baseline.requests}"),
    Column("passes/req", lambda d: f"{d.spec.passes_per_request.value:.1f}"
           if d.spec.passes_per_request.value is not None else MISSING),
    Column("tok/pass (95% CI)", lambda d: fmt_estimate(d.spec.tokens_per_pass)),
    Column("tok/pass tok-wt", lambda d: fmt_estimate(Estimate(d.spec.tokens_per_pass_tok.value))),
    Column("verify pass ms", lambda d: fmt_estimate(d.spec.pass_s, 2, 1000.0)),
    Column("base step ms", lambda d: fmt_estimate(d.baseline.pass_s, 2, 1000.0)),
    Column("pass/step", lambda d: fmt_estimate(d.pass_cost, 2, suffix="x")),
    Column("product", lambda d: fmt_estimate(d.product, 2, suffix="x")),
    Column("measured", lambda d: fmt_estimate(d.measured, 2, suffix="x")),
    Column("server tok/pass (vs)", _server_check),
    Column("passes from", lambda d: d.spec.source, left=True),
]


def _est_json(prefix: str, est: Estimate) -> dict[str, float | None]:
    return {prefix: est.value, f"{prefix}_low": est.low, f"{prefix}_high": est.high}


def decomposition_row(d: Decomposition) -> dict[str, Any]:
    """One level's figures, flat: a line of decomposition.csv and an entry of comparison.json's list."""
    return {
        "target_c": d.target_c, "spec_requests": d.spec.requests, "baseline_requests": d.baseline.requests,
        **_est_json("spec_passes_per_request", d.spec.passes_per_request),
        **_est_json("tokens_per_pass", d.spec.tokens_per_pass),
        **_est_json("tokens_per_pass_tok", d.spec.tokens_per_pass_tok),
        **_est_json("spec_pass_s", d.spec.pass_s),
        **_est_json("baseline_step_s", d.baseline.pass_s),
        **_est_json("pass_cost", d.pass_cost),
        **_est_json("product", d.product),
        **_est_json("measured_ratio", d.measured),
        "server_tokens_per_pass": d.server_tokens_per_pass, "server_gap": d.server_gap, "source": d.spec.source,
    }


DECOMPOSITION_FIELDS: tuple[str, ...] = (
    "target_c", "spec_requests", "baseline_requests",
    *(f"{name}{end}" for name in ("spec_passes_per_request", "tokens_per_pass", "tokens_per_pass_tok",
                                  "spec_pass_s", "baseline_step_s", "pass_cost", "product", "measured_ratio")
      for end in ("", "_low", "_high")),
    "server_tokens_per_pass", "server_gap", "source",
)


def histogram(values: Sequence[float]) -> dict[str, list[float] | list[int]]:
    """Counts of per-request tokens per pass in bins of ``HIST_BIN`` from 1 (every request has at least 1)."""
    if not values:
        return {"edges": [], "counts": []}
    top = max(1.0 + HIST_BIN, math.ceil(max(values) / HIST_BIN) * HIST_BIN + 1e-9)
    edges = np.arange(1.0, top + HIST_BIN / 2, HIST_BIN)
    counts, _ = np.histogram(np.clip(values, 1.0, edges[-1]), bins=edges)
    return {"edges": [round(float(e), 6) for e in edges], "counts": [int(c) for c in counts]}


def by_category(d: Decomposition) -> dict[str, list[float]]:
    """The spec requests' tokens per pass grouped by prompt category (sorted by name)."""
    groups: dict[str, list[float]] = {}
    for value, category in zip(d.spec_tokens_per_pass, d.spec_categories, strict=True):
        groups.setdefault(category, []).append(value)
    return dict(sorted(groups.items()))


def decomposition_json(levels: Sequence[Decomposition]) -> dict[str, Any]:
    """comparison.json's ``decomposition``: the method, then per level its row and its acceptance histograms."""
    return {
        "method": METHOD,
        "levels": [{**decomposition_row(d), "histogram": histogram(d.spec_tokens_per_pass),
                    "categories": [{"category": cat, "requests": len(vals), "histogram": histogram(vals)}
                                   for cat, vals in by_category(d).items()]}
                   for d in levels],
    }

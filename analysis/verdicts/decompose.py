"""Why the ratio moves: a level's per-request speed ratio taken apart into draft yield and pass cost.

A request's decode phase lasts from its first output chunk's arrival to its last one's (``chunk_ms[-1] -
chunk_ms[0]``: TPOT's ``e2e_s - ttft_s`` without the stream's closing tail, which is no pass of the model) and
makes ``output_tokens - 1`` tokens in P passes of the target model: the speculative server's verify passes (from
the record's spec fields, ``request_metrics.verify_passes_source``), the baseline's ``output_tokens - 1``
decode steps. So per request::

    time per token = decode time / decode tokens = pass time / tokens per pass
    per-request speed ratio = baseline mean time per token / spec mean time per token
                            = tokens per pass x (baseline step time / verify pass time)

The factors are request-weighted means over the level's measured ok requests, each request weighing the same
(the per-request speed is a user's figure): the mean pass time, and tokens per pass as the inverse of the mean
passes per token, the mean that composes with per-request time (the arithmetic mean of each request's tokens
per pass would not). The identity then holds exactly but for the covariance of a request's pass time with its
acceptance inside a level; product and measured come from the same times, so their difference checks nothing
independent. What can be checked is the tokens-per-pass factor: where the records carry passes and the server
reports its own acceptance over the window, ``server_gap`` holds the one against the other.
Speeds are taken as mean time per token, not mean tokens/s: a request whose chunks reached a stalled client all at once
has a near-zero decode time, which would dominate a mean of speeds. Tokens per pass is also given
token-weighted (sum of tokens / sum of passes), which leans towards long answers; with equal lengths the two
coincide. Intervals: percentile bootstrap over requests, each run resampled on its own (``N_BOOT``
resamples, rng ``default_rng([seed, C, 3])``); requests of one window share batches, so read them as
indicative rather than exact.

Where no record carries per-request passes, the server's own acceptance length over the window (its
accepted/verify counters, else its gauge: ``server_side.server_accept_source``) stands in for every request's
tokens per pass, and the ``source`` says so. Pure functions over records; no Locust import.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from specbench.analysis.records.request_metrics import verify_passes_source
from specbench.contract.schema import RequestRecord

N_BOOT = 1000
CONFIDENCE = 0.95
SERVER_SOURCES = {"counters": "server /metrics accepted/verify counters",
                  "token_counters": "server /metrics generated tokens/verify passes counters",
                  "gauge": "server /metrics accept_length gauge"}


@dataclass(frozen=True)
class Estimate:
    """A figure and its 95% bootstrap interval (None where it cannot be computed)."""

    value: float | None
    low: float | None = None
    high: float | None = None

    @property
    def half_width(self) -> float | None:
        if self.low is None or self.high is None:
            return None
        return (self.high - self.low) / 2


@dataclass(frozen=True)
class SideFigures:
    """One run at one level: its passes, what each pass yields and how long one lasts."""

    requests: int  # measured ok requests with a decode phase (at least 2 tokens) and known passes
    passes_per_request: Estimate
    tokens_per_pass: Estimate  # request-weighted: 1 / mean over requests of (passes / decode tokens)
    tokens_per_pass_tok: Estimate  # token-weighted: sum of decode tokens / sum of passes
    pass_s: Estimate  # mean over requests of decode time / passes
    decode_tok_s: Estimate  # 1 / mean over requests of decode time / decode tokens
    source: str  # where the passes came from


@dataclass(frozen=True)
class Decomposition:
    """Spec against baseline at one level: the two factors, their product and the measured ratio."""

    target_c: int
    spec: SideFigures
    baseline: SideFigures
    pass_cost: Estimate  # spec verify pass time / baseline step time (>1: a pass costs more than a step)
    product: Estimate  # spec tokens per pass / pass_cost
    measured: Estimate  # per-request speed ratio: baseline mean time per token / spec's
    spec_tokens_per_pass: tuple[float, ...] = ()  # per request, for the acceptance histograms
    spec_categories: tuple[str, ...] = ()  # the same requests' categories
    server_tokens_per_pass: float | None = None  # the server's own acceptance over the window, where the records
    # carried the passes (an independent figure); None where the server's figure is itself the factor, or absent

    @property
    def server_gap(self) -> float | None:
        """Records' token-weighted tokens per pass / the server's own over the window - 1.

        The one check of the decomposition against a figure it was not computed from: product and measured come
        from the same per-request times (they differ only by the covariance of pass time and acceptance inside
        the level, zero when one acceptance figure stands for every request), so their ratio checks nothing. The
        server's counters sum tokens and passes over the window, hence the token-weighted figure."""
        own, server = self.spec.tokens_per_pass_tok.value, self.server_tokens_per_pass
        return own / server - 1 if own is not None and server else None


@dataclass(frozen=True)
class _Requests:
    tokens: np.ndarray  # decode tokens (output_tokens - 1)
    passes: np.ndarray
    decode_s: np.ndarray
    categories: tuple[str, ...]
    source: str


def _decode(rec: RequestRecord) -> tuple[float, float] | None:
    """Decode tokens and decode time: from the first output chunk's arrival to the last one's."""
    ms, tokens = rec["chunk_ms"], rec["output_tokens"] - 1
    if tokens < 1 or len(ms) < 2 or ms[-1] <= ms[0]:
        return None
    return float(tokens), (ms[-1] - ms[0]) / 1000.0


def _baseline_requests(records: Sequence[RequestRecord]) -> _Requests:
    rows = [d for d in map(_decode, records) if d is not None]
    tokens = np.array([t for t, _ in rows], dtype=float)
    return _Requests(tokens, tokens.copy(), np.array([s for _, s in rows], dtype=float), (),
                     "decode steps = output_tokens - 1")


def _spec_requests(records: Sequence[RequestRecord], server_accept: tuple[float, str] | None) -> _Requests:
    rows, fields, origins = [], set(), set()
    for rec in records:
        decode, found = _decode(rec), verify_passes_source(rec)
        if decode is not None and found is not None and found[0] > 0:
            rows.append((decode[0], found[0], decode[1], rec.get("category") or "-"))
            fields.add(found[1])
            origins.add((rec.get("spec") or {}).get("source") or "?")
    if rows:
        usable = sum(1 for r in records if _decode(r) is not None)
        share = "" if len(rows) == usable else f", {len(rows)} of {usable} requests"
        source = f"records: {'/'.join(sorted(fields))} ({'/'.join(sorted(origins))}){share}"
    elif server_accept is not None:
        length, kind = server_accept
        rows = [(d[0], d[0] / length, d[1], rec.get("category") or "-")
                for rec in records if (d := _decode(rec)) is not None]
        source = f"{SERVER_SOURCES.get(kind, kind)}: {length:.2f} tokens/pass for every request"
    else:
        source = "none: no per-request passes and no server acceptance figure"
    return _Requests(np.array([r[0] for r in rows], dtype=float), np.array([r[1] for r in rows], dtype=float),
                     np.array([r[2] for r in rows], dtype=float), tuple(r[3] for r in rows), source)


def _stats(req: _Requests, idx: np.ndarray) -> dict[str, np.ndarray]:
    """Every side figure for each row of resample indices (a single row of arange for the point estimate)."""
    t, p, d = req.tokens[idx], req.passes[idx], req.decode_s[idx]
    return {"passes": p.mean(axis=1), "tpp": 1.0 / (p / t).mean(axis=1), "tpp_tok": t.sum(axis=1) / p.sum(axis=1),
            "pass_s": (d / p).mean(axis=1), "speed": 1.0 / (d / t).mean(axis=1)}


def _estimate(point: float, boot: np.ndarray | None, fixed: bool = False) -> Estimate:
    if boot is None or fixed:
        return Estimate(float(point))
    alpha = (1 - CONFIDENCE) / 2 * 100
    low, high = np.percentile(boot, [alpha, 100 - alpha])
    return Estimate(float(point), float(low), float(high))


def _side(req: _Requests, point: dict[str, np.ndarray], boot: dict[str, np.ndarray] | None,
          fixed_tpp: bool) -> SideFigures:
    def est(key: str, fixed: bool = False) -> Estimate:
        return _estimate(point[key][0], boot[key] if boot else None, fixed)

    return SideFigures(requests=len(req.tokens), passes_per_request=est("passes"),
                       tokens_per_pass=est("tpp", fixed_tpp), tokens_per_pass_tok=est("tpp_tok", fixed_tpp),
                       pass_s=est("pass_s"), decode_tok_s=est("speed"), source=req.source)


def decompose_level(target_c: int, baseline: Sequence[RequestRecord], spec: Sequence[RequestRecord], *,
                    server_accept: tuple[float, str] | None = None, seed: int = 0,
                    n_boot: int = N_BOOT) -> Decomposition | None:
    """The decomposition of one level from both runs' measured ok requests; None without figures on a side.

    ``server_accept`` (the spec server's acceptance length over the window and its kind) stands in for the
    records' passes only when no spec record carries them; otherwise it is kept as the independent check
    (``Decomposition.server_gap``).
    """
    base_req, spec_req = _baseline_requests(baseline), _spec_requests(spec, server_accept)
    if len(base_req.tokens) == 0 or len(spec_req.tokens) == 0:
        return None
    rng = np.random.default_rng([seed, target_c, 3])
    b_point, s_point = (_stats(r, np.arange(len(r.tokens))[None, :]) for r in (base_req, spec_req))
    boot = len(base_req.tokens) >= 2 and len(spec_req.tokens) >= 2 and n_boot > 0
    b_boot = _stats(base_req, rng.integers(0, len(base_req.tokens), (n_boot, len(base_req.tokens)))) if boot else None
    s_boot = _stats(spec_req, rng.integers(0, len(spec_req.tokens), (n_boot, len(spec_req.tokens)))) if boot else None
    fixed = spec_req.source.startswith("server")  # one server-wide figure: no per-request spread to resample

    cost_point = s_point["pass_s"][0] / b_point["pass_s"][0]
    cost_boot = s_boot["pass_s"] / b_boot["pass_s"] if s_boot and b_boot else None
    product_point = s_point["tpp"][0] / cost_point
    product_boot = s_boot["tpp"] / cost_boot if s_boot and cost_boot is not None else None
    measured_boot = s_boot["speed"] / b_boot["speed"] if s_boot and b_boot else None
    return Decomposition(
        target_c=target_c,
        spec=_side(spec_req, s_point, s_boot, fixed),
        baseline=_side(base_req, b_point, b_boot, True),
        pass_cost=_estimate(cost_point, cost_boot),
        product=_estimate(product_point, product_boot),
        measured=_estimate(s_point["speed"][0] / b_point["speed"][0], measured_boot),
        spec_tokens_per_pass=tuple(float(v) for v in spec_req.tokens / spec_req.passes),
        spec_categories=spec_req.categories,
        server_tokens_per_pass=server_accept[0] if server_accept is not None and not fixed else None,
    )

"""Validity checks on a baseline/spec pair: are the two runs comparable, and is each what it claims?"""

from __future__ import annotations

from typing import Any

from specbench.analysis.records.checks import (
    BASELINE_SPECULATIVE,
    PROMPT_CACHE_MISMATCH,
    SETTINGS_MISMATCH,
    SPEC_MAX_RUNNING_LOWER,
    SPEC_NOT_SPECULATIVE,
    UNMATCHED_LEVEL,
    ValidityWarning,
)
from specbench.analysis.records.summary import RunSummary
from specbench.contract.schema import RunMeta
from specbench.contract.servertext import describe_speculative, plain


def _settings(meta: RunMeta) -> dict[str, Any]:
    """The settings two compared runs must share (None = not recorded, not compared)."""
    s = meta.settings  # None: no meta.json; a run older than an option holds its default (how it behaved)
    open_loop = bool(s and s.rate_ladder)
    return {
        "max_tokens": s.max_tokens if s else None,
        "prompt set (sha256)": meta.prompts.get("sha256") or None,
        "prompt order (mode)": meta.prompts.get("mode") or None,
        "API": meta.api or None,
        "ignore_eos": s.ignore_eos if s else None,
        "temperature": s.temperature if s else None,
        "ladder": list(meta.ladder) or None,
        "model": meta.server.get("model") or None,
        "rate ladder": s.rate_ladder if s and open_loop else None,
        "arrivals": s.arrivals if s and open_loop else None,
        "max in flight": s.max_in_flight if s and open_loop else None,
        "SLO": (s.slo if s else "") or None,
        "input lengths": (s.input_len if s else "") or None,
        "output lengths": (s.output_len if s else "") or None,
        "shared prefix": (s.shared_prefix if s else "") or None,
        "turns per conversation": s.multi_turn if s else None,
        "trace": (s.trace if s else "") or None,  # trace replay (#28): the same file, speed and windows
        "trace speed": s.trace_speed if s and s.trace else None,
        "trace windows": s.trace_window if s and s.trace else None,
        "seed": meta.prompts.get("seed"),
    }


def pair_warnings(base: RunSummary, spec: RunSummary) -> list[ValidityWarning]:
    """Settings that differ, servers that are not what their role says, and levels measured in one run only."""
    found: list[ValidityWarning] = []
    if base.has_meta and spec.has_meta:
        found.extend(_settings_mismatches(base, spec))
    if spec.has_meta and not spec.meta.server.get("speculative"):
        found.append(ValidityWarning(
            SPEC_NOT_SPECULATIVE, f"{spec.name}: the server reports no speculative algorithm; this may not be "
            "a speculative run at all", spec.name))
    if base.has_meta and base.meta.server.get("speculative"):
        found.append(ValidityWarning(
            BASELINE_SPECULATIVE, f"{base.name}: the server reports speculative decoding "
            f"({describe_speculative(base.meta.server['speculative'])}); the baseline should run without it",
            base.name))
    found.extend(_spec_capped(base, spec))
    found.extend(_unmatched_levels(base, spec))
    found.extend(_cache_mismatch(base, spec))
    return found


MIN_GAUGE_SAMPLES = 3  # gauge samples in a window before its queue figure can excuse the other side


def _spec_capped(base: RunSummary, spec: RunSummary) -> list[ValidityWarning]:
    """A spec server that runs fewer requests at once than the baseline queues the rest.

    With the spec server's running-requests series (server_metrics.jsonl) the warning says where it actually
    queued; without it, the servers' declared caps (``max_running_requests`` in meta.json) are compared. A
    baseline that queued too (half as many or more) excuses the spec side. Either side's queue counts only on
    ``MIN_GAUGE_SAMPLES`` samples or more in the window: SGLang refreshes its gauges every 40 decode steps, and a
    request that arrived mid-step waits for the next, so one or two samples can show a queue that is not there
    (beside a busy core, a baseline at C=6 showed "running 1, queued 1" with 5.8 in flight; a baseline at C=2,
    one sample, "running 1, queued 1", warned when the run was compared with itself).
    """
    spec_cap = spec.meta.server.get("max_running_requests")
    note = ("SGLang silently caps speculative servers at 48 unless --max-running-requests is given, so levels "
            "above the cap queue on the spec side")
    if any(r.server_running_max is not None for r in spec.rows):
        queued = []
        for row in spec.rows:
            other = base.row_at(row.target_c)
            base_queued = (other.server_queued if other is not None and other.server_samples >= MIN_GAUGE_SAMPLES
                           else None)
            if (row.window_s and row.server_queued is not None and row.server_queued >= 1
                    and row.server_samples >= MIN_GAUGE_SAMPLES
                    and row.server_running_max is not None and row.server_running_max < row.target_c
                    and (base_queued is None or base_queued < row.server_queued / 2)):
                queued.append(row)
        if not queued:
            return []
        first = queued[0]
        in_flight = first.achieved_c if first.achieved_c is not None else first.target_c
        more = ", ".join(f"C={r.target_c} ({r.server_queued:.0f} queued)" for r in queued[1:])
        cap = f" (max_running_requests {spec_cap})" if isinstance(spec_cap, int) else ""
        return [ValidityWarning(
            SPEC_MAX_RUNNING_LOWER, f"{spec.name}: the server ran at most {first.server_running_max:.0f} requests "
            f"while {in_flight:.0f} were in flight at C={first.target_c}: the rest queued "
            f"({first.server_queued:.0f} on average){'; also at ' + more if more else ''}{cap}; {note}",
            spec.name)]
    base_cap = base.meta.server.get("max_running_requests")
    if isinstance(base_cap, int) and isinstance(spec_cap, int) and spec_cap < base_cap:
        return [ValidityWarning(
            SPEC_MAX_RUNNING_LOWER, f"{spec.name}: the server runs at most {spec_cap} requests at once, the "
            f"baseline {base_cap} (max_running_requests); {note}", spec.name)]
    return []


CACHE_SHARE_GAP = 0.2


def _cache_mismatch(base: RunSummary, spec: RunSummary) -> list[ValidityWarning]:
    """A server that serves far more of the prompts from its cache has cheaper prefills: TTFT is not comparable.

    Typical cause: one server was reused from an earlier run and its prompt cache was not flushed.
    """
    b, s = base.cached_share, spec.cached_share
    if b is None or s is None or abs(b - s) <= CACHE_SHARE_GAP:
        return []
    return [ValidityWarning(
        PROMPT_CACHE_MISMATCH, f"prompt tokens served from cache: {b:.0%} on {base.name}{_witness(base)}, {s:.0%} on "
        f"{spec.name}{_witness(spec)}; prefill work differs, so TTFT and latency ratios are skewed (flush the cache, "
        "or use fresh servers)")]


def _witness(run: RunSummary) -> str:
    """Where a share came from, when not from the requests themselves (analysis.records.cacheshare)."""
    source = run.cache.source if run.cache is not None else None
    return f" (its {source})" if source not in (None, "requests") else ""


def _settings_mismatches(base: RunSummary, spec: RunSummary) -> list[ValidityWarning]:
    found = []
    theirs = _settings(spec.meta)
    for name, mine in _settings(base.meta).items():
        other = theirs[name]
        if mine is not None and other is not None and mine != other:
            found.append(ValidityWarning(
                SETTINGS_MISMATCH, f"{name} differs: {base.name} {plain(repr(mine))}, {spec.name} "
                f"{plain(repr(other))}; the runs are not like for like"))
    return found


def _unmatched_levels(base: RunSummary, spec: RunSummary) -> list[ValidityWarning]:
    have_base = {r.level_text: r for r in base.rows if r.window_s}
    have_spec = {r.level_text: r for r in spec.rows if r.window_s}
    found = []
    for text in sorted(have_base.keys() ^ have_spec.keys(), key=lambda t: (have_base.get(t) or have_spec[t]).level):
        only, missing = (base, spec) if text in have_base else (spec, base)
        row = (have_base if text in have_base else have_spec)[text]
        found.append(ValidityWarning(
            UNMATCHED_LEVEL, f"{text} was measured in {only.name} only (no window in {missing.name}); not "
            "compared", only.name, row.target_c))
    return found

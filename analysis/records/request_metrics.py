"""Per-request figures: the one definition of ITL, TPOT, per-request speed and acceptance length.

Each function reads one record (or a set of records) as the schema defines it, so the summary table, the
per-category spread, the reports and the plots all compute these figures the same way.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterable, Sequence

import numpy as np

from specbench.contract.columnar import itl_samples_of
from specbench.contract.schema import RequestRecord


def ttft_s(record: RequestRecord) -> float | None:
    """Time to first token: the record's ``ttft_s``, else the first output chunk's arrival offset."""
    value = record.get("ttft_s")
    if value is not None:
        return float(value)
    return record["chunk_ms"][0] / 1000.0 if record["chunk_ms"] else None


def itl_samples_s(record: RequestRecord) -> np.ndarray:
    """Per-token inter-token latencies: each chunk gap split evenly over the tokens that chunk brought.

    A gap of 30 ms that brought 3 tokens gives three samples of 10 ms, so multi-token chunks (speculative
    decoding) neither inflate ITL nor hide tokens. The first chunk's gap is TTFT, not ITL.
    """
    ms = np.asarray(record["chunk_ms"], dtype=float)
    cum = np.asarray(record["chunk_tokens"], dtype=float)
    if len(ms) < 2:
        return np.zeros(0)
    gaps_s = np.diff(ms) / 1000.0
    new = np.diff(cum).astype(int)
    keep = new > 0
    return np.repeat(gaps_s[keep] / new[keep], new[keep])


def itl_percentiles_s(records: Iterable[RequestRecord], qs: Sequence[float]) -> list[float | None]:
    """Percentiles ``qs`` of the ITL samples of every record together (``itl_samples_s``), None for no samples.

    Why not ``np.concatenate`` of each record's samples: at a step of a million-record run that list of small
    arrays, the joined copy and ``np.percentile``'s own copy were held at once; here the samples grow one
    buffer, which ``np.percentile`` then partitions in place. Same figures: the same samples, the same method.
    """
    samples = itl_samples_of(records)  # records read as columns: the same samples from the arrays
    if samples is not None:
        if not len(samples):
            return [None for _ in qs]
        return [float(p) for p in np.percentile(samples, qs, overwrite_input=True)]
    pooled = array("d")
    for rec in records:
        pooled.frombytes(itl_samples_s(rec).tobytes())
    if not pooled:
        return [None for _ in qs]
    return [float(p) for p in np.percentile(np.frombuffer(pooled), qs, overwrite_input=True)]


def tpot_s(record: RequestRecord) -> float | None:
    """Time per output token after the first: (e2e - ttft) / (output_tokens - 1)."""
    first = ttft_s(record)
    n = record["output_tokens"]
    if first is None or n < 2:
        return None
    return (record["e2e_s"] - first) / (n - 1)


def per_request_tok_s(record: RequestRecord) -> float | None:
    """A request's own speed as its user saw it: output tokens / end-to-end latency (TTFT included)."""
    if record["e2e_s"] <= 0:
        return None
    return record["output_tokens"] / record["e2e_s"]


def verify_passes(record: RequestRecord) -> float | None:
    """Target-model verify passes of a speculative request (``verify_passes_source`` says from what)."""
    found = verify_passes_source(record)
    return found[0] if found is not None else None


def verify_passes_source(record: RequestRecord) -> tuple[float, str] | None:
    """Verify passes of a speculative request and the record field they came from.

    ``spec.verify_ct`` when the server reported it (for vLLM, the larger of ``num_spec_steps`` and the count
    below: ``locustfiles.specfields.from_vllm``); else tokens / ``spec.accept_length``; else, from
    llama.cpp's ``draft_n_accepted``: every
    decode pass yields its accepted drafts plus one token of its own, and the first token comes from the prompt
    pass, so passes = output tokens - accepted drafts - 1 (with SGLang's counting, which also leaves the prompt
    pass out of ``spec_verify_ct``); short by the drafts of a last pass cut at the answer's end, where the server
    counted them before the cut. The field is returned so a figure built on passes can say which of
    the three it rests on.
    """
    spec = record.get("spec") or {}
    count = spec.get("verify_ct")
    if count:
        return float(count), "verify_ct"
    length = spec.get("accept_length")
    if length and record["output_tokens"] > 0:
        return record["output_tokens"] / float(length), "accept_length"
    accepted = spec.get("accepted_drafts")
    if accepted is not None and record["output_tokens"] - accepted - 1 >= 1:
        return float(record["output_tokens"] - accepted - 1), "accepted_drafts"
    return None


def acceptance_length(records: Iterable[RequestRecord]) -> float | None:
    """Mean acceptance length of a set of requests: total output tokens / total verify passes.

    Token-weighted, bonus token included: the figure SGLang reports server-wide, but limited to these
    requests. Records without speculative figures are left out; None when no record has any.
    """
    tokens = 0.0
    passes = 0.0
    for rec in records:
        n = verify_passes(rec)
        if n is None:
            continue
        tokens += rec["output_tokens"]
        passes += n
    return tokens / passes if passes > 0 else None


def most_tokens_per_pass(records: Iterable[RequestRecord]) -> float | None:
    """The largest (output tokens - 1) / verify passes of one request whose passes the server counted
    (``verify_ct``): its first token comes from the prompt pass, every later one from a verify pass, so no request
    can exceed the drafts per pass + 1 here. Passes derived from llama.cpp's accepted drafts are left out: they are
    known to fall short by the drafts of a last pass cut at the answer's end (``verify_passes_source``), so they
    would be judged on a shortfall already documented, not on a count that claims to be exact."""
    found = [(rec["output_tokens"] - 1) / n for rec in records
             if (src := verify_passes_source(rec)) is not None and src[1] == "verify_ct" and (n := src[0])]
    return max(found, default=None)


def mean_or_none(values: Sequence[float] | np.ndarray) -> float | None:
    """Arithmetic mean, None for no values (never NaN, so JSON stays valid)."""
    return float(np.mean(values)) if len(values) else None


def percentile_or_none(values: Sequence[float] | np.ndarray, q: float) -> float | None:
    """Exact percentile from the samples (numpy, linear interpolation), None for no values."""
    return float(np.percentile(values, q)) if len(values) else None

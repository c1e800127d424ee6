"""The most tokens one verify pass can yield, and the step figures that claim more.

A speculative pass verifies at most k drafted tokens and adds one of its own, so no acceptance length (output
tokens per target pass) can exceed k + 1, however it was counted. A figure above that bound is a counting error
(the suite's or the server's: a last pass cut at ``max_tokens`` once made 4.27 tokens per pass out of vLLM's 3
drafts), so it is flagged and left out of the row, never shown as a measurement.

k is read, first found wins, from the server's declared settings (SGLang's ``speculative_num_steps``: each step
drafts one token along the accepted path; llama.cpp's ``speculative.n_max``), else from the per-position
acceptance counters (vLLM, llama.cpp): a pass can accept position i only if some pass did, so the highest
position ever accepted, p, bounds a pass at p + 2 tokens.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace

from specbench.analysis.records.steprow import StepRow
from specbench.contract.server_metrics import ServerMetricsSample, accepted_by_position

# Float slack: tokens / passes of whole numbers lands exactly on the bound or above it by a count, never by 1e-9.
_SLACK = 1e-9


def pass_limit(speculative: object, samples: Sequence[ServerMetricsSample]) -> tuple[int, str] | None:
    """(most tokens a pass can yield, where that bound comes from), or None when nothing bounds it."""
    if isinstance(speculative, Mapping):  # the server's text, as meta.json holds it: any shape
        for key, name in (("num_steps", "speculative_num_steps"), ("n_max", "speculative.n_max")):
            k = speculative.get(key)
            if isinstance(k, int) and not isinstance(k, bool) and k >= 1:
                return k + 1, f"{k} draft{'s' if k != 1 else ''} per pass ({name}) + 1"
    for sample in reversed(samples):  # counters only grow: the last sample that has them holds every position
        counts = accepted_by_position(sample.get("values") or {})
        if counts is not None:
            reached = [i for i, n in enumerate(counts) if n > 0]
            if reached:
                top = max(reached)
                return top + 2, f"no pass accepted a draft past position {top} (the server's per-position counters) + 1"
            return None
    return None


def bound_accept_lengths(rows: Sequence[StepRow], limit: tuple[int, str] | None) -> tuple[list[StepRow], list[str]]:
    """The rows with every acceptance length that claims more than ``limit`` left out (None), and one sentence per
    figure left out. The client's figure falls with any request whose decode passes yielded more than the limit
    (its first token is the prompt pass's, so (output tokens - 1) / passes); the server's counts verify passes only."""
    if limit is None:
        return list(rows), []
    most, why = limit
    kept: list[StepRow] = []
    said: list[str] = []
    for row in rows:
        client, server = row.most_tokens_per_pass, row.server_accept_length
        if row.accept_length is not None and client is not None and client > most + _SLACK:
            row = replace(row, accept_length=None)
            said.append(f"{row.level_text}: a request's passes yielded {client:.3f} tokens each past its first (the "
                        f"client's records), above the most a pass can yield, {most} ({why}); the acceptance length "
                        "is left out as a counting error")
        if server is not None and server > most + _SLACK:
            row = replace(row, server_accept_length=None)
            said.append(f"{row.level_text}: the server's acceptance length {server:.3f} tokens per pass is above the "
                        f"most a pass can yield, {most} ({why}); left out as a counting error")
        kept.append(row)
    return kept, said

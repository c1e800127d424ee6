"""A server's per-request speculation figures, read into the record's normalised ``SpecFields``.

SGLang reports them in ``meta_info`` (native route) or ``sglext`` (OpenAI routes), vLLM in a chunk's
``metrics.speculative_decoding``, llama.cpp in ``timings`` (``draft_n``, ``draft_n_accepted``). The key
names are facts of each server's wire format (see shared/reference/protocols.md).
"""

from __future__ import annotations

from typing import Any

from contract.schema import SpecFields

# Normalised speculative field -> the server's key, per server.
_SPEC_KEYS: dict[str, dict[str, str]] = {
    "sglang": {"verify_ct": "spec_verify_ct", "accepted_drafts": "spec_num_correct_drafts",
               "proposed_drafts": "spec_num_proposed_drafts", "accept_length": "spec_accept_length",
               "accept_rate": "spec_accept_rate"},
    "vllm": {"verify_ct": "num_spec_steps", "accepted_drafts": "num_accepted_draft_tokens",
             "proposed_drafts": "num_draft_tokens", "accept_length": "mean_acceptance_length",
             "accept_rate": "draft_acceptance_rate"},
}
_SPEC_COUNTS = ("verify_ct", "accepted_drafts", "proposed_drafts")


def _num(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) else None


def _int(value: Any) -> int | None:
    return int(value) if isinstance(value, int) else None


def _spec_fields(src: dict[str, Any], server: str, source: str) -> SpecFields:
    fields: dict[str, Any] = {name: (_int if name in _SPEC_COUNTS else _num)(src.get(key))
                              for name, key in _SPEC_KEYS[server].items()}
    return SpecFields(**fields, source=source)


def from_sglang(src: dict[str, Any], source: str) -> SpecFields:
    """From SGLang's ``meta_info`` or ``sglext.spec_tokens_details`` (``source`` says which)."""
    return _spec_fields(src, "sglang", source)


def from_vllm(src: dict[str, Any]) -> SpecFields:
    """From vLLM's per-request ``metrics.speculative_decoding``."""
    return _spec_fields(src, "vllm", "vllm_metrics")


def from_llamacpp(timings: dict[str, Any]) -> SpecFields | None:
    """From llama.cpp's ``timings``; None when it drafted nothing (no speculation on this request)."""
    draft_n = timings.get("draft_n")
    if not isinstance(draft_n, int) or draft_n <= 0:
        return None
    accepted = timings.get("draft_n_accepted")
    accepted = accepted if isinstance(accepted, int) else 0
    return SpecFields(verify_ct=None, accepted_drafts=accepted, proposed_drafts=draft_n, accept_length=None,
                      accept_rate=accepted / draft_n, source="timings")

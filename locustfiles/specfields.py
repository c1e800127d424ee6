"""A server's per-request speculation figures, read into the record's normalised ``SpecFields``.

SGLang reports them in ``meta_info`` (native route) or ``sglext.spec_tokens_details`` (OpenAI routes), vLLM in
a chunk's ``metrics.speculative_decoding``, llama.cpp in ``timings`` (``draft_n``, ``draft_n_accepted``). The
key names are facts of each server's wire format, and SGLang renamed its keys twice (docs/protocols.md):

1. oldest releases: ``spec_verify_ct`` alone (the accept length is then completion tokens / verify passes,
   SGLang's own definition; accepted and proposed drafts are not reported);
2. then ``spec_accept_token_num`` / ``spec_draft_token_num`` / ``spec_accept_histogram``, and in an intermediate
   generation ``spec_accepted_drafts`` / ``spec_proposed_drafts`` for the two counts (release not confirmed);
3. now ``spec_num_correct_drafts`` / ``spec_num_proposed_drafts`` / ``spec_correct_drafts_histogram``, for a
   while beside older names as aliases. The newest name present wins.
"""

from __future__ import annotations

from typing import Any, cast

from specbench.contract.schema import SpecFields

# Normalised speculative field -> the server's keys, newest first.
_SPEC_KEYS: dict[str, dict[str, tuple[str, ...]]] = {
    "sglang": {"verify_ct": ("spec_verify_ct",),
               "accepted_drafts": ("spec_num_correct_drafts", "spec_accepted_drafts", "spec_accept_token_num"),
               "proposed_drafts": ("spec_num_proposed_drafts", "spec_proposed_drafts", "spec_draft_token_num"),
               "accept_length": ("spec_accept_length",), "accept_rate": ("spec_accept_rate",)},
    # vLLM's num_spec_steps is read beside these (a floor of the passes) and mean_acceptance_length is not: from_vllm.
    "vllm": {"accepted_drafts": ("num_accepted_draft_tokens",), "proposed_drafts": ("num_draft_tokens",),
             "accept_rate": ("draft_acceptance_rate",)},
}
_SPEC_COUNTS = ("verify_ct", "accepted_drafts", "proposed_drafts")
#: SGLang keys whose nonzero value means the request was speculated (any generation).
SGLANG_SPEC_MARKERS = ("spec_verify_ct", "spec_num_proposed_drafts", "spec_proposed_drafts", "spec_draft_token_num")


def _num(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _int(value: Any) -> int | None:
    return int(value) if isinstance(value, int) and not isinstance(value, bool) else None


def _first(src: dict[str, Any], keys: tuple[str, ...]) -> Any:
    return next((src[k] for k in keys if src.get(k) is not None), None)


def _spec_fields(src: dict[str, Any], server: str, source: str) -> SpecFields:
    fields: dict[str, Any] = {name: (_int if name in _SPEC_COUNTS else _num)(_first(src, keys))
                              for name, keys in _SPEC_KEYS[server].items()}
    return cast(SpecFields, {**fields, "source": source})  # _SPEC_KEYS names SpecFields keys only


def sglang_speculated(src: dict[str, Any]) -> bool:
    """Whether SGLang's figures show speculation (a non-speculating server may answer with zeros)."""
    return any(_num(src.get(k)) for k in SGLANG_SPEC_MARKERS)


def _zero_fill(value: Any) -> bool:
    return (_num(value) == 0.0) or value == []


def sglext_reported(details: dict[str, Any]) -> dict[str, Any]:
    """``sglext.spec_tokens_details`` less what may be SGLang's zero fill: its OpenAI routes build the block from
    the canonical keys, each ``or 0``, so a build that did not populate a figure sends 0 (docs/reference/protocols.md).
    A 0 or [] is dropped ("not reported"), except an accepted-draft count or rate of 0 beside a nonzero proposed count
    (drafts proposed and all rejected). Never "accepted nothing" on a server that left the figure out."""
    proposed = any(_num(details.get(k)) for k in _SPEC_KEYS["sglang"]["proposed_drafts"])
    real_zeros = {*_SPEC_KEYS["sglang"]["accepted_drafts"], "spec_accept_rate"} if proposed else set()
    return {k: v for k, v in details.items() if k in real_zeros or not _zero_fill(v)}


def from_sglang(src: dict[str, Any], source: str, completion_tokens: int | None = None) -> SpecFields:
    """From SGLang's ``meta_info`` or ``sglext.spec_tokens_details`` (``source`` says which). The oldest
    releases report verify passes only: the accept length is then ``completion_tokens / verify_ct``."""
    spec = _spec_fields(src, "sglang", source)
    verify = spec.get("verify_ct")
    if spec.get("accept_length") is None and verify and completion_tokens is not None:
        spec["accept_length"] = completion_tokens / verify
    proposed, accepted = spec.get("proposed_drafts"), spec.get("accepted_drafts")
    if spec.get("accept_rate") is None and proposed and accepted is not None:
        spec["accept_rate"] = accepted / proposed
    return spec


def from_vllm(src: dict[str, Any], completion_tokens: int | None = None) -> SpecFields:
    """From vLLM's per-request ``metrics.speculative_decoding``: accepted and proposed drafts, their rate, passes.

    The target passes after the prompt pass (``verify_ct``) are ``max(num_spec_steps, completion_tokens - 1 -
    accepted)``: each is a count of passes that can fall short, and never from the same cause. vLLM's
    ``num_spec_steps`` counts only the steps that verified a proposal, so it leaves out a step whose drafter
    proposed nothing (an n-gram drafter without a match: a pass of one token). The output tokens less the
    accepted drafts less the first token leave out the drafts a last pass accepted past ``max_tokens`` (vLLM
    counts them accepted, then cuts the answer): with a draft model that drafts 3 and is always accepted, 64
    tokens, 48 accepted, 16 steps, the difference gave 15 passes and an impossible 4.27 tokens per pass. The
    larger of the two is exact when either cause is absent. ``mean_acceptance_length`` (1 + accepted /
    ``num_spec_steps``) is not read: it leaves the non-drafting passes out, so it is not tokens per pass.
    """
    spec = _spec_fields(src, "vllm", "vllm_metrics") | SpecFields(verify_ct=None, accept_length=None)
    steps, accepted = _int(src.get("num_spec_steps")), spec.get("accepted_drafts")
    if steps is not None and steps >= 0:
        undrafted_floor = completion_tokens - 1 - accepted if completion_tokens and accepted is not None else 0
        spec["verify_ct"] = max(steps, undrafted_floor) or None
    return spec


def from_llamacpp(timings: dict[str, Any]) -> SpecFields | None:
    """From llama.cpp's ``timings``; None when it drafted nothing (no speculation on this request)."""
    draft_n = timings.get("draft_n")
    if not isinstance(draft_n, int) or draft_n <= 0:
        return None
    accepted = timings.get("draft_n_accepted")
    accepted = accepted if isinstance(accepted, int) else 0
    return SpecFields(verify_ct=None, accepted_drafts=accepted, proposed_drafts=draft_n, accept_length=None,
                      accept_rate=accepted / draft_n, source="timings")

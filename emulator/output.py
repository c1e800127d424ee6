"""The state of one answer as the wire formats see it: tokens so far, finish reason, spec figures."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Any

from .parsing import GenRequest
from .profile import Profile
from .scheduler import Job
from .textmodel import WordStream

__all__ = ["DONE", "Output", "sse"]

DONE = b"data: [DONE]\n\n"


def sse(obj: dict[str, Any]) -> bytes:
    """One SSE event, compact JSON as SGLang's orjson / model_dump_json produce."""
    return b"data: " + json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode() + b"\n\n"


# sglext.spec_tokens_details' keys in the canonical (generation-3) names, with what a missing one is filled with.
_CANONICAL_SGLEXT: dict[str, Any] = {
    "spec_accept_rate": 0.0, "spec_accept_length": 0.0, "spec_num_correct_drafts": 0, "spec_num_proposed_drafts": 0,
    "spec_verify_ct": 0, "spec_correct_drafts_histogram": [],
}


@dataclass
class Output:
    """Everything a formatter reads; ``finish`` is "length", "stop" or "abort" once known."""

    req: GenRequest
    job: Job
    profile: Profile
    stops_at_eos: bool
    cached_tokens: int
    arrival_s: float
    words: WordStream = field(init=False)
    created: int = field(init=False)
    finish: str | None = None

    def __post_init__(self) -> None:
        # The scheduler's stream when it has one: a changed answer (emulator.divergence) forks it there.
        self.words = self.job.words if self.job.words is not None else WordStream(self.req.text)
        self.created = int(time.time())

    @property
    def produced(self) -> int:
        return self.job.produced

    @property
    def natural_finish(self) -> str:
        return "stop" if self.stops_at_eos else "length"

    @property
    def matched_stop(self) -> int | None:
        return self.profile.eos_token_id if self.finish == "stop" else None

    @property
    def proposed_drafts(self) -> int:
        return self.job.proposed

    def spec_figures(self) -> dict[str, Any] | None:
        """The per-request ``spec_*`` figures (the ledger's truth, newest names); None without speculation or
        before any verify step."""
        spec, job = self.profile.speculative, self.job
        if spec is None or job.verify_ct == 0:
            return None
        proposed = self.proposed_drafts
        return {
            "spec_verify_ct": job.verify_ct,
            "spec_accept_length": job.produced / job.verify_ct,
            "spec_accept_rate": job.correct_drafts / proposed if proposed else 0.0,
            "spec_num_correct_drafts": job.correct_drafts,
            "spec_num_proposed_drafts": proposed,
            "spec_correct_drafts_histogram": list(job.histogram),
        }

    def _generation_two_names(self) -> tuple[str, str]:
        """The accepted- and proposed-draft keys of SGLang's second naming (``Vintage.draft_names``)."""
        if self.profile.wire.draft_names:
            return "spec_accepted_drafts", "spec_proposed_drafts"
        return "spec_accept_token_num", "spec_draft_token_num"

    def wire_spec_figures(self) -> dict[str, Any] | None:
        """``spec_figures`` under the key names of the emulated SGLang release (``Vintage.spec_names``)."""
        figures, wire = self.spec_figures(), self.profile.wire
        if figures is None or (wire.spec_names == 3 and not wire.spec_aliases):
            return figures
        if wire.spec_names == 1:
            return {"spec_verify_ct": figures["spec_verify_ct"]}
        accepted, proposed = self._generation_two_names()
        old = {accepted: figures["spec_num_correct_drafts"], proposed: figures["spec_num_proposed_drafts"],
               "spec_accept_histogram": figures["spec_correct_drafts_histogram"]}
        if wire.spec_names == 2:
            return {k: v for k, v in figures.items() if not k.startswith(("spec_num_", "spec_correct_"))} | old
        return figures | old

    def spec_tokens_details(self) -> dict[str, Any]:
        """``sglext.spec_tokens_details`` of the OpenAI routes; missing values are 0 or []. A release that zero-fills
        it (``Vintage.sglext_zero_fill``) reads the canonical keys, each ``or 0``, from its own meta_info figures."""
        if self.profile.wire.sglext_zero_fill:
            meta = self.wire_spec_figures() or {}
            return {key: meta.get(key) or empty for key, empty in _CANONICAL_SGLEXT.items()}
        if self.profile.wire.spec_names == 2:
            accepted, proposed = self._generation_two_names()
            return {"spec_accept_rate": 0.0, "spec_accept_length": 0.0, accepted: 0, proposed: 0,
                    "spec_verify_ct": 0, "spec_accept_histogram": [],
                    **(self.wire_spec_figures() or {})}
        figures = self.spec_figures() or {}
        return {
            "spec_accept_rate": figures.get("spec_accept_rate", 0.0),
            "spec_accept_length": figures.get("spec_accept_length", 0.0),
            "spec_cap_length": 0.0,
            "spec_block_accept_length": 0.0,
            "spec_num_correct_drafts": figures.get("spec_num_correct_drafts", 0),
            "spec_num_proposed_drafts": figures.get("spec_num_proposed_drafts", 0),
            "spec_verify_ct": figures.get("spec_verify_ct", 0),
            "spec_correct_drafts_histogram": figures.get("spec_correct_drafts_histogram", []),
            "spec_cap_lens_histogram": [],
        }

    def meta_info(self, completion_tokens: int, *, final: bool, first: bool) -> dict[str, Any]:
        """Native ``meta_info``: cumulative counts; e2e and spec figures only on the final chunk."""
        meta: dict[str, Any] = {
            "id": self.req.rid,
            "finish_reason": self.finish_reason_object() if final else None,
            "prompt_tokens": self.req.prompt_tokens,
            "weight_version": "default",
            "num_retractions": 0,
            "reasoning_tokens": 0,
            "completion_tokens": completion_tokens,
            "cached_tokens": self.cached_tokens,
        }
        if first:
            meta["response_sent_to_client_ts"] = time.time()
        if final:
            meta["e2e_latency"] = time.time() - self.arrival_s
            meta.update(self.wire_spec_figures() or {})
        return meta

    def finish_reason_object(self) -> dict[str, Any]:
        if self.finish == "stop":
            return {"type": "stop", "matched": self.profile.eos_token_id}
        if self.finish == "abort":
            return {"type": "abort", "message": "Request aborted (emulated fault).", "status_code": 503,
                    "err_type": "SERVICE_UNAVAILABLE"}
        return {"type": "length", "length": self.req.max_new_tokens}

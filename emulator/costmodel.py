"""The emulator's cost model in closed form, so tests can check measured tok/s against an exact curve.

Scheduler semantics these formulas mirror (see ``scheduler.py``):

* a step with B running requests lasts ``a + b*B + prefill_ms_per_token * (prompt tokens joining)``
  (``a``/``b`` from the speculative block when speculating), divided by ``speed``;
* the step in which a request joins gives it 1 token (the prefill token); each later step gives 1 token
  (baseline) or 1 + accepted drafts (speculative, capped at what is still missing);
* a finished request's client sends its next request while the following step already runs, so in a
  busy server every request spends one step waiting (the "refill gap"); at concurrency 1 the loop is
  idle instead and starts the new request at once;
* above ``max_running_requests`` the queue refills a freed slot at the very next step.

Closed loop with C clients, N tokens per request, S steps per request (means over requests), P prompt
tokens, M = max_running_requests::

    C = 1:   N / (S*(a+b) + p*P)
    C >= 2:  min( C*N / ((S+1)*a + b*C*S + p*C*P),   M*N / (S*a + b*M*S + p*M*P) )

All results are in real time at the profile's ``speed``. The analytic curve assumes ``prefix_cache``
is off, no faults are configured and there is no drift (``drift_per_min`` 0: ``emulator.drift``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from functools import lru_cache
from typing import Any

from .profile import Profile
from .textmodel import natural_answer_tokens, prompt_key, prompt_tokens

__all__ = [
    "at_depth",
    "closed_loop_throughput",
    "draft_tokens_distribution",
    "expected_decode_steps",
    "expected_request_steps",
    "expected_step_ms",
    "expected_throughput",
    "expected_throughput_for_prompts",
    "mean_prompt_tokens",
    "mean_step_tokens",
    "mean_tokens_per_step",
]

PromptLike = str | Sequence[Mapping[str, Any]]
_ALPHA_GRID = 64


def _step_coefficients(profile: Profile) -> tuple[float, float]:
    if profile.speculative is not None:
        return profile.speculative.step_a_ms, profile.speculative.step_b_ms
    return profile.step_a_ms, profile.step_b_ms


def at_depth(profile: Profile, depth: int) -> Profile:
    """The profile run at a fixed speculative depth (``specbench tune``'s candidates): its step costs at that
    depth, no schedule. Depth 0 drafts nothing (one token per pass at the depth-0 cost)."""
    spec = profile.speculative
    if spec is None:
        raise ValueError("a profile without speculation has no depth")
    a_ms, b_ms = spec.step_coefficients(depth)
    return replace(profile, speculative=replace(spec, num_steps=depth, num_draft_tokens=depth + 1, step_a_ms=a_ms,
                                                step_b_ms=b_ms, draft_a_ms=0.0, draft_b_ms=0.0, k_schedule=()))


def expected_step_ms(profile: Profile, batch: int, prefill_tokens: int = 0) -> float:
    """Real duration (ms, at the profile's speed) of one step with ``batch`` running requests."""
    a_ms, b_ms = _step_coefficients(profile)
    return (a_ms + b_ms * batch + profile.prefill_ms_per_token * prefill_tokens) * profile.scale


def draft_tokens_distribution(alpha: float, num_steps: int) -> list[float]:
    """P(a verify step yields 1 + x tokens) for x = 0..num_steps: x leading drafts accepted."""
    probs = [alpha**x * (1.0 - alpha) for x in range(num_steps)]
    probs.append(alpha**num_steps)
    return probs


def mean_step_tokens(alpha: float, num_steps: int) -> float:
    """Mean tokens per verify step, uncapped: 1 + alpha + ... + alpha**num_steps."""
    return sum(alpha**x for x in range(num_steps + 1))


@lru_cache(maxsize=4096)
def _decode_steps_table(alpha: float, num_steps: int, tokens: int) -> float:
    probs = draft_tokens_distribution(alpha, num_steps)
    steps = [0.0] * (tokens + 1)
    for n in range(1, tokens + 1):
        steps[n] = 1.0 + sum(p * steps[max(0, n - 1 - x)] for x, p in enumerate(probs))
    return steps[tokens]


def expected_decode_steps(alpha: float, num_steps: int, tokens: int) -> float:
    """Exact expected number of verify steps to produce ``tokens`` tokens (last step truncated)."""
    return _decode_steps_table(round(alpha, 12), num_steps, max(0, tokens))


def expected_request_steps(profile: Profile, prompt: PromptLike, completion_tokens: int) -> float:
    """Expected steps a request spends in the batch: its join step plus the decode/verify steps."""
    if profile.speculative is None:
        return float(completion_tokens)
    spec = profile.speculative
    alpha = spec.alpha_for(prompt_key(prompt))
    return 1.0 + expected_decode_steps(alpha, spec.num_steps, completion_tokens - 1)


def mean_prompt_tokens(profile: Profile, prompts: Sequence[PromptLike]) -> float:
    """Mean emulated prompt tokens: strings as sent raw, message lists as rendered for chat."""
    return sum(prompt_tokens(p, profile.chars_per_token) for p in prompts) / len(prompts)


def mean_tokens_per_step(
    profile: Profile, prompts: Sequence[PromptLike] | None = None, max_tokens: int | None = None
) -> float:
    """Effective tokens per verify step for this prompt mix: L such that E[steps] = 1 + (N-1)/L.

    It is a harmonic-type mean (slow prompts weigh more). With ``max_tokens`` it is exact for requests of
    that length; without, it is the long-answer limit. ``prompts=None`` means the profile's whole
    acceptance distribution: the base ``[alpha_min, alpha_max]``, ignoring ``by_text`` rules (and pins), which
    need the prompts' text. Always 1.0 without speculation.
    """
    spec = profile.speculative
    if spec is None:
        return 1.0
    if prompts is None:
        width = spec.alpha_max - spec.alpha_min
        count = _ALPHA_GRID if width > 0 else 1
        alphas = [spec.alpha_min + width * (i + 0.5) / count for i in range(count)]
    else:
        alphas = [spec.alpha_for(prompt_key(p)) for p in prompts]
    if max_tokens is None or max_tokens <= 1:
        return len(alphas) / sum(1.0 / mean_step_tokens(a, spec.num_steps) for a in alphas)
    decode = [expected_decode_steps(a, spec.num_steps, max_tokens - 1) for a in alphas]
    return (max_tokens - 1) / (sum(decode) / len(decode))


def closed_loop_throughput(
    profile: Profile,
    concurrency: int,
    mean_tokens: float,
    mean_steps: float,
    mean_prompt_tokens: float,
    *,
    client_gap_ms: float = 0.0,
) -> float:
    """Steady-state tok/s of C closed-loop clients, from per-request means (see module docstring).

    ``client_gap_ms`` is the real time from the end of a response to the next request reaching the
    server (client and HTTP overhead). It only counts at C = 1; with more clients it hides in the
    refill step as long as it is shorter than a step.
    """
    if concurrency < 1:
        raise ValueError("concurrency must be >= 1")
    a_ms, b_ms = _step_coefficients(profile)
    prefill_ms = profile.prefill_ms_per_token * mean_prompt_tokens
    if concurrency == 1:
        cycle_ms = (mean_steps * (a_ms + b_ms) + prefill_ms) * profile.scale + client_gap_ms
        return 1000.0 * mean_tokens / cycle_ms
    c, m, s = concurrency, profile.max_running_requests, mean_steps
    open_ms = (s + 1.0) * a_ms + b_ms * c * s + prefill_ms * c
    full_ms = s * a_ms + b_ms * m * s + prefill_ms * m
    per_ms = min(c * mean_tokens / open_ms, m * mean_tokens / full_ms)
    return 1000.0 * per_ms / profile.scale


def expected_throughput(
    profile: Profile,
    concurrency: int,
    max_tokens: int,
    mean_prompt_tokens: float,
    mean_accept_tokens_per_step: float | None = None,
    *,
    client_gap_ms: float = 0.0,
) -> float:
    """Closed-loop steady-state tok/s when every request generates ``max_tokens`` (``ignore_eos``).

    ``mean_accept_tokens_per_step`` is L from ``mean_tokens_per_step`` for the prompts used (default:
    the profile's whole acceptance distribution); it is ignored without speculation.
    ``client_gap_ms``: see ``closed_loop_throughput``.
    """
    if profile.speculative is None:
        steps = float(max_tokens)
    else:
        accept = mean_accept_tokens_per_step or mean_tokens_per_step(profile, None, max_tokens)
        steps = 1.0 + (max_tokens - 1) / accept
    return closed_loop_throughput(profile, concurrency, float(max_tokens), steps, mean_prompt_tokens,
                                  client_gap_ms=client_gap_ms)


def expected_throughput_for_prompts(
    profile: Profile,
    concurrency: int,
    prompts: Sequence[PromptLike],
    max_tokens: int,
    *,
    ignore_eos: bool = True,
    client_gap_ms: float = 0.0,
) -> float:
    """Closed-loop tok/s when the clients cycle evenly through ``prompts`` (exact per-prompt means).

    Without ``ignore_eos`` each prompt stops at its natural answer length, capped at ``max_tokens``.
    """
    tokens, steps = [], []
    for prompt in prompts:
        n = max_tokens
        if not ignore_eos:
            natural = natural_answer_tokens(prompt_key(prompt), profile.answer_min_tokens, profile.answer_max_tokens)
            n = min(max_tokens, natural)
        tokens.append(n)
        steps.append(expected_request_steps(profile, prompt, n))
    count = len(prompts)
    return closed_loop_throughput(profile, concurrency, sum(tokens) / count, sum(steps) / count,
                                  mean_prompt_tokens(profile, prompts), client_gap_ms=client_gap_ms)

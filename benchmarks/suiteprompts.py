"""The prompts calibration runs with: the suite's ``config/prompts/diverse.jsonl`` when present.

A benchmark of the emulator alone, so this is a minimal reader of the same JSONL format
(``{"prompt": str}`` or ``{"messages": [...]}`` per line), plus a small fallback list for when the file
is absent. Message lists are kept as lists: they are meant for ``/v1/chat/completions``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from specbench.config import data_path

__all__ = ["FALLBACK_PROMPTS", "SUITE_PROMPTS", "PromptLike", "load_suite_prompts"]

PromptLike = str | list[dict[str, Any]]
SUITE_PROMPTS = data_path("prompts", "diverse.jsonl")

FALLBACK_PROMPTS: list[PromptLike] = [
    "Explain the theory of general relativity in detail.",
    "Write a Python function that merges two sorted lists without using sort().",
    "What is the derivative of x^3 * sin(x)? Show each step.",
    "Summarise the causes of the French Revolution in five bullet points.",
    "Write a short poem about a lighthouse keeper who has never seen the sea calm.",
    "Translate into French: 'The train leaves at seven, so we should be at the station by half past six.'",
    "Extract the names and dates from: 'Ana met Bo on 3 May 2021; they married on 9 June 2023.'",
    "Why is the sky blue?",
    "Compare TCP and UDP for a multiplayer game, and say when you would pick each.",
    "Prove that the square root of 2 is irrational.",
    [{"role": "system", "content": "You are a concise assistant."},
     {"role": "user", "content": "Give me three tips for writing clear commit messages."}],
    [{"role": "user", "content": "What is a mutex?"}],
]


def load_suite_prompts(path: str | Path | None = None) -> tuple[list[PromptLike], str]:
    """Prompts and where they came from; falls back to ``FALLBACK_PROMPTS`` when the file is missing."""
    source = Path(path) if path is not None else SUITE_PROMPTS
    if not source.exists():
        return list(FALLBACK_PROMPTS), "built-in fallback list"
    prompts: list[PromptLike] = []
    with source.open(encoding="utf-8") as handle:
        for line in handle:
            if not line.strip():
                continue
            row = json.loads(line)
            prompt = row.get("prompt")
            prompts.append(prompt if isinstance(prompt, str) else list(row["messages"]))
    return prompts, str(source)

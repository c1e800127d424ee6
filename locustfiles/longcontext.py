"""The built-in ``long-context`` prompt set: 14 prompts of 8k-32k tokens of real text, category ``long_context``.

Why a set of its own: context length changes both the baseline's speed (prefill, attention over a long KV
cache) and a draft's acceptance, so a team serving long documents must measure them; but adding such prompts
to the default ``diverse`` order would change every default run and overflow small real servers.

Why generated at load time rather than committed: the set is ~1.1 MB of text, all of it composed from the
passages of ``config/prompts/diverse.jsonl``; generating it (a few milliseconds, a pure function of that file
and this module) keeps the repository small, and its sha256 is as stable as the two (a test pins it).
``python -m specbench.locustfiles.longcontext OUT.jsonl`` writes it out for other tools; loading that file gives
the same sha256.

Each prompt is a multi-document context with a real task at the end: the passages of the diverse set's
prompts (the text after their instruction: reports, transcripts, logs, contracts, code, stories) and its
longer chat conversations as numbered documents, in a seeded order, the last one cut at a word boundary to
meet the prompt's length, then a request about them: carry out a document's original instruction on it,
find the document that holds a quoted sentence, compare two documents, or summarise one and relate it to the rest.
The longest prompts need more text than the diverse set has (about 100k characters of passages), so their
later documents repeat earlier ones under new numbers, as a real document dump can. Lengths are spread evenly
over 8.5k-31.5k tokens at 4 characters per token (the suite's estimate, and the emulator's tokenizer).
"""

from __future__ import annotations

import json
import random
import re
import sys
from dataclasses import dataclass
from functools import lru_cache

from specbench.locustfiles.promptfile import load_builtin
from specbench.locustfiles.promptset import Prompt, PromptSet, content_sha256

NAME = "long-context"
CATEGORY = "long_context"
SOURCE_SET = "diverse"
CHARS_PER_TOKEN = 4
COUNT = 14
MIN_TOKENS, MAX_TOKENS = 8_500, 31_500
MIN_PASSAGE_CHARS = 300
_SENTENCE = re.compile(r"[A-Z][^.!?\n]*[.!?]")


@dataclass(frozen=True)
class Document:
    text: str
    instruction: str | None  # the request the diverse set asked about this text, when it had one


def target_tokens() -> list[int]:
    """The prompts' lengths in tokens, evenly spread over MIN_TOKENS..MAX_TOKENS."""
    step = (MAX_TOKENS - MIN_TOKENS) / (COUNT - 1)
    return [round(MIN_TOKENS + i * step) for i in range(COUNT)]


def documents(source: PromptSet) -> list[Document]:
    """The passages of the source set (text after a prompt's instruction) and its longer chat transcripts."""
    docs = []
    for prompt in source.prompts:
        if prompt.text is not None:
            head, sep, body = prompt.text.partition("\n\n")
            if sep and len(body.strip()) >= MIN_PASSAGE_CHARS:
                docs.append(Document(body.strip(), head.strip()))
        else:
            transcript = prompt.as_text().removesuffix("\nAssistant:")
            if len(transcript) >= MIN_PASSAGE_CHARS:
                docs.append(Document(transcript, None))
    return docs


def _cut(text: str, chars: int) -> str:
    head = text[:chars]
    space = head.rfind(" ")
    return head[:space] if space > chars // 2 else head


def _pick(pool: list[Document], rng: random.Random, budget: int) -> list[Document]:
    """Documents in a seeded order until ``budget`` characters; the pool is reshuffled when used up."""
    chosen: list[Document] = []
    order: list[Document] = []
    used = 0
    while used < budget:
        if not order:
            order = list(pool)
            rng.shuffle(order)
        doc = order.pop()
        block = len(doc.text) + 24  # the document's heading and blank lines
        if used + block > budget:
            if budget - used > 400:  # fill the rest with the start of one more document: real text, cut
                chosen.append(Document(_cut(doc.text, budget - used - 24) + " [...]", None))
            break
        chosen.append(doc)
        used += block
    return chosen


def _task(i: int, docs: list[Document], rng: random.Random) -> str:
    """A request about the documents; it names only documents included whole."""
    whole = [n for n, d in enumerate(docs, start=1) if not d.text.endswith(" [...]")]
    kind = i % 4
    with_instruction = [n for n in whole if docs[n - 1].instruction]
    if kind == 0 and with_instruction:
        k = rng.choice(with_instruction)
        instruction = (docs[k - 1].instruction or "").rstrip(":")
        return f"Work on document {k} only. {instruction}{'' if instruction[-1:] in '.?!' else '.'}"
    if kind == 1:  # find a needle: one sentence of one document, quoted
        k = rng.choice(whole)
        sentences = [m.strip() for m in _SENTENCE.findall(docs[k - 1].text) if 40 <= len(m.strip()) <= 160]
        if sentences:
            quote = rng.choice(sentences)
            return (f'Which document contains the sentence "{quote}"? Give its number (and any other document '
                    "that repeats it), then explain in three sentences what that document is about.")
    if kind == 2 and len(whole) >= 2:
        a, b = sorted(rng.sample(whole, 2))
        return (f"Compare documents {a} and {b}: what do they have in common, and how do they differ in purpose, "
                "audience and tone? Answer in two short paragraphs.")
    k = rng.choice(whole)
    return (f"Summarise document {k} in five bullet points, then name the other document closest to it in topic "
            "and explain the connection in two sentences.")


def compose(i: int, tokens: int, pool: list[Document]) -> Prompt:
    """Prompt ``i``: about ``tokens`` tokens of numbered documents, then its task."""
    rng = random.Random(f"{NAME}:{i}")
    budget = tokens * CHARS_PER_TOKEN - 450  # the opening line and the request
    docs = _pick(pool, rng, budget)
    task = _task(i, docs, rng)
    parts = [f"Below are {len(docs)} documents, numbered 1 to {len(docs)}. Read all of them, then answer the "
             "request at the end, referring to documents by their numbers."]
    parts += [f"=== Document {n} ===\n{d.text}" for n, d in enumerate(docs, start=1)]
    parts.append(f"=== Request ===\n{task}")
    return Prompt(id=f"{CATEGORY}-{i:03d}", category=CATEGORY, text="\n\n".join(parts))


@lru_cache(maxsize=1)
def build() -> PromptSet:
    """The ``long-context`` set, composed from the built-in ``diverse`` set."""
    source = load_builtin(SOURCE_SET)
    pool = documents(source)
    prompts = tuple(compose(i, tokens, pool) for i, tokens in enumerate(target_tokens()))
    return PromptSet(name=NAME, sha256=content_sha256(prompts), prompts=prompts,
                     source=f"generated from {source.source} by locustfiles/longcontext.py")


def write_jsonl(path: str) -> None:
    """The set as a JSONL prompt file (ids and categories included, so it loads with the same sha256)."""
    with open(path, "w", encoding="utf-8") as fh:
        for p in build().prompts:
            fh.write(json.dumps({"id": p.id, "category": p.category, "prompt": p.text}, ensure_ascii=False) + "\n")


if __name__ == "__main__":  # pragma: no cover - a convenience for other tools
    if len(sys.argv) != 2:
        sys.exit("usage: python -m specbench.locustfiles.longcontext OUT.jsonl")
    write_jsonl(sys.argv[1])

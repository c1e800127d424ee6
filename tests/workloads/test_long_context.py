"""The built-in long-context set: 8k-32k-token prompts of real text in a category of their own, deterministic,
and served end to end by a real run against the emulator."""

from __future__ import annotations

import re
from itertools import pairwise

from specbench.contract.rundir import read_run
from specbench.locustfiles import longcontext
from specbench.locustfiles.prompts import available_sets, load_prompts
from tests.conftest import run_locust

# Pinned: the set is generated at load time from config/prompts/diverse.jsonl by locustfiles/longcontext.py.
# A change to either changes the prompts every long-context run sends; update this only on purpose.
SHA256 = "1410de94e3b1cd6cd5d39d68d7a658d675630c5f5eda1c9b4efa378dce988275"
_DOC = re.compile(r"=== Document (\d+) ===\n(.*?)(?=\n\n=== (?:Document \d+|Request) ===\n)", re.S)


def test_the_set_is_listed_loads_and_every_prompt_is_long_context_real_text():
    assert "long-context" in available_sets()
    lc = load_prompts("long-context")
    assert lc.name == "long-context" and len(lc) == 14 and lc.category_counts() == {"long_context": 14}
    assert len({p.id for p in lc.prompts}) == 14
    tokens = [len(p.text) / longcontext.CHARS_PER_TOKEN for p in lc.prompts]
    assert all(8_000 <= t <= 32_000 for t in tokens), tokens
    assert min(tokens) < 9_000 and max(tokens) > 31_000  # spread over the range
    assert all(b - a > 1_000 for a, b in pairwise(tokens))
    diverse = [p.as_text() for p in load_prompts("diverse").prompts]
    for p in lc.prompts:
        docs = _DOC.findall(p.text)
        assert len(docs) >= 20 and [int(n) for n, _ in docs] == list(range(1, len(docs) + 1))
        for _, body in docs:  # every document is the diverse set's own text (the last one may be cut)
            text = body.removesuffix(" [...]")
            assert any(text in source for source in diverse), text[:80]
        request = p.text.rsplit("=== Request ===\n", 1)[1]
        named = [int(n) for n in re.findall(r"documents? (\d+)", request)]
        assert all(1 <= n <= len(docs) and not docs[n - 1][1].endswith(" [...]") for n in named), request


def test_the_set_is_deterministic_and_its_exported_file_has_the_same_sha(tmp_path):
    assert load_prompts("long-context").sha256 == SHA256
    longcontext.build.cache_clear()
    again = longcontext.build()
    assert again.sha256 == SHA256
    path = tmp_path / "lc.jsonl"
    longcontext.write_jsonl(str(path))
    exported = load_prompts(str(path))
    assert exported.sha256 == SHA256 and [p.text for p in exported.prompts] == [p.text for p in again.prompts]


def test_a_long_context_run_against_the_emulator(tmp_path, emulator):
    emu = emulator("baseline", speed=20)
    out = tmp_path / "run"
    proc = run_locust(emu.url, out, "--prompts", "long-context", "--ladder", "1", "--max-tokens", "8",
                      "--min-requests", "6", "--min-step-time", "1", "--max-step-time", "60", "--step-ci", "0",
                      timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    run = read_run(out)
    assert run.meta.prompts["name"] == "long-context" and run.meta.prompts["sha256"] == SHA256
    ok = [r for r in run.records if r["status"] == "ok"]
    assert len(ok) >= 6 and all(r["category"] == "long_context" for r in ok)
    prompt_tokens = [r["prompt_tokens"] for r in ok]
    assert all(8_000 <= t <= 32_000 for t in prompt_tokens), prompt_tokens
    print(f"long-context prompt tokens on the emulator: {sorted(prompt_tokens)}")

"""Shared system prefixes: the emulator serves them from its prefix cache, and runs with them show a much
higher cached-token share than the same run without them."""

from __future__ import annotations

import pytest

from specbench.analysis.records.cacheshare import cached_share
from specbench.contract.lengths import LengthError, parse_shared_prefix
from specbench.contract.rundir import read_run
from specbench.emulator.prefixcache import PrefixCache
from tests.conftest import ledger, run_locust


def test_prefix_cache_serves_the_longest_shared_block_prefix():
    cache = PrefixCache(True)
    shared = "x" * 640
    assert cache.cached_tokens(shared + " first question", 200) == 0
    assert cache.cached_tokens(shared + " another question", 200) == 160  # ten 64-char blocks, 4 chars/token
    assert cache.cached_tokens(shared + " another question", 200) == 199  # an exact repeat: all but one token
    assert cache.cached_tokens("y" + shared, 200) == 0  # a prefix must be shared from the first character
    assert PrefixCache(False).cached_tokens(shared, 200) == 0


def test_shared_prefix_form_and_errors():
    assert parse_shared_prefix("4:512") == (4, 512) and parse_shared_prefix("") is None
    for bad in ("4", "0:512", "4:x"):
        with pytest.raises(LengthError, match="--shared-prefix: expected N:LEN"):
            parse_shared_prefix(bad)


@pytest.mark.parametrize("api", ["generate", "chat"])
def test_a_shared_prefix_run_shows_a_higher_cached_token_share(tmp_path, emulator, api):
    shares = {}
    for name, extra in (("plain", []), ("shared", ["--shared-prefix", "3:512"])):
        # slow enough that a run stays well inside the 230-prompt set (a repeated prompt is a cache hit too)
        emu = emulator("baseline", speed=5, extra=["--prefix-cache"])
        out = tmp_path / name
        proc = run_locust(emu.url, out, "--api", api, "--ladder", "2", "--max-tokens", "16", "--min-requests", "30",
                          "--min-step-time", "1", "--max-step-time", "30", "--step-ci", "0", *extra, timeout=120)
        assert proc.returncode == 0, proc.stderr[-3000:]
        run = read_run(out)
        truth = {e["rid"]: e for e in ledger(emu.url)}
        assert all(r["cached_tokens"] == truth[r["request_id"]]["cached_tokens"] for r in run.records)
        shares[name] = cached_share(run.records)
        if name == "shared":
            assert run.meta.settings.shared_prefix == "3:512"
            prompts = [r["prompt_tokens"] for r in run.records]
            assert min(prompts) > 512  # every request carries one of the ~512-token prefixes
            # only the first request of each of the 3 prefixes misses (twice on /generate, where a chat prompt's
            # transcript starts "System: " and a text prompt's does not); every other finds ~all of it cached
            cached = [r["cached_tokens"] for r in run.records]
            assert sum(c < 480 for c in cached) <= 6, cached
            assert len(cached) >= 30
    print(f"cached-token share on the emulator ({api}): {shares}")
    assert shares["plain"] < 0.05 and shares["shared"] > 0.5, shares

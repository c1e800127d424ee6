"""Shared system prefixes against a real llama-server: its prompt cache serves them (``timings.cache_n``).

One fresh tiny-target server (so no earlier test's prompts sit in its slots), two suite runs on it: the short
prompt set as it is, then the same with ``--shared-prefix 2:128``. llama.cpp keeps each slot's last prompt and
reuses the longest common prefix with the next one it gets (``cache_n`` of ``prompt_n + cache_n`` prompt
tokens), so the shared-prefix run must show a much larger share of cached prompt tokens.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from specbench.analysis.records.cacheshare import cached_share
from specbench.contract.rundir import read_run
from tests.conftest import run_locust

from .conftest import CTX_SIZE, N_PARALLEL, PROMPTS_SHORT
from .server import LlamaServer

pytestmark = pytest.mark.slow

LOAD_ARGS = ("--ladder", "2", "--max-tokens", "16", "--min-requests", "16", "--min-step-time", "1",
             "--max-step-time", "60", "--step-ci", "0", "--prompts", str(PROMPTS_SHORT))


def test_a_shared_prefix_run_shows_a_higher_cached_token_share_on_llama_server(
    tmp_path: Path, llama_server_bin: Path, gguf_models: dict[str, Path]
) -> None:
    shares = {}
    with LlamaServer(gguf_models["target"], n_parallel=N_PARALLEL, ctx_size=CTX_SIZE, threads=2,
                     binary=llama_server_bin, log_path=tmp_path / "server.log") as server:
        for name, extra in (("plain", ()), ("shared", ("--shared-prefix", "2:128"))):
            out = tmp_path / name
            proc = run_locust(server.url, out, *LOAD_ARGS, *extra, timeout=240)
            assert proc.returncode == 0, proc.stderr[-3000:]
            records = read_run(out).records
            assert all(r["status"] == "ok" and isinstance(r["cached_tokens"], int) for r in records)
            shares[name] = cached_share(records)
    print(f"cached-token share on llama-server: {shares}")
    assert shares["plain"] is not None and shares["shared"] is not None
    assert shares["shared"] > 0.4 and shares["shared"] > shares["plain"] + 0.3, shares

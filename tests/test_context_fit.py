"""Before any load, one line names the prompts that cannot fit the server's context with --max-tokens (#60).

Truth is the emulator's own context check (a vLLM vintage answers HTTP 400 exactly where prompt tokens plus
max_tokens exceed ``max_model_len``, as vLLM does): every prompt of the built-in set is sent to it once and the
prompts it refuses must be exactly the ones the check named. Near misses: a --max-tokens at which the longest
prompt just fits prints nothing; one token more names that prompt alone.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import requests

from specbench.contextfit import check_context_fit
from specbench.contract.rundir import read_run
from specbench.locustfiles.prompts import load_prompts
from specbench.locustfiles.serverinfo import identify
from tests.conftest import FAST_LADDER

CONTEXT = 1024


def _profile(tmp_path: Path, context: int = CONTEXT) -> str:
    path = tmp_path / f"context-{context}.yaml"
    path.write_text(f"base: baseline\ncontext_length: {context}\n")
    return str(path)


def _refused(url: str, model: str, prompt_messages: list[dict[str, str]], max_tokens: int) -> bool:
    """The emulator's answer to one streamed chat request: refused (400) or served (200), read from the status."""
    body = {"model": model, "messages": prompt_messages, "max_tokens": max_tokens, "stream": True}
    with requests.post(url + "/v1/chat/completions", json=body, stream=True, timeout=30) as resp:
        assert resp.status_code in (200, 400), resp.status_code
        return resp.status_code == 400


def test_named_prompts_are_exactly_the_ones_the_server_refuses(tmp_path: Path, emulator) -> None:
    emu = emulator(_profile(tmp_path), speed=1000, extra=["--vintage", "vllm-0.33"])
    identity = identify(emu.url)
    assert identity.kind == "vllm" and identity.context_tokens == CONTEXT
    prompts = load_prompts("diverse")
    fit = check_context_fit(identity, prompts, "chat", 512)
    assert fit is not None and fit.counted_by == "tokenizer"
    named = {pid for pid, _ in fit.too_long}
    refused = {p.id for p in prompts.prompts
               if _refused(emu.url, identity.model or "", list(p.as_messages()), 512)}
    assert named == refused and 0 < len(named) < len(prompts)



def test_near_misses_the_longest_prompt_just_fits_then_one_token_over(tmp_path: Path, emulator) -> None:
    """Where the longest prompt just fits, nothing is said; one token more names that prompt alone, and the server
    refuses it then and serves it before."""
    emu = emulator(_profile(tmp_path, 4096), speed=1000, extra=["--vintage", "vllm-0.33"])
    identity = identify(emu.url)
    prompts = load_prompts("diverse")
    counts = check_context_fit(identity, prompts, "chat", 4096)  # every prompt named, with its count
    assert counts is not None and len(counts.too_long) == len(prompts)
    (pid, longest), second = counts.too_long[0], counts.too_long[1]
    assert second[1] < longest
    edge = 4096 - longest
    silent = check_context_fit(identity, prompts, "chat", edge)
    assert silent is not None and silent.too_long == () and silent.line("server", "vllm") is None
    over = check_context_fit(identity, prompts, "chat", edge + 1)
    assert over is not None and over.too_long == ((pid, longest),)
    line = over.line("server", "vllm")
    assert line is not None and line.endswith(f"--max-tokens {edge} or less fits every prompt, or give --prompts "
                                              "without them"), line
    model = identity.model or ""
    assert not _refused(emu.url, model, list(_prompt(prompts, pid)), edge)
    assert _refused(emu.url, model, list(_prompt(prompts, pid)), edge + 1)


def _prompt(prompts, pid: str) -> tuple[dict[str, str], ...]:
    return next(p for p in prompts.prompts if p.id == pid).as_messages()


def test_run_names_them_before_the_load_and_the_records_fail_only_on_them(tmp_path: Path, emulator) -> None:
    emu = emulator(_profile(tmp_path), speed=1000, extra=["--vintage", "vllm-0.33"])
    out = tmp_path / "run"
    proc = subprocess.run(
        [sys.executable, "-m", "specbench.cli", "run", "--label", "fit", "--host", emu.url, "--ladder", "2",
         "--max-tokens", "512", "--min-requests", "60", "--max-error-rate", "1", "--exit-code-on-error", "0",
         "--out", str(out), *FAST_LADDER], capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    lines = proc.stdout.splitlines()
    (said,) = [line for line in lines if "cannot fit its context" in line]
    assert said.startswith(f"server: 12 of 230 prompts cannot fit its context of {CONTEXT} tokens with --max-tokens "
                           "512 (prompt tokens counted by the server's tokenizer)"), said
    assert "vLLM refuses each (HTTP 400)" in said and said.endswith("a prompt alone exceeds the context: give "
                                                                    "--prompts without them")
    # printed right after the server's own line, before the load starts (its lines follow on stderr)
    assert lines[lines.index(said) - 1].startswith(f"server: {emu.url} is vllm"), lines[:3]
    fit = check_context_fit(identify(emu.url), load_prompts("diverse"), "chat", 512)
    assert fit is not None
    named = {pid for pid, _ in fit.too_long}
    records = read_run(out).records
    failed = {r["prompt_id"] for r in records if r["status"] != "ok"}
    assert failed <= named and {r["prompt_id"] for r in records if r["status"] == "ok"}.isdisjoint(named)
    assert all(r["status"] == "http_error" for r in records if r["status"] != "ok")


@pytest.mark.parametrize(("vintage", "counted_by"), [("llamacpp-new", "tokenizer"), ("sglang-0.5.23", "estimate")])
def test_other_servers_count_with_their_tokenizer_or_say_it_is_an_estimate(tmp_path: Path, emulator, vintage: str,
                                                                           counted_by: str) -> None:
    emu = emulator(_profile(tmp_path), speed=1000, extra=["--vintage", vintage])
    identity = identify(emu.url)
    assert identity.context_tokens == CONTEXT
    fit = check_context_fit(identity, load_prompts("diverse"), "completions", 512)
    assert fit is not None and fit.counted_by == counted_by and fit.too_long
    line = fit.line("server", identity.kind)
    assert line is not None
    assert ("estimated at 4 characters a token" in line) is (counted_by == "estimate")
    assert ("llama.cpp stops an answer" in line) is (identity.kind == "llamacpp")


def test_no_stated_limit_no_line(tmp_path: Path) -> None:
    """A server that states no context (a generic OpenAI server) is not checked: None, not a guess."""
    from specbench.locustfiles.serverinfo import ServerIdentity

    identity = ServerIdentity("http://127.0.0.1:9", "openai", "m", None, None)
    assert check_context_fit(identity, load_prompts("diverse"), "chat", 512) is None
    assert json.dumps(identity.to_json())  # the new field travels in meta.json

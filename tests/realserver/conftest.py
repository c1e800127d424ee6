"""Session fixtures for the real llama-server tests: generated models, and servers that run for the session.

Two sets of servers: three on the tiny target (4 slots, 2 threads; wire format and exact counts) and three on
the 512x8 target (16 slots, 1 thread; the speed comparisons, see ``ladder_servers``).

Why skip locally but fail in CI: a developer without the ~11 min build should still get a green run of the
rest of the suite, while CI builds the binary first (tests/realserver/install.sh), so there a missing binary
or a missing ``gguf`` module is a broken setup that must not pass silently.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from .server import INSTALL_SCRIPT, LlamaServer, find_llama_server

IN_CI = os.environ.get("CI", "").strip().lower() == "true"

# Per-slot context = CTX_SIZE / N_PARALLEL = 2048 tokens, plenty for these tests.
N_PARALLEL = 4
CTX_SIZE = 8192
DRAFT_N_MAX = 8

# The comparison servers: 16 slots so the ladder's C=16 runs without queueing, 1024 tokens per slot (the
# short prompt set needs at most ~260 with the chat template, plus the output).
LADDER_TARGET = "target-512x8"
LADDER_SLOTS = 16
LADDER_CTX = LADDER_SLOTS * 1024
# The built-in "diverse" set holds prompts of up to 4,356 tokens (this vocabulary), more than these servers'
# per-slot context; the real-server runs use its prompts of at most 400 characters (144 of 230).
PROMPTS_SHORT = Path(__file__).resolve().parent / "prompts-short.jsonl"


def _unavailable(reason: str) -> None:
    """Skip, or fail under CI=true."""
    if IN_CI:
        pytest.fail(f"{reason} (CI=true, so this is a failure, not a skip)", pytrace=False)
    pytest.skip(reason)


@pytest.fixture(scope="session")
def llama_server_bin() -> Path:
    """The llama-server binary, or skip/fail naming the install script."""
    try:
        path = find_llama_server()
    except FileNotFoundError as exc:
        pytest.fail(str(exc), pytrace=False)
    if path is None:
        _unavailable(f"llama-server is not built: run {INSTALL_SCRIPT} (or set LLAMA_SERVER_BIN)")
    assert path is not None
    return path


@pytest.fixture(scope="session")
def gguf_models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The generated target and drafts (presets from make_gguf.py), written once per session."""
    try:
        import gguf  # noqa: F401
    except ImportError:
        _unavailable("the 'gguf' package is missing: pip install gguf==0.19.0 (dev extras)")
    from .make_gguf import PRESETS, make_model

    out = tmp_path_factory.mktemp("gguf")
    return {
        name: make_model(out / f"{name}.gguf", **PRESETS[name])
        for name in ("target", "draft-high", "draft-low", LADDER_TARGET)
    }


def _serve(binary: Path, log_dir: Path, name: str, model: Path, draft: Path | None) -> Iterator[LlamaServer]:
    server = LlamaServer(
        model,
        draft=draft,
        draft_n_max=DRAFT_N_MAX,
        n_parallel=N_PARALLEL,
        ctx_size=CTX_SIZE,
        threads=2,
        binary=binary,
        log_path=log_dir / f"{name}.log",
    )
    with server:
        yield server


@pytest.fixture(scope="session")
def server_logs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Where the servers' logs go (kept after the run for debugging)."""
    return tmp_path_factory.mktemp("llama-server-logs")


@pytest.fixture(scope="session")
def baseline_server(
    llama_server_bin: Path, gguf_models: dict[str, Path], server_logs: Path
) -> Iterator[LlamaServer]:
    """Target model only: no speculative decoding."""
    yield from _serve(llama_server_bin, server_logs, "baseline", gguf_models["target"], None)


@pytest.fixture(scope="session")
def spec_server(
    llama_server_bin: Path, gguf_models: dict[str, Path], server_logs: Path
) -> Iterator[LlamaServer]:
    """Target + high-agreement draft (acceptance near 1 at temperature 0)."""
    yield from _serve(
        llama_server_bin, server_logs, "spec-high", gguf_models["target"], gguf_models["draft-high"]
    )


@pytest.fixture(scope="session")
def spec_server_low(
    llama_server_bin: Path, gguf_models: dict[str, Path], server_logs: Path
) -> Iterator[LlamaServer]:
    """Target + low-agreement draft (acceptance well below the high-agreement one)."""
    yield from _serve(
        llama_server_bin, server_logs, "spec-low", gguf_models["target"], gguf_models["draft-low"]
    )


@pytest.fixture(scope="session")
def ladder_servers(
    llama_server_bin: Path, gguf_models: dict[str, Path], server_logs: Path
) -> Iterator[dict[str, LlamaServer]]:
    """"baseline", "spec-high" and "spec-low" on the 512x8 target, for speed comparisons.

    Why this target: on the tiny one, HTTP and sampling overhead per token hide the model's cost, so even a
    perfect draft does not win at C=1 (tests/realserver/README.md). On 512x8 the server's own decode rate at C=1
    is ~1.6x the baseline's with draft-high and ~0.4x with draft-low. Why 1 thread: with ``-t 2`` on a shared
    2-core machine, llama.cpp's threads spin-wait on each other whenever another process takes a core, and
    per-request decode rates varied 2x from request to request; with ``-t 1`` they stay within ~5 %.
    """
    with contextlib.ExitStack() as stack:
        servers: dict[str, LlamaServer] = {}
        for name, draft in (("baseline", None), ("spec-high", "draft-high"), ("spec-low", "draft-low")):
            server = LlamaServer(
                gguf_models[LADDER_TARGET],
                draft=gguf_models[draft] if draft else None,
                draft_n_max=DRAFT_N_MAX,
                n_parallel=LADDER_SLOTS,
                ctx_size=LADDER_CTX,
                threads=1,
                binary=llama_server_bin,
                log_path=server_logs / f"ladder-{name}.log",
            )
            servers[name] = stack.enter_context(server)
        yield servers


@pytest.fixture(scope="module")
def vllm_setup() -> tuple[Path, Path]:
    """The vLLM venv's python and the generated tiny model, or skip/fail naming install_vllm.sh."""
    from .vllm_server import INSTALL_VLLM_SCRIPT, tiny_model, vllm_python

    python = vllm_python()
    if python is None:
        _unavailable(f"vLLM (CPU) is not installed: run {INSTALL_VLLM_SCRIPT}")
    assert python is not None
    return python, tiny_model(python)

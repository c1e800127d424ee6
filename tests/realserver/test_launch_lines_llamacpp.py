"""docs/getting-started.md's llama.cpp launch lines, run as written against the suite (#55).

The lines are read from the page itself, so a page that changes them changes what runs here: every flag of the
baseline and draft lines is passed to the real llama-server (only the model files, the port, the loopback host,
the thread count and the web UI are this machine's), and a headless Locust run at the page's parallelism (its
``-np``) sends requests of more than 2,048 tokens each (prompt plus ``--max-tokens``: what a ``-np 16 -c 32768``
line, 2,048 tokens a slot, failed). Every request must succeed, all of them in flight at once, and the draft line
must actually draft (``timings.draft_n``; the pinned build loads a draft given without ``--spec-type`` and never
uses it). The EAGLE-3 line cannot run here (no EAGLE-3 GGUF): it must carry the draft line's flags, the drafter
and its type aside, so that it stays like-for-like.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from specbench.contract.rundir import read_run
from tests.conftest import run_locust

from .server import LlamaServer

pytestmark = pytest.mark.slow

PAGE = Path(__file__).resolve().parents[2] / "docs" / "getting-started.md"
INPUT_TOKENS = 1250  # the suite's --input-len, its estimate; this vocabulary makes ~1.9 tokens of each (2,250-2,600)
MAX_TOKENS = 48
OVER = 2048  # tokens a slot had with the old line (-np 16 -c 32768)


def page_lines() -> list[list[str]]:
    """Every ``llama-server`` command of the page's bash blocks, continuation lines joined, split as a shell would."""
    commands: list[list[str]] = []
    for block in re.findall(r"```bash\n(.*?)```", PAGE.read_text(encoding="utf-8"), re.S):
        joined = re.sub(r"\\\n\s*", " ", block)
        commands += [shlex.split(line) for line in joined.splitlines() if line.startswith("llama-server ")]
    return commands


def _flag(argv: list[str], name: str) -> str:
    return argv[argv.index(name) + 1]


def _the_line(kind: str) -> list[str]:
    """The page's one line of a kind: "baseline" (no draft), "draft" (``-md D.gguf``) or "eagle3" (another drafter)."""
    lines = page_lines()
    found = [a for a in lines if ("-md" not in a if kind == "baseline"
                                  else "-md" in a and (_flag(a, "-md") == "D.gguf") == (kind == "draft"))]
    assert len(found) == 1, (kind, lines)
    return found[0]


class PageServer(LlamaServer):
    """llama-server started with one of the page's lines: its flags, this machine's files, host and port."""

    def __init__(self, argv: list[str], files: dict[str, Path], *, binary: Path, log_path: Path) -> None:
        super().__init__(files["M.gguf"], binary=binary, log_path=log_path, startup_timeout=120)
        args = list(argv[1:])
        del args[args.index("--port"):args.index("--port") + 2]  # the page's port: a free one instead
        self.page_args = [str(files.get(a, a)) for a in args]

    def command(self) -> list[str]:
        return [str(self.binary), *self.page_args, "--host", self.host, "--port", str(self.port), "--no-webui",
                "-t", "2"]


def test_the_eagle3_line_is_the_draft_line_with_another_drafter() -> None:
    draft, eagle = _the_line("draft"), _the_line("eagle3")
    assert _flag(draft, "--spec-type") == "draft-simple"
    assert _flag(eagle, "--spec-type") == "draft-eagle3"
    swap = {"D.gguf": _flag(eagle, "-md"), "draft-simple": "draft-eagle3"}
    assert [swap.get(a, a) for a in draft] == eagle


@pytest.mark.parametrize("which", ["baseline", "draft"])
def test_the_pages_llama_server_lines_serve_long_requests_at_their_parallelism(
        tmp_path: Path, llama_server_bin: Path, gguf_models: dict[str, Path], which: str) -> None:
    argv = _the_line(which)
    slots = int(_flag(argv, "-np"))
    files = {"M.gguf": gguf_models["target"], "D.gguf": gguf_models["draft-high"]}
    server = PageServer(argv, files, binary=llama_server_bin, log_path=tmp_path / "server.log")
    with server:
        out = tmp_path / "run"
        # One prompt for all (a slot's second request reads it from its cache): the context is what is tested.
        proc = run_locust(server.url, out, "--api", "completions", "--ladder", str(slots), "--input-len",
                          f"fixed:{INPUT_TOKENS}", "--prompt-mode", "fixed", "--max-tokens", str(MAX_TOKENS),
                          "--min-requests", str(slots), "--min-step-time", "1", "--step-ci", "0",
                          "--max-step-time", "240", timeout=420)
    assert proc.returncode == 0, proc.stderr[-3000:] + server.log_tail()
    records = read_run(out).records
    assert len(records) >= slots
    for rec in records:
        assert rec["status"] == "ok", (rec["error"], server.log_tail())
        assert rec["output_tokens"] == MAX_TOKENS
        assert rec["prompt_tokens"] + rec["output_tokens"] > OVER, rec["prompt_tokens"]
        if which == "draft":
            assert rec["spec"] is not None and rec["spec"]["proposed_drafts"] > 0, "the draft line never drafted"
        else:
            assert rec["spec"] is None
    # All the page's slots busy at once: some moment had ``slots`` requests in flight.
    edges = sorted([(r["start_s"], 1) for r in records] + [(r["start_s"] + r["e2e_s"], -1) for r in records])
    in_flight = peak = 0
    for _, step in edges:
        in_flight += step
        peak = max(peak, in_flight)
    assert peak >= slots, peak

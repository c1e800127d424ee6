"""Output equivalence against a real llama-server pair: the suite's verdict equals a direct check.

``specbench compare`` (answers kept by default at temperature 0) runs a short ladder on the tiny target alone
and on the target with its high-agreement draft. The direct check, outside the load run, sends the prompts the
suite sent at the lowest level one at a time to both servers, with the body the suite itself builds
(``locustfiles.dialects``), and compares the answers' text (llama.cpp's OpenAI routes give no token ids).
At C=1 the suite's requests are one at a time too, so its answers and its changed set must be the direct
check's; and the verdict must not call the server lossy unless the direct check saw a changed answer.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from specbench.analysis import compare_runs, load_run
from specbench.analysis.verdicts.equivalence import run_answers
from specbench.locustfiles.dialects import Sampling, dialect
from specbench.locustfiles.prompts import load_prompts

from .client import stream
from .conftest import PROMPTS_SHORT
from .server import LlamaServer

pytestmark = pytest.mark.slow

MAX_TOKENS = 24
LOAD_ARGS = ("--ladder", "1,4", "--max-tokens", str(MAX_TOKENS), "--min-requests", "8", "--min-step-time", "1",
             "--step-ci", "0", "--max-step-time", "60", "--prompts", str(PROMPTS_SHORT), "--api", "chat",
             "--no-refine")  # the check reads C=1; a refinement level between 1 and 4 would only cost time


def _direct(url: str, prompt_id: str) -> str:
    """One request alone, with the suite's own body; the answer's text as streamed."""
    prompt = next(p for p in load_prompts(PROMPTS_SHORT).prompts if p.id == prompt_id)
    body = dialect("chat").body(prompt, Sampling(MAX_TOKENS, 0.0, True), model="tiny", server_kind="llamacpp",
                                rid=None)
    result = stream(url, "/v1/chat/completions", body)
    assert result.done, result.data[-3:]
    return "".join(result.contents())


def test_suite_verdict_equals_a_direct_check(tmp_path, baseline_server: LlamaServer, spec_server: LlamaServer):
    out = tmp_path / "cmp"
    proc = subprocess.run([sys.executable, "-m", "specbench.cli", "compare", "--baseline", baseline_server.url,
                           "--spec", spec_server.url, "--out", str(out), *LOAD_ARGS],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    base, spec = load_run(out / "baseline"), load_run(out / "spec")
    eq = compare_runs(base, spec).equivalence
    assert eq is not None and eq.checked and eq.unit == "character" and eq.lowest_c == 1
    ids = {r["prompt_seq"]: r["prompt_id"] for r in base.records if r["target_c"] == 1}
    b_ans, s_ans = run_answers(base)[1], run_answers(spec)[1]
    seqs = sorted(b_ans.keys() & s_ans.keys())
    # 8 measured per run, but only answers ended inside both runs' windows count: a loaded machine once left 6
    assert len(seqs) >= 4, seqs
    direct_changed = 0
    for seq in seqs:
        b_text, s_text = _direct(baseline_server.url, ids[seq]), _direct(spec_server.url, ids[seq])
        assert (b_ans[seq].text, s_ans[seq].text) == (b_text, s_text), f"prompt_seq {seq}: alone, as in the run"
        direct_changed += b_text != s_text
    c1 = eq.levels[0]
    assert (c1.target_c, c1.spec_vs_baseline.compared, c1.spec_vs_baseline.changed) == (1, len(seqs), direct_changed)
    if direct_changed == 0:
        assert eq.kind in ("lossless", "within_noise"), eq.text
    summary = json.loads((out / "comparison.json").read_text())["equivalence"]
    assert summary["kind"] == eq.kind and f"Output equivalence: {eq.text}" in proc.stdout

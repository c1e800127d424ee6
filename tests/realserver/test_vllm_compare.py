"""``specbench compare`` against a real vLLM pair (CPU build): a baseline and the same tiny model with n-gram
speculation, run as a user would, on a short ladder (#60).

What it checks against vLLM itself: both servers are named as vLLM with the right speculation (the n-gram server
shows it through its ``vllm:spec_decode_*`` metrics); every record counts vLLM's usage; the spec side carries
vLLM's per-request speculative block; and the output-equivalence check reads vLLM's token ids
(``return_token_ids``: compared by token, not by character) and finds no changed answer at C=1, where the suite's
requests go one at a time: n-gram verification keeps the target's own greedy tokens, so at temperature 0 the
answers of the two servers must be the same. The two servers run side by side (about 3 GB each).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from specbench.analysis import compare_runs, load_run

from .client import chat_payload, stream
from .conftest import PROMPTS_SHORT
from .vllm_server import NGRAM_SPEC, VllmServer

pytestmark = pytest.mark.slow

MAX_TOKENS = 32
# --no-refine: the test reads the two-level ladder. Where the C=4 ratio lands on the other side of 1 from C=1 (the
# CPU build is noisy beside a neighbour), compare rightly measures a refinement level between them (C=2).
LOAD_ARGS = ("--ladder", "1,4", "--max-tokens", str(MAX_TOKENS), "--min-requests", "8", "--min-step-time", "1",
             "--step-ci", "0", "--max-step-time", "60", "--prompts", str(PROMPTS_SHORT), "--api", "chat",
             "--no-refine")


def test_compare_reads_a_vllm_pair_and_finds_ngram_lossless(vllm_setup: tuple[Path, Path], tmp_path: Path) -> None:
    python, model = vllm_setup
    with (VllmServer(python, model, log_path=tmp_path / "baseline.log") as base,
          VllmServer(python, model, speculative=NGRAM_SPEC, log_path=tmp_path / "ngram.log") as spec):
        for server in (base, spec):  # the first request of a fresh server is slow
            assert stream(server.url, "/v1/chat/completions", chat_payload("Hello", 8)).status == 200
        out = tmp_path / "cmp"
        proc = subprocess.run([sys.executable, "-m", "specbench.cli", "compare", "--baseline", base.url,
                               "--spec", spec.url, "--out", str(out), *LOAD_ARGS],
                              capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert f"baseline: {base.url} is vllm, model tiny, no speculation" in proc.stdout, proc.stdout[:1000]
    assert f"spec: {spec.url} is vllm, model tiny, speculative" in proc.stdout, proc.stdout[:1000]

    baseline, speculative = load_run(out / "baseline"), load_run(out / "spec")
    for run, has_spec in ((baseline, False), (speculative, True)):
        assert run.records and all(r["status"] == "ok" for r in run.records)
        assert all(r["output_tokens"] == MAX_TOKENS and r["output_tokens_source"] == "usage" for r in run.records)
        assert all((r["spec"] is not None) is has_spec for r in run.records)
    comparison = compare_runs(baseline, speculative)
    assert [level.target_c for level in comparison.levels] == [1, 4]
    eq = comparison.equivalence
    assert eq is not None and eq.checked and eq.unit == "token" and eq.lowest_c == 1, eq
    c1 = eq.levels[0]
    assert c1.target_c == 1 and c1.spec_vs_baseline.compared >= 8 and c1.spec_vs_baseline.changed == 0, c1
    assert eq.kind in ("lossless", "within_noise"), eq.text
    written = json.loads((out / "comparison.json").read_text())
    assert written["equivalence"]["kind"] == eq.kind and [lv["target_c"] for lv in written["levels"]] == [1, 4]
    print(f"vLLM pair: equivalence {eq.kind} ({eq.text}); ratios "
          + ", ".join(f"C={lv['target_c']} {lv['ratio']:.2f}x" for lv in written["levels"]))

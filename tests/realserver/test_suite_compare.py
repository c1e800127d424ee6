"""``specbench compare`` end to end against real llama-servers: a complete report, pointing the right way.

The baseline and two speculative servers run the 512x8 target (``ladder_servers``): one with a draft that
agrees with the target at every position (draft-high), one that rarely does (draft-low). Nothing here expects
a number written in advance; the report's direction is checked against the servers' own decode timings:

* premise: the decode rate each server reports (``timings.predicted_n / predicted_ms``) for requests sent one
  at a time with the stdlib client, in rounds that send one prompt to each server in turn, so that whatever
  else loads the machine weighs on all of them alike; the ratio of two servers is the median over the rounds
  of the ratio within a round (same prompt, seconds apart). draft-high must decode faster than the baseline
  and draft-low slower; if not, the fixture changed, not the suite. Judged only where the baseline's own
  rounds agree within 1.2x: beside a busy neighbour one request at a time shows the machine, not the servers;
* the check: while ``specbench compare`` runs, both servers' ``/metrics`` are sampled, and the C=1 step's
  window of each run gets the server's own decode rate, Δ``tokens_predicted_total`` /
  Δ``tokens_predicted_seconds_total`` (the same ``predicted_n`` and ``predicted_ms``, summed over the requests
  that ended in the window). The report's C=1 ratio must lie on the same side of 1 as the ratio of those two
  rates. Both figures come from the same seconds, so a burst of load from other work on a shared 2-core
  machine moves both alike instead of flipping one of them. Where the servers' window rates are too close to
  name a side (a machine so loaded that it squeezes them together), the compare runs once more, and if they are
  still too close the direction is skipped with the figures, not guessed.
"""

from __future__ import annotations

import json
import math
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from specbench.contract.rundir import read_run
from specbench.locustfiles.prompts import load_prompts

from .client import chat_payload, metrics, stream
from .conftest import DRAFT_N_MAX, LADDER_SLOTS, PROMPTS_SHORT
from .server import LlamaServer

pytestmark = pytest.mark.slow

# Two levels: the direction is judged at C=1 and the report needs a curve; C=2 and C=8 proved nothing more
# (no assertion names a level above 1) and took about 40% of each comparison's time.
LADDER = (1, 4)
MAX_TOKENS = 64
LOAD_ARGS = ("--ladder", ",".join(map(str, LADDER)), "--max-tokens", str(MAX_TOKENS), "--min-requests", "8",
             "--min-step-time", "2", "--step-ci", "0", "--max-step-time", "60", "--prompts", str(PROMPTS_SHORT))
# Rounds of one request per server (the premise in the module docstring). A CI run whose per-server medians
# came out 0.87x, where the rounds' own ratios were 0.61x, 0.87x and 0.49x, is why the ratio is paired by round.
CAPTURE_ROUNDS = 5
CAPTURE_TOKENS = 128
# A decode-rate ratio must be at least this far from 1 for "the side of 1" to mean something.
CLEAR_MARGIN = 1.2
WINDOW_MARGIN = 1.1
COMPARE_ATTEMPTS = 2
SAMPLE_INTERVAL_S = 0.25
PREDICTED = "llamacpp:tokens_predicted_total"
PREDICTED_SECONDS = "llamacpp:tokens_predicted_seconds_total"
REPORT_FILES = ("report.md", "comparison.json", "comparison.csv", "comparison.txt", "throughput_vs_c.png",
                "ratio_vs_c.png", "latency_vs_c.png", "categories.png")
# Warnings that would mean the comparison itself is broken (the two runs differ, a request failed, a role is
# misread, a step lost its window). Statistical ones (no_interval) are expected on so short a run.
BROKEN = {"settings_mismatch", "spec_not_speculative", "baseline_speculative", "spec_max_running_lower",
          "error_rate", "few_requests", "partial_run", "no_window", "missing_meta", "chunk_counted_tokens",
          "unmatched_level"}


@pytest.fixture(scope="module")
def decode_rates(ladder_servers: dict[str, LlamaServer]) -> dict[str, list[float]]:
    """Per server, the decode rates (tok/s) its own timings report for requests sent one at a time."""
    prompts = [p for p in load_prompts(PROMPTS_SHORT).prompts if not p.is_chat][:CAPTURE_ROUNDS]
    rates: dict[str, list[float]] = {name: [] for name in ladder_servers}
    for prompt in prompts:
        for name, server in ladder_servers.items():
            result = stream(server.url, "/v1/chat/completions", chat_payload(prompt.as_text(), CAPTURE_TOKENS))
            timings = result.timings
            assert result.done and timings is not None, result.data[-3:]
            assert timings["predicted_n"] == CAPTURE_TOKENS
            rates[name].append(timings["predicted_n"] / timings["predicted_ms"] * 1000.0)
    return rates


def paired_ratio(rates: dict[str, list[float]], name: str, reference: str) -> float:
    """The median over the capture rounds of ``name``'s decode rate over ``reference``'s in the same round."""
    return statistics.median(a / b for a, b in zip(rates[name], rates[reference], strict=True))


class MetricsSampler:
    """Samples (time, tokens predicted, decode seconds) from servers' /metrics in a thread, until stopped."""

    def __init__(self, servers: dict[str, LlamaServer]) -> None:
        self.servers = servers
        self.samples: dict[str, list[tuple[float, float, float]]] = {name: [] for name in servers}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(SAMPLE_INTERVAL_S):  # ends when stopped: the caller's run is bounded
            for name, server in self.servers.items():
                t0 = time.time()
                values = metrics(server.url)
                self.samples[name].append(((t0 + time.time()) / 2, values[PREDICTED], values[PREDICTED_SECONDS]))

    def __enter__(self) -> MetricsSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=30)

    def decode_rate(self, name: str, start_s: float, end_s: float) -> float:
        """The server's decode tok/s over the requests that ended between the first and last sample inside."""
        inside = [s for s in self.samples[name] if start_s <= s[0] <= end_s]
        assert len(inside) >= 2, f"{name}: fewer than 2 /metrics samples in [{start_s}, {end_s}]"
        (_, tok0, sec0), (_, tok1, sec1) = inside[0], inside[-1]
        assert tok1 > tok0 and sec1 > sec0, f"{name}: no request ended inside the window"
        return (tok1 - tok0) / (sec1 - sec0)


def _compare(base: LlamaServer, spec: LlamaServer, out: Path) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "specbench.cli", "compare", "--baseline", base.url, "--spec", spec.url,
           "--out", str(out), "--no-refine", *LOAD_ARGS]
    # --no-refine: the test judges the C=1 direction on the two-level ladder. Beside a busy neighbour the C=4
    # ratio can land on the other side of 1, and compare then rightly measures a refinement level between them
    # (C=2), which this test does not examine (a fresh-clone CI run beside two others met exactly that).
    return subprocess.run(cmd, capture_output=True, text=True, timeout=300, cwd=out.parent)


def _c1_window(run_dir: Path) -> tuple[float, float]:
    step = next(s for s in read_run(run_dir).steps if s["target_c"] == 1)
    assert step["steady_start_s"] is not None
    return step["steady_start_s"], step["end_s"]


def _check_run(run_dir: Path, server: LlamaServer, speculative: bool) -> list[dict[str, Any]]:
    run = read_run(run_dir)
    assert not run.meta.partial and run.meta.api == "chat"  # --api auto on llama.cpp
    server_block = run.meta.server
    assert server_block["kind"] == "llamacpp" and server_block["url"] == server.url
    assert server_block["model"] == str(server.model)  # llama-server names the model by its path
    assert server_block["max_running_requests"] == LADDER_SLOTS
    assert bool(server_block["speculative"]) is speculative
    assert [s["target_c"] for s in run.steps] == list(LADDER)
    failed = [(r["status"], r["error"]) for r in run.records if r["status"] != "ok"]
    assert not failed, f"{len(failed)} of {len(run.records)} requests failed, e.g. {failed[:3]}"
    assert all(r["output_tokens"] == MAX_TOKENS and r["output_tokens_source"] == "usage" for r in run.records)
    assert all((r["spec"] is not None) is speculative for r in run.records)
    return run.records


@pytest.mark.parametrize("draft", ["high", "low"])
def test_compare_report_points_the_way_the_servers_timings_do(
    tmp_path: Path, ladder_servers: dict[str, LlamaServer], decode_rates: dict[str, list[float]], draft: str
) -> None:
    base, spec = ladder_servers["baseline"], ladder_servers[f"spec-{draft}"]
    assert spec.draft_n_max == DRAFT_N_MAX
    server_ratio = paired_ratio(decode_rates, f"spec-{draft}", "baseline")
    # The fixture's premise, from the servers' own timings: draft-high decodes faster, draft-low slower. It is
    # judged only where the machine was measured calm enough: the same baseline, one request at a time, decoding
    # within CLEAR_MARGIN across the rounds. Otherwise the one-at-a-time figures are no evidence either way.
    expected_side = 1 if draft == "high" else -1
    baseline_spread = max(decode_rates["baseline"]) / min(decode_rates["baseline"])
    if baseline_spread <= CLEAR_MARGIN:
        assert expected_side * math.log(server_ratio) >= math.log(CLEAR_MARGIN), (server_ratio, decode_rates)
    else:
        print(f"draft-{draft}: premise not judged: one at a time {server_ratio:.2f}x, but the baseline's own rates "
              f"were {baseline_spread:.2f}x apart across the rounds (a busy machine)")

    # The direction can only be judged when the servers' own decode rates in the C=1 windows are clearly apart. A
    # busy neighbour can squeeze them together (1.07x in one CI run beside two others, where the rates one at a
    # time were 2.5x apart): such a compare is run once more, and if it is still unclear the direction is not
    # judged (skipped, with the figures), after every other check has run on it.
    # The two C=1 windows are measured a minute apart, so a machine whose speed drifts over time moves their ratio by
    # as much as it moved the same baseline's rounds: a window ratio inside that spread tells no side (1.10x once,
    # beside two other CI runs, with the baseline's rounds 2.51x apart and the report at 0.85x).
    margin = max(WINDOW_MARGIN, baseline_spread)
    for attempt in range(COMPARE_ATTEMPTS):
        out = tmp_path / f"report{attempt}"
        with MetricsSampler({"baseline": base, "spec": spec}) as sampler:
            proc = _compare(base, spec, out)
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
        window_ratio = (sampler.decode_rate("spec", *_c1_window(out / "spec"))
                        / sampler.decode_rate("baseline", *_c1_window(out / "baseline")))
        if abs(math.log(window_ratio)) >= math.log(margin):
            break
    assert f"is llamacpp, model {base.model}, no speculation, max_running_requests={LADDER_SLOTS}" in proc.stdout
    for name in REPORT_FILES:
        path = out / name
        assert path.is_file() and path.stat().st_size > 0, name
        if name.endswith(".png"):
            assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", name

    base_records = _check_run(out / "baseline", base, speculative=False)
    spec_records = _check_run(out / "spec", spec, speculative=True)
    assert len(base_records) >= 8 * len(LADDER) and len(spec_records) >= 8 * len(LADDER)
    proposed = sum(r["spec"]["proposed_drafts"] for r in spec_records)
    accepted = sum(r["spec"]["accepted_drafts"] for r in spec_records)
    assert (accepted / proposed >= 0.9) if draft == "high" else (accepted / proposed <= 0.4), (accepted, proposed)

    comparison = json.loads((out / "comparison.json").read_text())
    levels = {level["target_c"]: level for level in comparison["levels"]}
    assert sorted(levels) == list(LADDER)
    for level in levels.values():
        assert level["spec_tok_s"] > 0 and level["baseline_tok_s"] > 0
        assert level["ratio"] == pytest.approx(level["spec_tok_s"] / level["baseline_tok_s"], rel=1e-9)
    broken = [w for w in comparison["warnings"] if w["code"] in BROKEN]
    assert not broken, broken

    # The direction: the report's C=1 ratio is on the side of 1 where the servers' own decode rates, in the
    # same C=1 windows, put it.
    if abs(math.log(window_ratio)) < math.log(margin):
        pytest.skip(f"in {COMPARE_ATTEMPTS} compares the servers' own decode rates in the C=1 windows were too close "
                    f"(last {window_ratio:.2f}x, needed {margin:.2f}x: the baseline's rounds were "
                    f"{baseline_spread:.2f}x apart; one at a time {server_ratio:.2f}x) to tell a side: this machine "
                    "is too loaded to judge the direction")
    ratio_c1 = levels[1]["ratio"]
    server_side = math.copysign(1, math.log(window_ratio))
    assert math.copysign(1, math.log(ratio_c1)) == server_side, (ratio_c1, window_ratio, server_ratio)
    verdict = comparison["verdict"]
    print(f"draft-{draft}: spec/baseline decode rate one at a time {server_ratio:.2f}x (baseline rounds "
          f"{baseline_spread:.2f}x apart), in the C=1 windows "
          f"{window_ratio:.2f}x; report: C=1 ratio {ratio_c1:.2f}x, verdict {verdict['kind']}")
    assert verdict["kind"] != ("baseline_wins_all" if server_side > 0 else "spec_wins_all"), verdict

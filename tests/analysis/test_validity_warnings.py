"""Every validity warning fires when its condition is created on purpose, and only then."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pytest
from synthetic_runs import Level, Prompt, RunSpec, small_pair, write_run

from specbench.analysis.records.checks import WARNING_CODES
from specbench.analysis.records.load import load_run
from specbench.analysis.records.summary import RunSummary, summarize_run
from specbench.analysis.reporting.render import render_comparison
from specbench.analysis.reporting.report import render_report
from specbench.analysis.reporting.serialize import comparison_json
from specbench.analysis.verdicts.compare import Comparison, compare_runs
from specbench.analysis.verdicts.pair_checks import pair_warnings

Mutation = Callable[[RunSpec, RunSpec], None]


def _compare(tmp_path: Path, mutate: Mutation | None = None) -> Comparison:
    base, spec = small_pair()
    if mutate:
        mutate(base, spec)
    return compare_runs(load_run(write_run(tmp_path / "base", base)), load_run(write_run(tmp_path / "spec", spec)),
                        n_boot=200)


def _set(**changes: object) -> Mutation:
    def mutate(_base: RunSpec, spec: RunSpec) -> None:
        for key, value in changes.items():
            setattr(spec, key, value)
    return mutate


def _level(index: int, **changes: object) -> Mutation:
    def mutate(_base: RunSpec, spec: RunSpec) -> None:
        for key, value in changes.items():
            setattr(spec.levels[index], key, value)
    return mutate


def _killed(_base: RunSpec, spec: RunSpec) -> None:
    spec.levels[-1].write_step = False
    spec.partial = True


def _killed_in_warmup(_base: RunSpec, spec: RunSpec) -> None:
    spec.levels.append(Level(8, 500.0, tokens=16, window_requests=0, write_step=False))
    spec.partial = True


def _base_speculative(base: RunSpec, _spec: RunSpec) -> None:
    base.speculative = "EAGLE3"


def _short_windows(base: RunSpec, spec: RunSpec) -> None:
    # Three request lifetimes, each request one chunk: too few arrivals for batch means, too few lifetimes
    # for the fallback's five batches.
    for run in (base, spec):
        run.levels[0].window_requests = 3
        run.levels[0].tokens_per_chunk = run.levels[0].tokens


def _fewer_levels(_base: RunSpec, spec: RunSpec) -> None:
    spec.levels = spec.levels[:2]


def _refused(recs: list[dict]) -> list[dict]:
    """Every fifth request of C=2 refused at once (503), as a queue-limited server answers (#55)."""
    step = sorted({r["step"] for r in recs})[1]
    mine = [i for i, r in enumerate(recs) if r["step"] == step]
    out = list(recs)
    for i in mine[::5]:
        out[i] = {**recs[i], "status": "refused", "http_status": 503, "error": "HTTP 503", "ttft_s": None,
                  "e2e_s": 0.001, "chunk_ms": [], "chunk_tokens": [], "output_tokens": 0, "spec": None,
                  "finish_reason": None, "backoff_s": 0.1}
    return out


CASES: dict[str, tuple[Mutation, str]] = {
    "low_concurrency": (_level(2, users=3), "C=4: achieved concurrency 3.0 is 75%"),
    "few_requests": (_level(0, window_requests=5), "C=1: "),
    # a window one request long: every request in it started before it or ends after it (#61)
    "no_finished_requests": (_level(0, window_requests=1), "C=1: no request started and finished inside"),
    "single_prompt": (_set(prompts=[Prompt("only", "qa", accept_length=2.0)]), "'only'"),
    "chunk_counted_tokens": (_set(output_tokens_source="chunks"), "from stream chunks"),
    "error_rate": (_level(1, error_every=10), "C=2: error rate"),
    "settings_mismatch": (_set(max_tokens=256), "max_tokens differs"),
    "spec_not_speculative": (_set(speculative=None), "no speculative algorithm"),
    "baseline_speculative": (_base_speculative, "reports speculative decoding"),
    "spec_max_running_lower": (_set(max_running_requests=48), "at most 48 requests"),
    "partial_run": (_killed, "killed during this step"),
    "no_window": (_killed_in_warmup, "C=8: no measured window"),
    "missing_meta": (_set(write_meta=False), "no meta.json"),
    "unmatched_level": (_fewer_levels, "C=4 was measured in baseline only"),
    "no_interval": (_short_windows, "no 95% interval"),
    "prompt_cache_mismatch": (_set(cached_tokens=90), "served from cache: 0% on baseline, 90% on"),
    "cache_witnesses_disagree": (_set(cached_tokens=90, server_cached_share=0.3),
                                 "90% by the requests' counts, 30% by the server's own"),
    "server_token_gap": (_set(server_counter_factor=1.05), "differ by +5.0% over the same seconds"),
    "client_bound": (_set(client_busy=0.97), "used 97% of a core"),
    "client_lag": (_set(send_lag_ms=500.0), "send lag p90 500 ms"),
    "client_read_lag": (_level(1, step_extra={"read_lag_p90_ms": {"local": 35.0}}),
                        "C=2: a load process's event loop served ready streams 35 ms late (p90"),
    "client_paused": (_level(1, step_extra={"paused_s": 9.0, "flags": ["client_paused"]}),
                      "C=2: the load process stood still for 9.0 s"),
    "dropped_requests": (_level(1, step_extra={"dropped": 7}), "C=2: 7 request(s) fell due while all"),
    "low_rate": (_level(0, step_extra={"target_rate": 1000.0}), "rate=1000/s: requests were sent at"),
    "duplicate_records": (_set(edit_records=lambda recs: [*recs, *recs[:4]]), "4 record line(s) repeat a request_id"),
    "impossible_records": (_set(edit_records=lambda recs: [{**recs[0], "e2e_s": -1.0}, *recs[1:]]),
                           "1 record(s) left out of every figure because no request can have them: 1 with a "
                           "negative time"),
    "gpu_readings_rejected": (_set(gpu_power_w=-300.0), "GPU reading(s) left out of the energy figures"),
    "gpu_energy_mismatch": (_set(gpu_power_w=300.0, gpu_counter_factor=3.0),
                            "energy counter (900 W mean) and power gauge (300 W mean) disagree by more than 2x"),
    # a running gauge at 0.4x the requests truly running, the token counter exact (vLLM 0.32's draft model, #60)
    "server_gauge_stale": (_set(server_counter_factor=1.0, running_gauge_factor=0.4),
                           "C=4: the server's running + waiting gauges averaged"),
    # 2.5 tokens a pass from a server that drafts one token a pass (at most 2)
    "refused_work": (_set(edit_records=_refused), "C=2: the server refused 20.6% of the offered work (7 of 34"),
    # every request asked for 1024 tokens where meta.json says 512 (#70)
    "meta_contradicted": (_set(edit_records=lambda recs: [{**r, "max_tokens": 1024} for r in recs]),
                          "meta.json says max_tokens 512, but the requests in records.jsonl asked for 1024"),
    "impossible_accept_length": (_set(speculative={"algorithm": "EAGLE3", "num_steps": 1}),
                                 "above the most a pass can yield, 2 (1 draft per pass (speculative_num_steps) + 1)"),
}


def test_a_server_counter_that_agrees_raises_no_gap(tmp_path: Path) -> None:
    comparison = _compare(tmp_path, _set(server_counter_factor=1.0, client_busy=0.5, send_lag_ms=2.0))
    assert not [w for w in comparison.warnings if w.code in ("server_token_gap", "client_bound", "client_lag")]
    rows = [r for r in comparison.spec.rows if r.window_s]
    assert rows and all(r.server_token_gap == 0 and r.server_samples > 0 for r in rows)


def test_every_warning_code_has_a_case() -> None:
    assert set(CASES) == set(WARNING_CODES)


@pytest.mark.parametrize("code", sorted(CASES))
def test_warning_fires_when_its_condition_is_created(tmp_path: Path, code: str) -> None:
    mutate, phrase = CASES[code]
    comparison = _compare(tmp_path, mutate)
    hits = [w for w in comparison.warnings if w.code == code]
    assert hits, f"{code} did not fire; got {[w.code for w in comparison.warnings]}"
    assert any(phrase in w.message for w in hits), [w.message for w in hits]


def test_a_clean_pair_raises_no_warning(tmp_path: Path) -> None:
    comparison = _compare(tmp_path)
    assert comparison.warnings == ()
    assert comparison.verdict.kind == "baseline_wins_all"


@pytest.mark.parametrize("field, value, name", [
    ("prompts_sha256", "f" * 64, "prompt set (sha256)"),
    ("prompt_mode", "fixed", "prompt order (mode)"),
    ("api", "chat", "API"),
    ("ignore_eos", False, "ignore_eos"),
])
def test_each_compared_setting_is_named_when_it_differs(tmp_path: Path, field: str, value: object,
                                                        name: str) -> None:
    comparison = _compare(tmp_path, _set(**{field: value}))
    messages = [w.message for w in comparison.warnings if w.code == "settings_mismatch"]
    assert any(m.startswith(f"{name} differs") for m in messages), messages


@pytest.mark.parametrize("settings, name", [
    ({"slo": "ttft=2s"}, "SLO"),
    ({"rate_ladder": [1.0, 2.0], "arrivals": "poisson"}, "rate ladder"),
    ({"multi_turn": 3}, "turns per conversation"),
])
def test_workload_settings_that_differ_are_named(tmp_path: Path, settings: dict, name: str) -> None:
    def mutate(base: RunSpec, spec: RunSpec) -> None:
        base.settings = {"slo": "ttft=1s", "rate_ladder": [1.0, 4.0], "arrivals": "poisson", "multi_turn": 1}
        spec.settings = {**base.settings, **settings}
    comparison = _compare(tmp_path, mutate)
    messages = [w.message for w in comparison.warnings if w.code == "settings_mismatch"]
    assert any(m.startswith(f"{name} differs") and "not like for like" in m for m in messages), messages


def test_a_torn_last_line_is_reported_as_partial(tmp_path: Path) -> None:
    comparison = _compare(tmp_path, _set(torn_tail=True))
    assert any(w.code == "partial_run" and "torn line" in w.message for w in comparison.warnings)


def test_warnings_reach_the_terminal_the_report_and_the_json(tmp_path: Path) -> None:
    def many(base: RunSpec, spec: RunSpec) -> None:
        _level(1, error_every=10)(base, spec)
        _set(max_running_requests=48, output_tokens_source="chunks")(base, spec)

    comparison = _compare(tmp_path, many)
    codes = {w.code for w in comparison.warnings}
    assert {"error_rate", "spec_max_running_lower", "chunk_counted_tokens"} <= codes
    text, report = render_comparison(comparison), render_report(comparison)
    as_json = json.loads(json.dumps(comparison_json(comparison)))
    for w in comparison.warnings:
        assert f"[{w.code}] {w.message}" in text
        assert f"`{w.code}`: {w.message}" in report
    assert [w["code"] for w in as_json["warnings"]] == [w.code for w in comparison.warnings]
    assert "error_rate" in next(lv for lv in as_json["levels"] if lv["target_c"] == 2)["flags"]


@pytest.mark.parametrize(("base_samples", "fires"), [(1, True), (2, True), (3, False), (12, False)])
def test_a_baseline_queue_excuses_the_spec_cap_only_on_enough_gauge_samples(
        tmp_path: Path, base_samples: int, fires: bool) -> None:
    # The spec side ran at most 2 of C=4 and queued 2; the baseline's window "queued 1.5" too. On three samples or
    # more that is the baseline queueing as well (no warning); on one or two it can be a gauge from the step before.
    base, spec = small_pair()
    base.server_counter_factor = spec.server_counter_factor = 1.0
    base_run = summarize_run(load_run(write_run(tmp_path / "base", base)))
    spec_run = summarize_run(load_run(write_run(tmp_path / "spec", spec)))

    def at_4(run: RunSummary, **figures: float | int) -> RunSummary:
        return replace(run, rows=[replace(r, **figures) if r.target_c == 4 else r for r in run.rows])

    spec_run = at_4(spec_run, server_queued=2.0, server_running_max=2.0, server_samples=12)
    base_run = at_4(base_run, server_queued=1.5, server_samples=base_samples)
    found = [w.code for w in pair_warnings(base_run, spec_run)]
    assert ("spec_max_running_lower" in found) is fires, found


@pytest.mark.parametrize(("spec_samples", "fires"), [(1, False), (2, False), (3, True)])
def test_a_spec_queue_counts_only_on_enough_gauge_samples(tmp_path: Path, spec_samples: int, fires: bool) -> None:
    # One or two samples saying "queued" can be a request that arrived mid-step (a run compared with itself
    # warned so); the baseline here has no queue figure to excuse anything.
    base, spec = small_pair()
    base.server_counter_factor = spec.server_counter_factor = 1.0
    base_run = summarize_run(load_run(write_run(tmp_path / "base", base)))
    spec_run = summarize_run(load_run(write_run(tmp_path / "spec", spec)))
    spec_run = replace(spec_run, rows=[replace(r, server_queued=2.0, server_running_max=2.0,
                                               server_samples=spec_samples) if r.target_c == 4 else r
                                       for r in spec_run.rows])
    base_run = replace(base_run, rows=[replace(r, server_queued=None, server_samples=0) for r in base_run.rows])
    found = [w.code for w in pair_warnings(base_run, spec_run)]
    assert ("spec_max_running_lower" in found) is fires, found


@pytest.mark.parametrize("busy", [0.99, 0.5])
def test_a_step_without_a_window_still_says_its_load_process_ran_hot(tmp_path: Path, busy: float) -> None:
    """A saturated load process's step can end with no window: the reason (client_bound) must reach the summary,
    the report and comparison.json beside no_window; at half a core it must stay silent."""
    base, spec = small_pair()
    spec.levels[-1].step_extra = {"steady_start_s": None, "flags": ["no_window", "client_bound"]}
    spec.client_busy = busy
    comparison = compare_runs(load_run(write_run(tmp_path / "base", base)),
                              load_run(write_run(tmp_path / "spec", spec)), n_boot=200)
    last = comparison.spec.rows[-1]
    assert last.window_s is None and "no_window" in last.flags
    said = busy > 0.9
    assert ("client_bound" in last.flags) is said
    assert any(w.code == "client_bound" and f"C={last.target_c}" in w.message
               for w in comparison.warnings) is said
    assert ("used 99% of a core" in render_report(comparison)) is said
    step = json.loads(json.dumps(comparison_json(comparison)))["spec"]["steps"][-1]
    assert step["target_c"] == last.target_c and "no_window" in step["flags"]
    assert ("client_bound" in step["flags"]) is said


def test_a_level_without_a_finished_request_says_what_its_ratio_rests_on(tmp_path: Path) -> None:
    # #61: a verdict came from a level where neither side finished a request in its window (0.85x, 0.75-0.98x).
    # Its throughput (tokens that arrived in the window) stands, but the report says that is all it rests on, and
    # no per-request figure pretends to describe requests that were not measured.
    from specbench.analysis.outputs import write_comparison_outputs
    from specbench.analysis.reporting.brief import brief_comparison

    def starve(base: RunSpec, spec: RunSpec) -> None:
        for run in (base, spec):
            run.levels[-1].window_requests = 1  # the window is one request long: none starts and ends in it

    comparison = _compare(tmp_path, starve)
    top = comparison.levels[-1]
    assert top.ratio is not None and top.spec.requests_ok == top.baseline.requests_ok == 0
    assert top.spec.throughput_tok_s and top.baseline.throughput_tok_s  # tokens did arrive in both windows
    for row in (top.spec, top.baseline):
        assert row.ttft_p50_s is None and row.per_request_tok_s is None and row.e2e_p50_s is None
        assert "no_finished_requests" in row.flags and "few_requests" not in row.flags
    assert top.per_request_ratio is None and top.ttft_p50_ratio is None and top.e2e_p50_ratio is None
    line = f"C={top.target_c}: no request finished inside the window on spec and baseline: the ratio"
    assert f"Rests on: {line}" in brief_comparison(comparison)
    write_comparison_outputs(comparison, tmp_path / "out")
    report = (tmp_path / "out" / "report.md").read_text()
    assert report.index("## Verdict") < report.index(f"**Rests on**: {line}") < report.index("## Runs")

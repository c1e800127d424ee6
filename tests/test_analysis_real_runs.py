"""The analysis on real emulator runs: the seed's pattern, and validity warnings created on purpose.

(Synthetic runs in tests/analysis/ cover every warning code exactly; here each condition is produced by a real
Locust run against real emulators. Low achieved concurrency and chunk-counted tokens cannot be produced by the
emulator, which always reports usage and holds every closed-loop request in flight; they stay synthetic.)
"""

from __future__ import annotations

import signal
import subprocess
from pathlib import Path

import pytest

from specbench.analysis import compare_runs, load_run, summarize_run
from tests.conftest import locust_cmd, run_locust, wait_until_or_timeout

QUICK = ("--ladder", "2,6", "--max-tokens", "32", "--min-requests", "12", "--min-step-time", "1",
         "--max-step-time", "60", "--step-ci", "0")


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, Path]:
    from specbench.locustfiles.target import start_emulator_process

    root = tmp_path_factory.mktemp("real_runs")
    # The spec server runs at most 4 requests at once (as SGLang caps speculative servers at 48), so at C=6 its
    # server metrics show requests queued behind the cap.
    servers = {"baseline": start_emulator_process("baseline", speed=20),
               "eagle3": start_emulator_process("eagle3", speed=20, extra=["--max-running-requests", "4"])}
    flaky = start_emulator_process("baseline", speed=20, extra=["--fault-503", "0.1", "--fault-cut", "0.05"])
    try:
        made: dict[str, Path] = {}

        def run(name: str, server_url: str, *extra: str, exit_codes: tuple[int, ...] = (0, 1)) -> None:
            proc = run_locust(server_url, root / name, *QUICK, *extra)
            assert proc.returncode in exit_codes, proc.stderr[-2000:]
            made[name] = root / name

        run("base", servers["baseline"].url)
        # Its steps measure about 1 s, as long as the default /metrics period: a window could then hold no sample
        # at all (CI saw it: no queue figure, no warning). Five samples a second put several in every window, and
        # 3 s windows keep the gauges' refresh lag (SGLang refreshes them every 40 decode steps, which a loaded
        # machine stretches; a CI-style run saw the C=6 window's mean queue below 1) a small part of the window.
        run("spec", servers["eagle3"].url, "--server-metrics-interval", "0.2", "--min-step-time", "3")
        run("base_fixed_48", servers["baseline"].url, "--prompt-mode", "fixed", "--max-tokens", "48")
        # ~15% of requests fail, above the default --max-error-rate of 5%: the run says so with exit 3
        run("base_errors", flaky.url, exit_codes=(3,))
        run("base_short", servers["baseline"].url, "--min-requests", "400", "--max-step-time", "2")
        killed = root / "spec_killed"
        proc = subprocess.Popen(locust_cmd(servers["eagle3"].url, killed, *QUICK[:-2], "--max-step-time", "120",
                                           "--min-requests", "400"),
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=root)
        # killed once it has written some records, or after a minute however many it has
        wait_until_or_timeout(lambda: (killed / "records.jsonl").exists()
                              and (killed / "records.jsonl").read_text().count("\n") > 20, timeout_s=60, poll_s=0.2)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
        made["spec_killed"] = killed
        yield made
    finally:
        for server in (*servers.values(), flaky):
            server.stop()


def codes(base: Path, spec: Path) -> set[str]:
    return {w.code for w in compare_runs(load_run(base), load_run(spec)).warnings}


def test_eagle3_emulator_loses_at_every_level_as_in_the_seed(runs):
    comparison = compare_runs(load_run(runs["base"]), load_run(runs["spec"]))
    assert comparison.verdict.kind == "baseline_wins_all"
    assert all(level.ratio is not None and level.ratio < 1 for level in comparison.levels)


def test_spec_server_capped_at_48_running_is_warned_about(runs):
    # Its C=6 window holds server samples, whose queue is the 2 requests above the cap of 4.
    spec = summarize_run(load_run(runs["spec"]))
    assert all(row.server_queued is not None for row in spec.rows if row.window_s), spec.rows
    at_6 = spec.row_at(6)
    assert at_6 is not None and at_6.server_queued is not None and at_6.server_queued >= 1, at_6
    assert "spec_max_running_lower" in codes(runs["base"], runs["spec"])


def test_roles_swapped_warn_that_spec_does_not_speculate_and_baseline_does(runs):
    found = codes(runs["spec"], runs["base"])
    assert {"spec_not_speculative", "baseline_speculative"} <= found


def test_different_settings_and_a_single_prompt_are_warned_about(runs):
    found = codes(runs["base_fixed_48"], runs["spec"])
    assert {"settings_mismatch", "single_prompt"} <= found


def test_error_rate_above_one_percent_is_warned_about(runs):
    assert "error_rate" in codes(runs["base_errors"], runs["spec"])


def test_too_few_requests_for_c_is_warned_about(runs):
    assert "few_requests" in codes(runs["base_short"], runs["spec"])


def test_a_killed_run_is_analysed_and_marked_partial(runs):
    found = codes(runs["base"], runs["spec_killed"])
    assert "partial_run" in found


def test_a_clean_pair_of_identical_servers_has_no_setting_or_role_warnings(runs):
    found = codes(runs["base"], runs["base"])
    assert not found & {"settings_mismatch", "single_prompt", "error_rate", "baseline_speculative",
                        "spec_max_running_lower", "partial_run"}

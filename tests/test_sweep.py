"""``specbench sweep`` end to end on built-in emulators, the report's picks against the analytic cost model,
the sweep file's errors, stopping a server's whole process group, and report.html in headless Chromium.

The sweep runs the baseline and four speculative emulators (eagle3-steps5, -steps3, -steps1 and the seed's
eagle3), each started by its command and stopped before the next one. Their curves are known in closed form
(``emulator.costmodel``), so the best configuration per level and the true crossings are computed here from
the profiles, not written down.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from specbench.cli import main as specbench_main
from specbench.config import data_path
from specbench.contract.lifecycle import group_alive
from specbench.emulator.costmodel import expected_throughput_for_prompts
from specbench.emulator.profile import load_profile
from specbench.launch import ServerCommand
from tests.conftest import ledger_window_tok_s, wait_until

pytestmark = pytest.mark.slow

SPEED = 20
MAX_TOKENS = 48
LADDER = (1, 5, 16, 100)
PROFILES = {"off": "baseline", "steps5": "eagle3-steps5", "steps3": "eagle3-steps3", "steps1": "eagle3-steps1",
            "eagle3": "eagle3"}
LOAD = ["--ladder", ",".join(map(str, LADDER)), "--max-tokens", str(MAX_TOKENS), "--min-requests", "20",
        "--min-step-time", "1.5", "--max-step-time", "30", "--step-ci", "0", "--no-refine"]
CLEAR = 1.04  # model margin from which the best at a level must be picked exactly
IN_CI = os.environ.get("CI", "").strip().lower() == "true"


def _sweep_yaml(path: Path) -> Path:
    py = sys.executable
    lines = [f"params: {{speed: {SPEED}}}", "ready_timeout_s: 60", "stop_timeout_s: 10", "configurations:"]
    for name, profile in PROFILES.items():
        lines.append(f"  - name: '{name}'")
        if name == "off":
            lines.append("    baseline: true")
        ledger_file = path.parent / f"ledger-{name}.jsonl"  # the emulator's truth, kept after it stops
        if name == "steps1":  # a string command runs through /bin/sh, as a user's shell line would
            lines.append(f"    command: exec {py} -m specbench.emulator --profile {profile} --port {{port}} "
                         f"--speed {{speed}} --ledger-file {ledger_file} --ledger-chunk-times")
        else:
            lines.append(f"    command: [{py}, -m, specbench.emulator, --profile, {profile}, --port, '{{port}}', "
                         f"--speed, '{{speed}}', --ledger-file, '{ledger_file}', --ledger-chunk-times]")
        lines.append("    ready: {url: 'http://127.0.0.1:{port}/ready', interval_s: 0.1}")
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.fixture(scope="module")
def sweep_report(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    root = tmp_path_factory.mktemp("sweep")
    out = root / "report"
    proc = subprocess.run([sys.executable, "-m", "specbench.cli", "sweep", str(_sweep_yaml(root / "sweep.yaml")),
                           "--out", str(out), *LOAD], capture_output=True, text=True, timeout=400)
    assert proc.returncode == 0, proc.stderr[-3000:] + proc.stdout[-3000:]
    return out, proc.stdout


def _suite_prompts() -> list:
    """The built-in prompt set as the emulator's cost model takes it (text, or a message list)."""
    rows = [json.loads(line) for line in data_path("prompts", "diverse.jsonl").read_text().splitlines() if line]
    return [row["prompt"] if isinstance(row.get("prompt"), str) else row["messages"] for row in rows]


def _model(name: str, c: float) -> float:
    prompts = _suite_prompts()
    return expected_throughput_for_prompts(load_profile(PROFILES[name], speed=SPEED), c, prompts, MAX_TOKENS)


def _model_log_ratio(a: str, b: str, c: float) -> float:
    """log(a's analytic throughput over b's) at C=c: positive where the model has a ahead."""
    return math.log(_model(a, c) / _model(b, c))


def _true_crossing(a: str, b: str, lo: float, hi: float) -> float:
    """C in [lo, hi] where the analytic curves of a and b meet (bisection on log C)."""
    f = lambda c: _model_log_ratio(a, b, c)  # noqa: E731
    x0, x1 = math.log(lo), math.log(hi)
    assert (f(lo) > 0) != (f(hi) > 0), (a, b, lo, hi)
    for _ in range(50):
        mid = (x0 + x1) / 2
        if (f(math.exp(mid)) > 0) == (f(lo) > 0):
            x0 = mid
        else:
            x1 = mid
    return math.exp((x0 + x1) / 2)


def _ledger_tok_s(root: Path, out: Path) -> dict[str, dict[int, float]]:
    """Per configuration and level: the output tokens its emulator wrote in the step's window, per second.

    The truth of the same run, from the server's side (each chunk's write time and tokens), whatever this
    machine's load did to the emulators' speed; a failed or cut request counts none, as in the suite.
    """
    truth: dict[str, dict[int, float]] = {}
    for name in PROFILES:
        entries = [json.loads(line) for line in (root / f"ledger-{name}.jsonl").read_text().splitlines()]
        steps = [json.loads(line) for line in (out / name / "steps.jsonl").read_text().splitlines()]
        truth[name] = {step["target_c"]: ledger_window_tok_s(entries, step["steady_start_s"], step["end_s"])
                       for step in steps}
    return truth


# The measured ratio against the ledger's, per configuration and level. Measured over 2 sweeps on this 2-core
# machine with other test processes beside them: within 1% where one other process ran; with three, up to 3.7%
# at steps the suite did not flag, and 13% at a C=100 step it flagged `client_bound` (the client itself was
# starved there, and said so). So steps flagged client_bound or client_lag on either side are not held to the
# truth, the rest within RATIO_TO_TRUTH; C=1 is never client-bound on these machines and is always checked.
RATIO_TO_TRUTH = 1.05
# C=100 (100 streams ending in lock-step every emulated step at speed 20) is where the client falls behind first:
# one CI-style run with this machine loaded by other tests measured 7.4% under the ledger there without a
# client_bound flag (the CPU-based flag misses bursts; that run predates the client_lag flag). Held to
# TOP_LEVEL_TO_TRUTH until the client keeps up with lock-step endings there.
TOP_LEVEL_TO_TRUTH = 1.15
# Against the cost model the same sweeps' ratios were off by -75% to +25% (the emulators at speed 20 lose time to
# a starved CPU, each profile differently), so the model's curves are the truth only where the emulators ran
# them: a switch point is checked against the analytic crossing when the ledger's ratios at both its levels are
# within MODEL_HELD of the model's.
MODEL_HELD = 1.05


def _check_level_against_truth(c: int, lv: dict, served: dict[str, float]) -> None:
    """The level's pick is the best the servers delivered, and each measured ratio is the delivered one."""
    ranked = sorted(served, key=served.get, reverse=True)
    if served[ranked[0]] / served[ranked[1]] >= CLEAR:
        assert lv["best"] == ranked[0], (c, lv["best"], served, lv["configs"])
    else:  # a near tie in what the servers delivered: the pick is the best or the runner-up
        assert ranked[0] in (lv["best"], lv["runner_up"]), (c, lv, served)
    bound = TOP_LEVEL_TO_TRUTH if c == LADDER[-1] else RATIO_TO_TRUTH
    for cfg in lv["configs"]:
        want = served[cfg["name"]] / served["off"]
        assert abs(math.log(cfg["ratio"] / want)) < math.log(bound), (c, cfg, want)


def test_sweep_picks_the_best_and_switch_points(sweep_report: tuple[Path, str]) -> None:
    out, stdout = sweep_report
    for name in PROFILES:
        assert (out / name / "records.jsonl").exists(), name
        assert f"{name}: server stopped" in stdout
        assert (out / "servers" / f"{name}.log").exists()
    for name in ("report.md", "report.html", "comparison.json", "comparison.csv", "throughput_vs_c.png",
                 "ratio_heatmap.png", "pairs/steps3/report.md", "pairs/steps3/report.html"):
        assert (out / name).exists(), name
    report = json.loads((out / "comparison.json").read_text())
    assert report["kind"] == "multi_comparison" and report["baseline_name"] == "off"
    levels = {lv["target_c"]: lv for lv in report["levels"]}
    assert sorted(levels) == list(LADDER)
    truth = _ledger_tok_s(out.parent, out)
    client_bound = {step["target_c"] for name in PROFILES for step in map(json.loads, (
        out / name / "steps.jsonl").read_text().splitlines())
        if {"client_bound", "client_lag"} & set(step.get("flags", []))}
    assert 1 not in client_bound
    for c, lv in levels.items():
        if c not in client_bound:  # where flagged, the suite said its own figures may be distorted
            _check_level_against_truth(c, lv, {name: truth[name][c] for name in PROFILES})
    switches = report["policy"]["switches"]
    top = {name: truth[name][LADDER[-1]] for name in PROFILES}
    best_top = max(top, key=top.get)
    if LADDER[-1] not in client_bound and all(top[best_top] >= CLEAR * v for n, v in top.items() if n != best_top):
        assert (switches[-1]["to_name"] if switches else report["policy"]["fixed"]) == best_top, (switches, top)

    def model_held(name: str, c: int) -> bool:
        return abs(math.log(truth[name][c] / truth["off"][c] / (_model(name, c) / _model("off", c)))) < math.log(
            MODEL_HELD)

    for s in switches:  # where the emulators ran their model, the 95% band holds the true analytic crossing
        if not all(model_held(name, c) for name in (s["from_name"], s["to_name"]) if name != "off"
                   for c in (s["below_c"], s["above_c"])):
            continue
        below, above = (_model_log_ratio(s["from_name"], s["to_name"], c) for c in (s["below_c"], s["above_c"]))
        if (below > 0) == (above > 0):
            # The model's curves do not cross here: the switch comes from a near tie at the end where the model
            # disagrees with the measured order, which two configurations each held within MODEL_HELD can show
            # (one CI run beside two others: eagle3-steps3 picked at C=16 where the model has steps1 4.8% ahead).
            disagreeing = above if below > 0 else below
            assert abs(disagreeing) < 2 * math.log(MODEL_HELD), (s, below, above)
            continue
        truth_c = _true_crossing(s["from_name"], s["to_name"], s["below_c"], s["above_c"])
        low = s["c_low"] if s["c_low"] is not None else 0.0
        high = s["c_high"] if s["c_high"] is not None else math.inf
        assert low <= truth_c <= high, (s, truth_c)
    assert report["policy"]["fixed"] in PROFILES and report["policy"]["mean_gain"] >= 1.0
    assert report["policy"]["text"] in stdout


def test_compare_runs_takes_many_named_runs(sweep_report: tuple[Path, str], tmp_path: Path) -> None:
    out, _ = sweep_report
    again = tmp_path / "again"
    code = specbench_main(["compare-runs", str(out / "off"), *(f"{n}={out / n}" for n in PROFILES if n != "off"),
                           "--baseline-name", "off", "--out", str(again)])
    assert code == 0
    first, second = (json.loads((d / "comparison.json").read_text()) for d in (out, again))
    assert first["levels"] == second["levels"] and first["policy"] == second["policy"]


# -- the HTML report in a real browser ---------------------------------------------------------------------------


def _chromium() -> str:
    path = shutil.which("chromium") or shutil.which("chromium-browser")
    if path is None:
        if IN_CI:
            pytest.fail("chromium is not installed (CI=true, so this is a failure, not a skip)", pytrace=False)
        pytest.skip("chromium is not installed: apt-get install -y chromium")
    return path


def _chromium_run(binary: str, profile: Path, *args: str) -> subprocess.CompletedProcess[str]:
    cmd = [binary, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
           "--disable-component-update", "--disable-sync", f"--user-data-dir={profile}", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120)


def test_report_html_shows_the_plots_and_the_verdict_in_chromium(sweep_report: tuple[Path, str],
                                                                  tmp_path: Path) -> None:
    import numpy as np
    from matplotlib.image import imread

    binary = _chromium()
    out, _ = sweep_report
    html = out / "report.html"
    text = html.read_text()
    assert "<script" not in text and "http://" not in text.split("<body>")[1].split("<code>")[0]
    dom = _chromium_run(binary, tmp_path / "profile-dom", "--dump-dom", html.as_uri())
    assert dom.returncode == 0, dom.stderr[-2000:]
    report = json.loads((out / "comparison.json").read_text())
    assert '<h2 id="verdict">' in dom.stdout and '<h2 id="policy">' in dom.stdout
    # the curves, the heat map and the output-equivalence figure (sweeps keep answers at temperature 0)
    assert dom.stdout.count('src="data:image/png;base64,') == 3
    assert "Output equivalence" in dom.stdout and "changed 0 of" in dom.stdout
    for lv in report["levels"]:
        assert f"C={lv['target_c']}: {lv['best']}" in dom.stdout
    shot = tmp_path / "report.png"
    run = _chromium_run(binary, tmp_path / "profile-shot", f"--screenshot={shot}", "--window-size=1400,4000",
                        "--hide-scrollbars", html.as_uri())
    assert run.returncode == 0 and shot.exists(), run.stderr[-2000:]
    pixels = imread(shot)[..., :3]
    # the plots are drawn: strongly coloured pixels (curves, heat map cells) cover a real share of the page (4000
    # px tall, so the heat map stays in view below the per-level tables and the saturation lines)
    saturation = pixels.max(axis=2) - pixels.min(axis=2)
    # (about 1% of the page with the plots, 0.0% with their images removed: the bound sits between)
    assert float(np.mean(saturation > 0.35)) > 0.003, float(np.mean(saturation > 0.35))
    # the verdict box (green rule) is in view
    green = (pixels[..., 1] > 0.4) & (pixels[..., 0] < 0.3) & (pixels[..., 2] < 0.3)
    assert green.sum() > 200


# -- sweep file errors and process groups (fast) ---------------------------------------------------------------


def test_example_sweep_file_is_valid() -> None:
    from specbench.sweepfile import load_sweep

    sweep = load_sweep(Path(__file__).resolve().parent.parent / "config" / "sweep" / "example.yaml")
    assert sweep.baseline.name == "off" and [e.name for e in sweep.entries][1:] == ["steps1", "steps3",
                                                                                    "remote-steps5"]
    cmd = sweep.entries[1].command_line(4242)
    assert isinstance(cmd, str) and "--port 4242" in cmd and "--speculative-num-steps 1" in cmd
    assert not sweep.entries[3].managed and sweep.entries[3].url == "http://10.0.0.7:30000"


@pytest.mark.parametrize(("text", "key"), [
    ("configurations: []\n", "configurations"),
    ("configurations:\n  - {name: a, url: 'http://x:1'}\n  - {name: b, url: 'http://x:2'}\n", "configurations"),
    ("configurations:\n  - {name: a, baseline: true, url: 'http://x:1'}\n  - {name: a, url: 'http://x:2'}\n",
     "configurations[1].name"),
    ("configurations:\n  - {name: a, baseline: true, url: 'http://x:1'}\n  - {name: b, command: 'run {nope}'}\n",
     "configurations[1].command"),
    ("configurations:\n  - {name: a, baseline: true, url: 'http://x:1'}\n  - {name: b}\n", "configurations[1].url"),
    ("configurations:\n  - {name: a, baseline: true, url: 'http://x:1'}\n  - {name: b, url: 'http://x:2', "
     "colour: red}\n", "configurations[1].colour"),
    ("configurations:\n  - {name: a, baseline: true, url: 'http://x:1'}\n  - {name: b, command: [x], "
     "ready: {timeout_s: -1}}\n", "configurations[1].ready.timeout_s"),
    ("configurations:\n  - {name: 'a b', baseline: true, url: 'http://x:1'}\n  - {name: b, url: 'http://x:2'}\n",
     "configurations[0].name"),
    ("configurations: [\n", ""),
    ("configurations:\n  - {name: a, baseline: true, url: 'http://x:1', gpu_metrics: 'ftp://x:9400'}\n"
     "  - {name: b, url: 'http://x:2', gpu_metrics: 'http://x:9400'}\n", "configurations[0].gpu_metrics"),
    ("configurations:\n  - {name: a, baseline: true, url: 'http://x:1', gpu_metrics: 'http://x:{nope}'}\n"
     "  - {name: b, url: 'http://x:2', gpu_metrics: 'http://x:9400'}\n", "configurations[0].gpu_metrics"),
    ("configurations:\n  - {name: off, baseline: true, url: 'http://x:1'}\n  - {name: b, url: 'http://x:2'}\n",
     "configurations[0].name"),
])
def test_bad_sweep_file_is_one_line_naming_the_key(tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str,
                                                   key: str) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    assert specbench_main(["sweep", str(path), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and str(path) in err, err
    assert f"key '{key}'" in err if key else "invalid YAML" in err
    assert not (tmp_path / "out").exists()


def test_a_sweep_with_exporters_for_some_configurations_only_stops_before_any_server(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "sweep.yaml"
    path.write_text("configurations:\n  - {name: a, baseline: true, url: 'http://127.0.0.1:9', "
                    "gpu_metrics: 'http://127.0.0.1:9400'}\n  - {name: b, url: 'http://127.0.0.1:9'}\n")
    assert specbench_main(["sweep", str(path), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "b would have no GPU metrics" in err, err
    assert not (tmp_path / "out").exists()


def test_each_configuration_reads_its_own_exporter(tmp_path: Path) -> None:
    """A sweep whose two emulators export DCGM telemetry for 1 and 2 GPUs: each run samples only its own server's
    exporter (its ``{port}`` filled as the command's), and the report gives the configuration's energy ratio."""
    py = sys.executable
    lines = ["configurations:"]
    for name, profile, gpus in (("off", "baseline", 1), ("eagle3", "eagle3", 2)):
        lines += [f"  - name: '{name}'", *(["    baseline: true"] if name == "off" else []),
                  f"    command: [{py}, -m, specbench.emulator, --profile, {profile}, --port, '{{port}}', "
                  f"--speed, '10', --gpu-telemetry, '{gpus}']",
                  "    ready: {url: 'http://127.0.0.1:{port}/ready', interval_s: 0.1}",
                  "    gpu_metrics: 'http://127.0.0.1:{port}/_emulator/dcgm/metrics'"]
    path = tmp_path / "sweep.yaml"
    path.write_text("\n".join(lines) + "\n")
    out = tmp_path / "report"
    proc = subprocess.run([py, "-m", "specbench.cli", "sweep", str(path), "--out", str(out), "--ladder", "4",
                           "--max-tokens", "32", "--min-requests", "12", "--min-step-time", "2", "--step-ci", "0",
                           "--no-refine", "--server-metrics-interval", "0.25"],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:] + proc.stdout[-3000:]
    for name, gpus in (("off", 1), ("eagle3", 2)):
        assert f"{name}: GPU metrics from http://127.0.0.1:" in proc.stdout
        samples = [json.loads(line) for line in (out / name / "gpu_metrics.jsonl").read_text().splitlines()]
        assert len(samples) > 3 and all(len(s["gpus"]) == gpus for s in samples if "gpus" in s), name
    report = json.loads((out / "comparison.json").read_text())  # one configuration: the two-run report
    energy = report["energy"]
    assert energy is not None and energy["levels"][0]["sentence"].startswith("C=4: speculation uses")


def test_sweep_names_a_server_that_never_gets_ready(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "sweep.yaml"
    path.write_text("configurations:\n"
                    f"  - {{name: 'off', baseline: true, command: [{sys.executable}, -c, 'import sys; "
                    "print(\"no model here\"); sys.exit(3)'], ready: {timeout_s: 20}}\n"
                    "  - {name: b, url: 'http://127.0.0.1:9'}\n")
    assert specbench_main(["sweep", str(path), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip()
    assert "off: the server command exited with code 3" in err and "no model here" in err, err


def test_sweep_refuses_an_out_directory_holding_an_earlier_run(tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "sweep.yaml"
    path.write_text("configurations:\n  - {name: 'off', baseline: true, url: 'http://127.0.0.1:9'}\n"
                    "  - {name: b, url: 'http://127.0.0.1:9'}\n")
    out = tmp_path / "out"
    (out / "off").mkdir(parents=True)
    (out / "off" / "records.jsonl").write_text("{}\n")
    assert specbench_main(["sweep", str(path), "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "--out" in err and "is not empty" in err, err
    assert (out / "off" / "records.jsonl").read_text() == "{}\n"  # nothing touched


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return Path(f"/proc/{pid}/stat").exists() and Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"


def _pids_once_all_written(pids: Path, n: int, timeout_s: float) -> list[int]:
    """The process ids a test script writes to ``pids``, once all ``n`` are there."""
    def written() -> list[int]:
        found = pids.read_text().split() if pids.exists() else []
        return [int(p) for p in found] if len(found) >= n else []

    return wait_until(written, timeout_s=timeout_s, poll_s=0.05, what=f"{n} process ids in {pids}")


def test_stop_ends_the_whole_process_group_even_a_child_ignoring_sigterm(tmp_path: Path) -> None:
    pids = tmp_path / "pids"
    script = (f"trap '' TERM; sleep 300 & echo $! >> {pids}; "
              f"(trap '' TERM; sleep 300) & echo $! >> {pids}; echo $$ >> {pids}; wait")
    server = ServerCommand("group", ["bash", "-c", script], tmp_path / "group.log", stop_timeout_s=1.0).start()
    started = _pids_once_all_written(pids, 3, timeout_s=10)
    assert all(_alive(p) for p in started)
    t0 = time.monotonic()
    server.stop()
    assert time.monotonic() - t0 < 8
    time.sleep(0.2)
    assert not any(_alive(p) for p in started), [p for p in started if _alive(p)]
    assert not group_alive(started[-1])


def test_several_specs_need_names(capsys: pytest.CaptureFixture[str]) -> None:
    code = specbench_main(["compare", "--baseline", "http://127.0.0.1:9", "--spec", "http://127.0.0.1:10",
                           "--spec", "http://127.0.0.1:11"])
    assert code == 2 and "--spec NAME=URL" in capsys.readouterr().err
    code = specbench_main(["compare", "--baseline", "http://127.0.0.1:9", "--spec", "a=http://127.0.0.1:10",
                           "--spec", "a=http://127.0.0.1:11"])
    assert code == 2 and "given twice" in capsys.readouterr().err


def test_a_killed_specbench_leaves_no_server_behind(tmp_path: Path) -> None:
    """SIGKILL to the sweep while its server command starts: the guardian stops the server's whole group."""
    pids = tmp_path / "pids"
    script = f"sleep 300 & echo $! >> {pids}; (trap '' TERM; sleep 300) & echo $! >> {pids}; echo $$ >> {pids}; wait"
    path = tmp_path / "sweep.yaml"
    path.write_text("ready_timeout_s: 120\nstop_timeout_s: 1\nconfigurations:\n"
                    f"  - {{name: 'off', baseline: true, command: [bash, -c, \"{script}\"], "
                    "ready: {url: 'http://127.0.0.1:{port}/ready'}}\n"
                    "  - {name: b, url: 'http://127.0.0.1:9'}\n")
    proc = subprocess.Popen([sys.executable, "-m", "specbench.cli", "sweep", str(path), "--out", str(tmp_path / "o")],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        started = _pids_once_all_written(pids, 3, timeout_s=30)
        assert all(_alive(p) for p in started)
    finally:
        proc.kill()
        proc.wait()
    # SIGTERM, then SIGKILL after the 1 s stop timeout to the one ignoring it
    wait_until(lambda: not any(_alive(p) for p in started), timeout_s=10,
               what=lambda: f"the server's processes to end; alive: {[p for p in started if _alive(p)]}")

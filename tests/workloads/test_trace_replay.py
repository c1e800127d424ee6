"""Trace replay (#28): the readers and their errors, a replay held to the emulator's ledger at 1 and 3 load
processes, a real `specbench compare --trace` on the emulator pair, and recorded conversations as prompts."""

from __future__ import annotations

import json
import random
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from specbench.analysis.records.goodput import meets_slo
from specbench.contract.rundir import read_run
from specbench.contract.settings import SettingsError, SuiteSettings
from specbench.contract.slo import Slo
from specbench.contract.traces import (
    TraceError,
    block_reuse_share,
    detect_format,
    load_trace,
    parse_trace,
    parse_windows,
    replay_steps,
)
from specbench.loadrun import free_port
from specbench.locustfiles.prompts import PromptError, load_prompts
from tests.conftest import LOCUSTFILE, ledger, run_locust

EXAMPLES = Path(__file__).resolve().parents[2] / "config" / "traces"


def bursty_mooncake(path: Path, n: int, seed: int, out_tokens: tuple[int, int] = (4, 24)) -> list[dict]:
    """A Mooncake trace: 1 s bursts at 30/s and 1 s lulls at 5/s; two shared 2-block system prompts, a third
    of the rows following up an earlier row's full blocks, every last (partial) block new."""
    rng = random.Random(seed)
    rows, t, next_id = [], 0.0, 100
    while len(rows) < n:
        t += rng.expovariate(30.0 if int(t) % 2 == 0 else 5.0)
        if rows and rng.random() < 1 / 3:
            head = rows[rng.randrange(len(rows))]["hash_ids"][:-1]
        else:
            head = [0, 1] if rng.random() < 0.5 else [2, 3]
        ids = [*head, next_id]
        next_id += 1
        rows.append({"timestamp": int(t * 1000), "input_length": (len(ids) - 1) * 512 + rng.randint(20, 400),
                     "output_length": rng.randint(*out_tokens), "hash_ids": ids})
    start = rows[0]["timestamp"]
    for row in rows:
        row["timestamp"] -= start
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return rows


def test_the_three_formats_are_read_detected_windowed_and_scaled(tmp_path):
    traces = {f: load_trace(str(EXAMPLES / name)) for f, name in
              [("mooncake", "mooncake-example.jsonl"), ("burstgpt", "burstgpt-example.csv"),
               ("azure", "azure-example.csv")]}
    for fmt, trace in traces.items():
        assert trace.format == fmt and len(trace.rows) == 120 and trace.rows[0].time_s == 0.0
        assert all(a.time_s <= b.time_s for a, b in zip(trace.rows, trace.rows[1:], strict=False))
    moon = traces["mooncake"]
    first = json.loads((EXAMPLES / "mooncake-example.jsonl").read_text().splitlines()[1])
    assert (moon.rows[1].time_s, moon.rows[1].input_tokens, moon.rows[1].output_tokens, list(moon.rows[1].hash_ids)) \
        == (first["timestamp"] / 1000, first["input_length"], first["output_length"], first["hash_ids"])
    azure = parse_trace("TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.6805900,100,20\n"
                        "2023-11-16 18:15:48.1805900,50,7\n", "a.csv")
    assert azure.format == "azure" and azure.rows[1].time_s == pytest.approx(1.5)
    burst = parse_trace("Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n"
                        "10.5,GPT-4,30,0,30,Conversation log\n11.0,GPT-4,40,5,45,Conversation log\n", "b.csv")
    assert burst.skipped == 1 and len(burst.rows) == 1  # a 0-token answer cannot be replayed: skipped, counted
    assert detect_format("hello") is None
    # windows (trace seconds) and speed: due times counted from the window's start, divided by the speed
    steps = replay_steps(moon, parse_windows("2:4,10:"), 2.0)
    assert [len(s.rows) for s in steps] == [sum(2 <= r.time_s < 6 for r in moon.rows),
                                            sum(r.time_s >= 10 for r in moon.rows)]
    assert steps[0].span_s == 2.0 and steps[0].due_s[0] == pytest.approx((steps[0].rows[0].time_s - 2) / 2)
    # block reuse: the leading ids an earlier row had, at their length in this row
    rows = parse_trace('{"timestamp": 0, "input_length": 1000, "output_length": 5, "hash_ids": [1, 2]}\n'
                       '{"timestamp": 5, "input_length": 1100, "output_length": 5, "hash_ids": [1, 2, 3]}\n'
                       '{"timestamp": 9, "input_length": 600, "output_length": 5, "hash_ids": [1, 4]}\n', "m").rows
    assert block_reuse_share(rows) == pytest.approx((1024 + 512) / 2700)


@pytest.mark.parametrize(("text", "expected"), [
    ('{"timestamp": 0, "input_length": 10}\n', "m.jsonl line 1: missing output_length"),
    ('{"timestamp": 5, "input_length": 10, "output_length": 3}\n{"timestamp": 4, "input_length": 10, '
     '"output_length": 3}\n', "m.jsonl line 2: 'timestamp' 4 is earlier than the row before it"),
    ('{"timestamp": -1, "input_length": 10, "output_length": 3}\n',
     "m.jsonl line 1: expected 'timestamp' to be a time at"),
    ('{"timestamp": 0, "input_length": 1.5, "output_length": 3}\n',
     "expected 'input_length' to be a whole number >= 1"),
    ('{"timestamp": 0, "input_length": 10, "output_length": -3}\n', "expected 'output_length' to be a whole number"),
    ('{"timestamp": 0, "input_length": 600, "output_length": 3, "hash_ids": [1]}\n', "1 hash_ids for input_length 600"),
    ("Timestamp,Model,Request tokens,Total tokens\n1,a,2,3\n", "m.jsonl line 1: missing column 'Response tokens'"),
    ("TIMESTAMP,ContextTokens,GeneratedTokens\nyesterday,1,2\n", "m.jsonl line 2: expected 'TIMESTAMP' to be a date"),
    ("a,b\n1,2\n", "cannot tell the trace format"),
])
def test_malformed_traces_are_one_line_naming_file_and_line(text, expected):
    with pytest.raises(TraceError) as err:
        parse_trace(text, "m.jsonl")
    assert expected in str(err.value) and "\n" not in str(err.value), str(err.value)


def test_bad_trace_options_exit_2_with_one_line(tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"timestamp": 5, "input_length": 10, "output_length": 3}\n'
                   '{"timestamp": 1, "input_length": 10, "output_length": 3}\n')
    proc = subprocess.run([sys.executable, "-m", "locust", "-f", str(LOCUSTFILE), "--headless", "--host",
                           "http://127.0.0.1:9", "--trace", str(bad)], capture_output=True, text=True, timeout=60,
                          cwd=tmp_path)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr[-1500:]
    assert f"{bad} line 2: 'timestamp' 1 is earlier than the row before it" in proc.stderr, proc.stderr[-1500:]
    good = str(EXAMPLES / "mooncake-example.jsonl")
    for options, expected in [({"trace_window": "500:10"}, "--trace-window 500:10: no request"),
                              ({"trace_window": "x"}, "--trace-window: expected START:LEN"),
                              ({"trace_speed": 0.0}, "--trace-speed: expected a number at least 0.001"),
                              ({"rate_ladder": "1"}, "cannot be combined with --rate-ladder"),
                              ({"output_len": "fixed:4"}, "leave out --input-len, --output-len")]:
        with pytest.raises(SettingsError, match=expected.replace("+", r"\+")):
            SuiteSettings.from_options(type("O", (), {"trace": good, **options})())


@pytest.mark.parametrize("processes", [1, 3])
@pytest.mark.serial  # judges send timing: runs alone (pyproject.toml)
def test_replay_matches_the_trace_in_the_emulators_ledger(tmp_path, emulator, processes):
    trace = tmp_path / "trace.jsonl"
    rows = bursty_mooncake(trace, 90, seed=processes)
    emu = emulator("baseline", speed=20, extra=["--prefix-cache"])
    out = tmp_path / "run"
    args = ["--api", "generate", "--trace", str(trace), "--trace-speed", "1.5"]
    if processes > 1:
        port = free_port()
        args += ["--processes", str(processes), "--master-bind-port", str(port), "--master-port", str(port)]
    proc = run_locust(emu.url, out, *args, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    run = read_run(out)
    (step,) = run.steps
    assert step["dropped"] == 0 and step["requests_total"] == 90 and not step["flags"], step
    truth = {e["rid"]: e for e in ledger(emu.url)}
    assert len(truth) == 90 and len(run.records) == 90  # every row sent once, whatever the processes
    assert sorted(r["prompt_seq"] for r in run.records) == list(range(90))
    if processes > 1:
        assert len({r["worker"] for r in run.records}) >= 2, "the rows were not shared between the processes"
    anchor = step["steady_start_s"]
    late = []
    for rec in run.records:
        row, entry = rows[rec["prompt_seq"]], truth[rec["request_id"]]
        assert rec["scheduled_s"] == pytest.approx(anchor + row["timestamp"] / 1000 / 1.5, abs=1e-3)
        assert entry["prompt_tokens"] == row["input_length"] and entry["max_new_tokens"] == row["output_length"]
        assert entry["completion_tokens"] == row["output_length"] == rec["output_tokens"]
        late.append(entry["arrival_s"] - (anchor + row["timestamp"] / 1000 / 1.5))
    late_ms = np.array(late) * 1000
    transit_ms = np.array([truth[r["request_id"]]["arrival_s"] - r["start_s"] for r in run.records]) * 1000
    print(f"{processes} process(es): arrival - trace time, ms: median {np.median(late_ms):.2f}, "
          f"p99 {np.percentile(late_ms, 99):.2f}, min {late_ms.min():.2f}; record start to arrival, ms: median "
          f"{np.median(transit_ms):.2f}")
    # The records' start_s is when the request went out, as the server saw it arrive (a small transit).
    assert np.median(transit_ms) < 5, sorted(transit_ms)[-5:]
    # The bounds, median 5 ms and p99 50 ms, are benchmarks/bench_trace.py's (600 rows, nothing else in the
    # process). Here pytest, the load processes and the emulator share 2 cores, and a burst's rows queue behind each
    # other's sends: measured on 2026-12-02 over all of this session's builds, the median was 3.5-6.6 ms at 1 process
    # (about 30 quiet runs) and 4.3-6.0 ms beside a busy-loop neighbour (5 runs), 3.7-6.5 ms at 3 processes (14 quiet
    # runs) and 5.3-7.9 ms beside one (4 runs); p99 17-81 ms (a burst's last row). Most of it is the load
    # process's own lateness, start_s - scheduled_s, which the records state (3.7-6.8 ms at 3 processes).
    median_bound, p99_bound = 10, 100
    assert late_ms.min() > -5 and np.median(late_ms) < median_bound and np.percentile(late_ms, 99) < p99_bound, \
        sorted(late_ms)[-5:]
    cached = sum(e["cached_tokens"] for e in truth.values()) / sum(e["prompt_tokens"] for e in truth.values())
    expected = block_reuse_share(load_trace(str(trace)).rows)
    print(f"cached-token share {cached:.3f}, trace's block reuse {expected:.3f}")
    assert expected > 0.3 and abs(cached - expected) < 0.05, (cached, expected)


def test_compare_replays_one_trace_on_both_servers_and_names_the_better_one(tmp_path, emulator):
    trace = tmp_path / "bursty.jsonl"
    bursty_mooncake(trace, 80, seed=7, out_tokens=(32, 96))
    base, spec = emulator("baseline", speed=4), emulator("eagle3", speed=4)
    out = tmp_path / "report"
    cmd = [sys.executable, "-m", "specbench.cli", "compare", "--baseline", base.url, "--spec", spec.url,
           "--out", str(out), "--trace", str(trace), "--trace-speed", "1.5", "--slo", "ttft=1.5s,tpot=50ms"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=200, cwd=tmp_path)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-3000:]
    (cmp,) = json.loads((out / "trace.json").read_text())
    for side in ("baseline", "spec"):
        s = cmp[side]
        assert s["rows"] == s["sent"] == 80 and s["goodput_ci"][0] <= s["goodput_req_s"] <= s["goodput_ci"][1]
        run = read_run(out / side)
        good = [r for r in run.records if meets_slo(r, Slo(ttft_s=1.5, tpot_s=0.05))]
        assert s["good"] == len(good) and s["goodput_req_s"] == pytest.approx(len(good) / s["window_s"])
    lo, hi = cmp["diff_ci"]
    diff = cmp["spec"]["goodput_req_s"] - cmp["baseline"]["goodput_req_s"]
    assert lo <= diff <= hi
    # EAGLE-3 (slower per step under load) misses TPOT<=50ms on the bursts where the baseline holds it
    assert hi < 0 and cmp["verdict"].startswith("baseline serves this traffic better"), cmp
    report = (out / "report.md").read_text()
    assert "## Trace replay" in report and f"Verdict: {cmp['verdict']}" in report
    assert f"Verdict: {cmp['verdict']}" in proc.stdout
    print("\n".join(line for line in proc.stdout.splitlines() if "goodput" in line))


def test_recorded_conversations_first_user_turn_then_the_recorded_turns_in_order(tmp_path, emulator):
    share = tmp_path / "share.jsonl"  # ShareGPT JSONL and OpenAI-style chat JSONL ending with the answer
    convs = [[f"Question {c}.{t}: what is {c * 10 + t} squared?" for t in (1, 2, 3)] for c in range(4)]
    lines = [{"id": f"c{c}", "conversations": [x for q in qs for x in ({"from": "human", "value": q},
                                                                        {"from": "gpt", "value": "ok"})]}
             for c, qs in enumerate(convs[:2])]
    lines += [{"id": f"c{c}", "messages": [{"role": "system", "content": "Be brief."},
                                           *[x for q in qs for x in ({"role": "user", "content": q},
                                                                     {"role": "assistant", "content": "ok"})]]}
              for c, qs in enumerate(convs[2:], start=2)]
    lines.append({"conversations": [{"from": "gpt", "value": "no user turn"}]})  # skipped, counted
    share.write_text("".join(json.dumps(x) + "\n" for x in lines))
    loaded = load_prompts(str(share))
    assert loaded.skipped == 1 and [p.id for p in loaded.prompts] == ["c0", "c1", "c2", "c3"]
    assert loaded.prompts[2].as_messages() == [{"role": "system", "content": "Be brief."},
                                               {"role": "user", "content": convs[2][0]}]
    assert [p.recorded_turns for p in loaded.prompts] == [tuple(qs[1:]) for qs in convs]
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps(lines[0]) + "\n" + '{"conversations": [{"from": "alien", "value": "x"}]}\n')
    with pytest.raises(PromptError, match=r"bad.jsonl line 2: conversations\[0\]: expected \"from\" to be human"):
        load_prompts(str(bad))
    # with --multi-turn the recorded user turns are asked in order, after the server's real answers
    emu = emulator("baseline", speed=20, extra=["--ledger-text"])
    out = tmp_path / "run"
    proc = run_locust(emu.url, out, "--api", "chat", "--prompts", str(share), "--multi-turn", "3", "--ladder", "1",
                      "--max-tokens", "8", "--min-requests", "6", "--min-step-time", "0.5", "--max-step-time", "30",
                      "--step-ci", "0", timeout=90)
    assert proc.returncode == 0, proc.stderr[-3000:]
    truth = {e["rid"]: e for e in ledger(emu.url)}
    ids = {p.id: i for i, p in enumerate(loaded.prompts)}
    checked = 0
    for rec in read_run(out).records:
        conv = convs[ids[rec["prompt_id"].split("/")[0]]]
        text = truth[rec["request_id"]]["prompt_text"]
        asked = [q for q in conv if q in text]
        assert asked == conv[: rec["turn"]], (rec["turn"], text[-300:])  # turns 1..k, in order, nothing else
        assert text.rstrip().endswith(conv[rec["turn"] - 1])
        checked += rec["turn"] > 1
    assert checked >= 2


def test_each_trace_window_is_one_step_with_its_own_rows(tmp_path, emulator):
    trace = tmp_path / "trace.jsonl"
    rows = bursty_mooncake(trace, 60, seed=3)
    times = [r["timestamp"] / 1000 for r in rows]
    emu = emulator("baseline", speed=20)
    out = tmp_path / "run"
    proc = run_locust(emu.url, out, "--api", "completions", "--trace", str(trace), "--trace-window", "0:1,2:",
                      "--trace-speed", "2", timeout=90)
    assert proc.returncode == 0, proc.stderr[-3000:]
    run = read_run(out)
    first = [r for r, t in zip(rows, times, strict=True) if t < 1]
    second = [r for r, t in zip(rows, times, strict=True) if t >= 2]
    assert [s["requests_total"] for s in run.steps] == [len(first), len(second)]
    assert run.steps[0]["end_s"] - run.steps[0]["steady_start_s"] == pytest.approx(0.5, abs=0.05)  # 1 s at 2x
    truth = {e["rid"]: e for e in ledger(emu.url)}
    for step, window_rows, start in ((0, first, 0.0), (1, second, 2.0)):
        mine = [r for r in run.records if r["step"] == step]
        anchor = run.steps[step]["steady_start_s"]
        assert sorted(r["prompt_seq"] for r in mine) == list(range(len(window_rows)))
        for rec in mine:
            row = window_rows[rec["prompt_seq"]]
            assert truth[rec["request_id"]]["prompt_tokens"] == row["input_length"]  # exact on completions too
            assert rec["scheduled_s"] == pytest.approx(anchor + (row["timestamp"] / 1000 - start) / 2, abs=1e-3)
    assert "trace window 2: (" in proc.stderr and "sends all" in proc.stderr


def test_rows_due_while_every_user_is_busy_are_dropped_counted_never_sent_late(tmp_path, emulator):
    trace = tmp_path / "trace.jsonl"
    trace.write_text("".join(json.dumps({"timestamp": 50 * k, "input_length": 40, "output_length": 8}) + "\n"
                             for k in range(30)))
    emu = emulator("baseline", speed=20, extra=["--fault-stall", "1", "--stall-s", "20"])  # every stream: 1 s
    out = tmp_path / "run"
    proc = run_locust(emu.url, out, "--api", "generate", "--trace", str(trace), "--max-in-flight", "2", timeout=90)
    assert proc.returncode == 0, proc.stderr[-3000:]
    run = read_run(out)
    (step,) = run.steps
    assert step["dropped"] + len(run.records) == 30 and step["dropped"] >= 20, step
    assert "dropped_requests" in step["flags"] and "low_rate" in step["flags"]
    assert max(r["start_s"] - r["scheduled_s"] for r in run.records) < 0.2  # dropped, never sent late instead

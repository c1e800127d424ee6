"""A chat run of a length split measures its chat template's prompt tokens and says so; other runs send nothing
but the ladder. The truth is the emulator's own template (a ChatML-like rendering counted at 4 characters a token)."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from specbench.analysis.records.load import load_run
from specbench.analysis.records.summary import summarize_run
from specbench.analysis.reporting.render import describe_run
from specbench.emulator.textmodel import prompt_tokens
from specbench.locustfiles.templateprobe import PROBE_TEXT
from tests.conftest import ledger, run_locust

QUICK = ("--api", "chat", "--ladder", "2", "--max-tokens", "8", "--min-requests", "6", "--min-step-time", "0.5",
         "--max-step-time", "20", "--step-ci", "0")


def _split(path: Path) -> Path:
    rows = [{"question_id": str(i), "category": "long", "sub_category": "general",
             "turns": [f"Summarise this passage number {i}: " + "the tide came in and went out again. " * 40],
             "source": "written-for-the-test", "src_id": str(i), "difficulty": "easy", "multiturn": False}
            for i in range(4)]
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist(rows), path)
    return path


def test_a_length_split_run_measures_the_template_and_says_so(tmp_path, emulator) -> None:
    emu = emulator("baseline", speed=20)
    data = _split(tmp_path / "throughput_8k" / "test.parquet")
    out = tmp_path / "run"
    proc = run_locust(emu.url, out, "--prompts", f"speed-bench:throughput-8k={data}", *QUICK)
    assert proc.returncode == 0, proc.stderr[-2000:]
    truth = prompt_tokens([{"role": "user", "content": PROBE_TEXT}]) - prompt_tokens(PROBE_TEXT)
    assert truth > 0
    meta = json.loads((out / "meta.json").read_text())
    assert meta["server"]["chat_template_tokens"] == truth
    records = [json.loads(line) for line in (out / "records.jsonl").read_text().splitlines()]
    probes = [e for e in ledger(emu.url) if e["max_new_tokens"] == 1]
    assert len(probes) == 2 and len(ledger(emu.url)) == len(records) + 2  # the probe's two, then only the ladder
    line = describe_run(summarize_run(load_run(out)))
    assert f"chat template +{truth} prompt tokens a request (measured)" in line


def test_other_sets_are_not_probed(tmp_path, emulator) -> None:
    emu = emulator("baseline", speed=20)
    out = tmp_path / "run"
    proc = run_locust(emu.url, out, *QUICK)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert json.loads((out / "meta.json").read_text())["server"]["chat_template_tokens"] is None
    records = (out / "records.jsonl").read_text().splitlines()
    assert len(ledger(emu.url)) == len(records)
    assert "chat template" not in describe_run(summarize_run(load_run(out)))

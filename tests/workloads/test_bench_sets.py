"""The field's standard sets (``locustfiles.benchsets``), each read from a small file written here in its
publisher's format (no dataset text is copied): prompts, categories, turns; a wrong or truncated file is one line
naming the file, the line or row, and the field; and MT-Bench's second turn asked, under ``--multi-turn``, as the
second turn of the same conversation after the server's real first answer."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from specbench.contract.rundir import read_run
from specbench.locustfiles.benchsets import DATA_ENV, bench_set_names
from specbench.locustfiles.prompts import PromptError, load_prompts
from tests.conftest import ledger, run_locust

QUESTIONS = [
    {"question_id": 81, "category": "writing", "turns": ["Write a note about tides.", "Now make it a haiku."]},
    {"question_id": 82, "category": "math", "turns": ["What is 12 times 7?", "And divided by 3?"],
     "reference": ["84", "28"]},
    {"question_id": 83, "category": "coding", "turns": ["Reverse a list in Python.", "Now in place."]},
]


def _jsonl(path: Path, rows: list[dict], *, gz: bool = False) -> Path:
    text = "".join(json.dumps(r) + "\n" for r in rows)
    path.parent.mkdir(parents=True, exist_ok=True)
    if gz:
        path.write_bytes(gzip.compress(text.encode()))
    else:
        path.write_text(text)
    return path


def _speed_parquet(path: Path, rows: list[dict]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    full = [{"question_id": str(r["question_id"]), "category": r["category"], "sub_category": "general",
             "turns": r["turns"], "source": "written-for-the-test", "src_id": str(i), "difficulty": "easy",
             "multiturn": len(r["turns"]) > 1} for i, r in enumerate(rows)]
    pq.write_table(pa.Table.from_pylist(full), path)
    return path


def test_mt_bench_keeps_categories_and_second_turns(tmp_path: Path) -> None:
    path = _jsonl(tmp_path / "question.jsonl", QUESTIONS)
    prompts = load_prompts(f"mt-bench={path}")
    assert prompts.name == "mt-bench" and prompts.source == f"mt-bench={path}"
    assert [p.id for p in prompts.prompts] == ["mt-bench-81", "mt-bench-82", "mt-bench-83"]
    assert prompts.category_counts() == {"coding": 1, "math": 1, "writing": 1}
    first = prompts.get("mt-bench-82")
    assert first.text == "What is 12 times 7?" and first.recorded_turns == ("And divided by 3?",)


def test_spec_bench_speed_bench_gsm8k_and_humaneval_read_their_publishers_formats(tmp_path: Path) -> None:
    spec = load_prompts(f"spec-bench={_jsonl(tmp_path / 'sb.jsonl', [*QUESTIONS, {'question_id': 161, 'category': 'translation', 'turns': ['Translate: bonjour']}])}")  # noqa: E501
    assert spec.categories() == ["coding", "math", "translation", "writing"]
    assert spec.get("spec-bench-161").recorded_turns == ()
    speed = load_prompts(f"speed-bench:throughput-8k={_speed_parquet(tmp_path / 'q.parquet', QUESTIONS)}")
    assert speed.name == "speed-bench:throughput-8k" and len(speed) == 3
    assert speed.get("speed-bench:throughput-8k-81").recorded_turns == ("Now make it a haiku.",)
    gsm = load_prompts(f"gsm8k={_jsonl(tmp_path / 'test.jsonl', [{'question': 'Two plus two?', 'answer': '#### 4'}])}")
    assert [(p.id, p.category, p.text) for p in gsm.prompts] == [("gsm8k-1", "gsm8k", "Two plus two?")]
    rows = [{"task_id": "HumanEval/0", "prompt": "def add(a, b):\n", "entry_point": "add"}]
    human = load_prompts(f"humaneval={_jsonl(tmp_path / 'HumanEval.jsonl.gz', rows, gz=True)}")
    assert [(p.id, p.text) for p in human.prompts] == [("HumanEval/0", "def add(a, b):\n")]


def test_a_bare_name_reads_from_the_data_folder_and_says_how_to_fetch_a_missing_set(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(DATA_ENV, str(tmp_path))
    _jsonl(tmp_path / "mt-bench" / "question.jsonl", QUESTIONS)
    _speed_parquet(tmp_path / "speed-bench" / "data" / "qualitative" / "test-00000-of-00001.parquet", QUESTIONS[:2])
    assert len(load_prompts("mt-bench")) == 3
    assert len(load_prompts("speed-bench:qualitative")) == 2
    with pytest.raises(PromptError) as info:
        load_prompts("gsm8k")
    text = str(info.value)
    assert "gsm8k: not found as" in text and "grade-school-math" in text and "--prompts gsm8k=PATH" in text
    assert set(bench_set_names()) >= {"mt-bench", "spec-bench", "speed-bench:qualitative", "gsm8k", "humaneval"}


@pytest.mark.parametrize(("rows", "where"), [
    ([{"question_id": 1, "category": "x"}], "line 1: field 'turns': expected a non-empty list"),
    ([QUESTIONS[0], {"question_id": 2, "category": "x", "turns": []}], "line 2: field 'turns'"),
    ([{"question_id": 1, "category": "", "turns": ["a"]}], "line 1: field 'category': expected a non-empty string"),
    ([{"category": "x", "turns": ["a"]}], "line 1: field 'question_id'"),
    ([QUESTIONS[0], QUESTIONS[0]], "line 2: field 'question_id': '81' again (first at"),
])
def test_a_wrong_question_file_names_the_line_and_field(tmp_path: Path, rows: list[dict], where: str) -> None:
    path = _jsonl(tmp_path / "q.jsonl", rows)
    with pytest.raises(PromptError) as info:
        load_prompts(f"mt-bench={path}")
    assert str(info.value).startswith(str(path)) and where in str(info.value), str(info.value)
    assert "\n" not in str(info.value)


def test_truncated_files_are_one_line_naming_the_file(tmp_path: Path) -> None:
    path = _jsonl(tmp_path / "q.jsonl", QUESTIONS)
    path.write_text(path.read_text()[:-25])  # cut inside the last line
    with pytest.raises(PromptError, match=r"q\.jsonl line 3: invalid JSON"):
        load_prompts(f"spec-bench={path}")
    packed = _jsonl(tmp_path / "HumanEval.jsonl.gz", [{"task_id": "T/0", "prompt": "x"}] * 50, gz=True)
    packed.write_bytes(packed.read_bytes()[:40])
    with pytest.raises(PromptError, match="cut short or damaged"):
        load_prompts(f"humaneval={packed}")
    parquet = _speed_parquet(tmp_path / "q.parquet", QUESTIONS)
    parquet.write_bytes(parquet.read_bytes()[:100])
    with pytest.raises(PromptError, match="not a readable Parquet file"):
        load_prompts(f"speed-bench:qualitative={parquet}")
    narrow = tmp_path / "narrow.parquet"
    pq.write_table(pa.Table.from_pylist([{"question_id": "1", "category": "x"}]), narrow)
    with pytest.raises(PromptError, match="field 'turns': missing"):
        load_prompts(f"speed-bench:qualitative={narrow}")
    with pytest.raises(PromptError, match="gsm8k=PATH"):
        load_prompts("gsm8k=")
    rows = [{"question": "q", "answer": ""}]
    with pytest.raises(PromptError, match="line 1: field 'answer'"):
        load_prompts(f"gsm8k={_jsonl(tmp_path / 'g.jsonl', rows)}")


def test_mt_bench_second_turn_follows_the_servers_first_answer(tmp_path: Path, emulator) -> None:
    emu = emulator("baseline", speed=10, extra=["--ledger-text"])
    path = _jsonl(tmp_path / "question.jsonl", QUESTIONS)
    out = tmp_path / "run"
    proc = run_locust(emu.url, out, "--api", "chat", "--prompts", f"mt-bench={path}", "--multi-turn", "2",
                      "--ladder", "1", "--max-tokens", "8", "--min-requests", "6", "--min-step-time", "0.5",
                      "--max-step-time", "20", "--step-ci", "0", timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    run = read_run(out)
    truth = {e["rid"]: e for e in ledger(emu.url)}
    by_id = {q["question_id"]: q for q in QUESTIONS}
    seconds = [r for r in run.records if r["status"] == "ok" and r["turn"] == 2]
    assert seconds
    firsts = {(r["conversation_id"]): r for r in run.records if r["turn"] == 1}
    for second in seconds:
        first = firsts[second["conversation_id"]]
        question = by_id[int(first["prompt_id"].removeprefix("mt-bench-"))]
        sent, asked = truth[first["request_id"]], truth[second["request_id"]]
        assert question["turns"][0] in sent["prompt_text"]
        # the first question, the server's own first answer, then MT-Bench's second question
        assert sent["output_text"] in asked["prompt_text"]
        assert asked["prompt_text"].rstrip().endswith(question["turns"][1])
        assert second["category"] == question["category"]

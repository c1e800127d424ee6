"""The per-category verdict against known truth: a Spec-Bench-format set run over the default ladder against an
emulated EAGLE-3 whose acceptance depends on the kind of text (eagle3-categories) and an uncapped baseline.

The truth per category and level is the emulator's own cost model for a workload of that category's prompts
alone; every interval the report prints must cover it, and the sentence must name as paying-then-losing exactly
the categories whose truth crosses 1 within the ladder.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from specbench.analysis.outputs import write_comparison_outputs
from specbench.analysis.records.load import load_run
from specbench.analysis.verdicts.compare import compare_runs
from specbench.emulator import costmodel
from specbench.emulator.profile import load_profile
from specbench.locustfiles.target import start_emulator_process
from tests.conftest import locust_cmd

LADDER = (1, 2, 5, 10, 30, 70, 100, 250)  # the default ladder
SPEED = 5.0
MAX_TOKENS = 32
MODEL_TOLERANCE = 1.04
# Written for this test (no dataset text), in Spec-Bench's question.jsonl shape. The words that set the
# emulator's acceptance: "def " (code), "Solve" (maths), "Translate" (translation); "qa" has none of them, and its
# questions were picked among 24 for draws near 0.8 in eagle3's 0.4-0.9 (0.79-0.83): its truth at C=1 is then 1.3x,
# not 1.17x, far enough above 1 for a table-wide interval to say so every time.
QUESTIONS = {
    "coding": [f"Complete this function so it returns the {w} of a list, with a docstring:\ndef {w}_of(items):"
               for w in ("sum", "mean", "median", "largest item", "shortest word", "count of evens")],
    "math_reasoning": [f"Solve step by step: a train leaves at {h} o'clock at {v} km/h; when has it gone {d} km?"
                       for h, v, d in ((1, 60, 150), (2, 80, 200), (3, 90, 45), (4, 70, 210), (5, 50, 75),
                                       (6, 120, 300))],
    "translation": [f"Translate into French, keeping the tone: '{s}'"
                    for s in ("The meeting moved to Thursday.", "Please water the plants.",
                              "Our train was late again.", "The museum opens at nine.",
                              "Bring a warm coat tonight.", "She finished the book in a day.")],
    "qa": [f"In two sentences, why does {t}?"
           for t in ("ice float", "the moon show phases", "rain fall in drops", "leaves change colour",
                     "a rainbow form", "thunder follow lightning")],
}


def _question_file(path: Path) -> Path:
    rows = [{"question_id": f"{cat}-{i}", "category": cat, "turns": [text]}
            for cat, texts in QUESTIONS.items() for i, text in enumerate(texts)]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def _truth(category: str, c: int) -> float:
    """The category's ratio in this mix, from the emulator's cost model (``emulator.costmodel``).

    Every step is shared by the whole batch, so a request's lifetime is its own steps (plus, from C=2, the one
    step each request waits to join) times the mix's step time: the category's token rate is the mix's, scaled by
    (mix steps + gap) / (its steps + gap). On the baseline every request takes a step a token, so the factor is 1
    there, and the ratio is the mix's ratio times the spec server's factor."""
    spec, base = load_profile("eagle3-categories"), load_profile("baseline-uncapped")
    mix = [p for texts in QUESTIONS.values() for p in texts]
    gap = 0.0 if c == 1 else 1.0

    def steps(prompts: list[str]) -> float:
        return sum(costmodel.expected_request_steps(spec, p, MAX_TOKENS) for p in prompts) / len(prompts) + gap

    mix_ratio = (costmodel.expected_throughput_for_prompts(spec, c, mix, MAX_TOKENS)
                 / costmodel.expected_throughput_for_prompts(base, c, mix, MAX_TOKENS))
    return mix_ratio * steps(mix) / steps(QUESTIONS[category])


@pytest.fixture(scope="module")
def comparison(tmp_path_factory: pytest.TempPathFactory):
    root = tmp_path_factory.mktemp("categories")
    questions = _question_file(root / "question.jsonl")
    args = ("--prompts", f"spec-bench={questions}", "--max-tokens", str(MAX_TOKENS), "--min-step-time", "8",
            "--max-step-time", "40", "--step-ci", "0", "--min-requests", "60")
    servers = {"base": start_emulator_process("baseline-uncapped", speed=SPEED),
               "spec": start_emulator_process("eagle3-categories", speed=SPEED)}
    try:  # both ladders at once: half the wall time, and each server has its own emulator
        procs = {name: subprocess.Popen(locust_cmd(emu.url, root / name, *args), stdout=subprocess.DEVNULL,
                                        stderr=subprocess.PIPE, text=True, cwd=root)
                 for name, emu in servers.items()}
        for proc in procs.values():
            _, err = proc.communicate(timeout=600)
            assert proc.returncode == 0, err[-3000:]
    finally:
        for emu in servers.values():
            emu.stop()
    found = compare_runs(load_run(root / "base"), load_run(root / "spec"))
    write_comparison_outputs(found, root / "report")
    return found, root / "report"


@pytest.mark.serial
def test_every_category_interval_covers_the_truth(comparison) -> None:
    found, _ = comparison
    verdict = found.by_category
    assert verdict is not None
    cells = {(cell.category, cell.target_c): cell for cell in verdict.cells}
    assert {c for _, c in cells} == set(LADDER)
    # The closed form is itself exact only to a few per cent (tests/emulator/test_emu_calibration.py bounds each
    # server's tok/s against it within -9% and +6%); here, where acceptance matches it to 1%, two runs put the
    # truth at most 2% outside an interval, at C=5 and 10. So each interval is widened by the model's 4% first.
    missed = [(cat, c, round(_truth(cat, c), 3), cell.low, cell.high) for (cat, c), cell in cells.items()
              if cell.low is not None and cell.high is not None
              and not cell.low / MODEL_TOLERANCE <= _truth(cat, c) <= cell.high * MODEL_TOLERANCE]
    assert not missed, missed
    # A category needs five request lifetimes of window a side for an interval: every level up to C=70 has them
    # here; at C=100 and 250 a spec request lives about 3 s at this speed and the report says the cells lack one.
    lacking = [(key, cell.note) for key, cell in cells.items() if cell.low is None and key[1] <= 70]
    assert not lacking, lacking
    assert all("too few requests" in (cell.note or "") for cell in cells.values() if cell.low is None)


@pytest.mark.serial
def test_the_sentence_names_exactly_the_categories_whose_truth_crosses_one(comparison) -> None:
    found, report = comparison
    verdict = found.by_category
    assert verdict is not None and verdict.sentence is not None
    crossing = {cat for cat in QUESTIONS if (_truth(cat, LADDER[0]) - 1) * (_truth(cat, LADDER[-1]) - 1) < 0}
    assert crossing == {"coding", "math_reasoning", "qa"}  # the profile's design: the test can fail either way
    said = {o.category for o in verdict.outcomes if o.kind == "crosses"}
    assert said == crossing, verdict.sentence
    assert verdict.sentence.startswith("Speculation pays for coding up to C=")
    assert "never for" in verdict.sentence and "translation" in verdict.sentence.split("never for")[1]
    text = (report / "report.md").read_text()
    assert "### Where speculation pays, per category" in text and "category\\_ratio.png" not in text
    assert (report / "category_ratio.png").stat().st_size > 1000
    data = json.loads((report / "comparison.json").read_text())
    assert data["by_category"]["sentence"] == verdict.sentence

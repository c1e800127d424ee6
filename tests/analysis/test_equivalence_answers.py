"""Which answers the equivalence check pairs: only those of requests that ran wholly inside their own step."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from specbench.analysis.verdicts.equivalence import run_answers
from specbench.contract.schema import RunData


def _rec(rid: str, step: int, c: int, seq: int, start: float, e2e: float) -> dict[str, Any]:
    return {"request_id": rid, "step": step, "target_c": c, "prompt_seq": seq, "status": "ok", "turn": 1,
            "start_s": start, "e2e_s": e2e, "answer_digest": f"ids:{rid}"}


def test_an_answer_still_in_flight_at_its_steps_end_is_not_paired():
    """The last C=1 request outlives its step: the C=4 users joined it, so it is no lone request's answer."""
    steps = [{"index": 0, "target_c": 1, "steady_start_s": 1.0, "end_s": 10.0},
             {"index": 1, "target_c": 4, "steady_start_s": 11.0, "end_s": 20.0}]
    records = [_rec("a", 0, 1, 0, 0.0, 2.0), _rec("b", 0, 1, 1, 2.0, 7.9), _rec("c", 0, 1, 2, 9.9, 0.5),
               _rec("d", 1, 4, 0, 10.5, 3.0)]
    run = RunData(Path("."), {}, records, steps)  # type: ignore[arg-type]
    answers = run_answers(run)
    assert sorted(answers[1]) == [0, 1], "the request ending at 10.4 > 10.0 is dropped; warm-up ones are kept"
    assert sorted(answers[4]) == [0]

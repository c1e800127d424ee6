"""The why line's load clause ("the loss under load is verify cost ...") compares two levels' decompositions, so
it speaks only where both runs measured the level's minimum of ok requests. In a demo cut short by its time
budget it once named draft quality for a gain at a level holding one spec request while the measured ratio fell
by half; a level one request short of its minimum must now stay silent, one at its minimum must speak."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from synthetic_runs import Level, Prompt, RunSpec, write_run

from specbench.analysis.records.load import load_run
from specbench.analysis.verdicts.compare import compare_runs

LEVELS = (1, 10)
BASE_TOK_S = (92.6, 457.2)
SPEC_TOK_S = (77.5, 239.6)  # the seed's ratios: 0.84 at C=1, 0.52 at C=10
PROMPTS = [Prompt(f"p{i}", "code", accept_length=2.0) for i in range(8)]


def _top_why(root: Path, spec_min_requests: int | None) -> tuple[str | None, int]:
    """The C=10 level's why line and the spec run's ok requests there, with the spec step's min_requests set."""
    base = RunSpec("baseline", [Level(c, t) for c, t in zip(LEVELS, BASE_TOK_S, strict=True)])
    extra = {} if spec_min_requests is None else {"min_requests": spec_min_requests}
    spec_levels = [Level(1, SPEC_TOK_S[0]), Level(10, SPEC_TOK_S[1], step_extra=extra)]
    spec = replace(base, label="spec", levels=spec_levels, prompts=PROMPTS, speculative="EAGLE3")
    base = replace(base, prompts=[replace(p, accept_length=None) for p in PROMPTS])
    comparison = compare_runs(load_run(write_run(root / "b", base)), load_run(write_run(root / "s", spec)),
                              n_boot=200)
    top = comparison.levels[-1]
    assert top.target_c == 10
    return top.why, top.spec.requests_ok


def test_load_clause_speaks_at_the_minimum_and_not_one_request_below(tmp_path: Path) -> None:
    why, ok = _top_why(tmp_path / "free", None)
    assert why is not None and "under load is verify cost, not draft quality" in why  # the pass cost rose
    at_min, _ = _top_why(tmp_path / "at", ok)
    assert at_min is not None and "under load is" in at_min
    short, _ = _top_why(tmp_path / "short", ok + 1)
    assert short is None or "under load is" not in short

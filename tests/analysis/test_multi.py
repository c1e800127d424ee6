"""Many configurations against one baseline, on synthetic runs whose throughput is exact at every level.

Curves are chosen so each of four configurations is best at one level; the crossing of two piecewise
log-linear curves is computed here from the same numbers, so the switch points have a known answer.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from synthetic_runs import Level, RunSpec, write_run

from specbench.analysis.cli import main as analysis_main
from specbench.analysis.outputs import write_comparison_outputs, write_outputs
from specbench.analysis.records.load import load_run
from specbench.analysis.verdicts.crossover import crossing_log_c
from specbench.analysis.verdicts.multi import compare_many
from specbench.analysis.verdicts.policy import Candidate, switching_policy

LEVELS = (1, 4, 16, 64)
CURVES = {"off": (100.0, 300.0, 600.0, 800.0), "s5": (200.0, 420.0, 560.0, 560.0),
          "s3": (180.0, 450.0, 640.0, 700.0), "s1": (150.0, 380.0, 680.0, 760.0)}


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("multi")
    return {name: write_run(root / name, RunSpec(name, [Level(c, t) for c, t in zip(LEVELS, tok, strict=True)],
                                                 speculative=None if name == "off" else "EAGLE3"))
            for name, tok in CURVES.items()}


def _many(runs: dict[str, Path]):
    return compare_many(load_run(runs["off"]), [(n, load_run(runs[n])) for n in ("s5", "s3", "s1")],
                        baseline_name="off")


def test_best_per_level_and_policy_switch_points(runs: dict[str, Path]) -> None:
    m = _many(runs)
    assert [lv.best for lv in m.levels] == ["s5", "s3", "s1", "off"]
    for lv in m.levels:
        tok = {n: CURVES[n][LEVELS.index(lv.target_c)] for n in CURVES}
        ranked = sorted(tok, key=tok.get, reverse=True)
        assert lv.runner_up == ranked[1]
        assert lv.best_ratio == pytest.approx(tok[ranked[0]] / tok[ranked[1]], rel=1e-6)
        assert lv.best_low is not None and lv.best_low <= lv.best_ratio <= lv.best_high
        for cl in lv.configs:
            assert cl.ratio == pytest.approx(tok[cl.name] / tok["off"], rel=1e-6)
    policy = m.policy
    assert policy.kind == "switch"
    assert [(s.from_name, s.to_name) for s in policy.switches] == [("s5", "s3"), ("s3", "s1"), ("s1", "off")]
    for s in policy.switches:
        i = LEVELS.index(s.below_c)
        a, b = CURVES[s.from_name], CURVES[s.to_name]
        want = crossing_log_c(LEVELS[i], a[i] / b[i], LEVELS[i + 1], a[i + 1] / b[i + 1])
        assert s.c == pytest.approx(want, rel=1e-6)
        assert s.c_low is not None and s.c_high is not None and s.c_low <= s.c <= s.c_high
    # the best single fixed choice: highest geometric-mean throughput over the levels
    geo = {n: sum(math.log(t) for t in CURVES[n]) for n in CURVES}
    assert policy.fixed == max(geo, key=geo.get)
    for p in policy.levels:
        i = LEVELS.index(p.target_c)
        assert p.policy_tok_s == pytest.approx(max(CURVES[n][i] for n in CURVES), rel=1e-6)
        assert p.fixed_tok_s == pytest.approx(CURVES[policy.fixed][i], rel=1e-6)
    assert policy.text.startswith("s5 below C≈") and "s1 to C≈" in policy.text and "off above" in policy.text


def test_policy_kinds_single_and_mixed() -> None:
    flat = {c: [Candidate("a", 2.0 * c), Candidate("b", 1.0 * c)] for c in (1, 2, 4)}
    single = switching_policy(flat)
    assert single.kind == "single" and single.fixed == "a" and not single.switches
    zigzag = {1: [Candidate("a", 2.0), Candidate("b", 1.0)], 2: [Candidate("a", 1.0), Candidate("b", 2.0)],
              4: [Candidate("a", 2.0), Candidate("b", 1.0)]}
    mixed = switching_policy(zigzag)
    assert mixed.kind == "mixed" and len(mixed.switches) == 2 and "repeat the runs" in mixed.text
    assert switching_policy({}).kind == "none"


def test_one_configuration_writes_the_two_run_report_unchanged(runs: dict[str, Path], tmp_path: Path) -> None:
    one = compare_many(load_run(runs["off"]), [("s3", load_run(runs["s3"]))], baseline_name="off")
    write_outputs(one, tmp_path / "via_many")
    write_comparison_outputs(one.pairs[0], tmp_path / "direct")
    for name in ("report.md", "comparison.json", "comparison.csv", "comparison.txt"):
        assert (tmp_path / "via_many" / name).read_text() == (tmp_path / "direct" / name).read_text(), name
    html = (tmp_path / "direct" / "report.html").read_text()
    assert html.count('src="data:image/png;base64,') == 5 and "<script" not in html  # 4 + the category heat map


def test_many_outputs_and_html_carry_everything_report_md_has(runs: dict[str, Path], tmp_path: Path) -> None:
    out = tmp_path / "out"
    code = analysis_main(["compare", str(runs["off"]), *(f"{n}={runs[n]}" for n in ("s5", "s3", "s1")),
                          "--baseline-name", "off", "--out", str(out)])
    assert code == 0
    data = json.loads((out / "comparison.json").read_text())
    assert data["kind"] == "multi_comparison" and [lv["best"] for lv in data["levels"]] == ["s5", "s3", "s1", "off"]
    assert len((out / "comparison.csv").read_text().splitlines()) == 1 + len(LEVELS) * len(CURVES)
    for name in ("s5", "s3", "s1"):
        assert (out / "pairs" / name / "report.html").exists()
    md = (out / "report.md").read_text()
    html = (out / "report.html").read_text()
    assert html.count('src="data:image/png;base64,') == 2
    # #61: the ratios with their intervals sit beside the verdict, before the settings and the tables
    assert md.index("## Verdict") < md.index("](throughput_vs_c.png)") < md.index("## Runs") < md.index("## Policy")
    assert md.index("## Plots") < md.index("](ratio_heatmap.png)")
    for line in md.splitlines():  # every table row's cells appear in the HTML, in order
        if line.startswith("| ") and "---" not in line:
            cells = [c.strip() for c in line.strip("|").split(" | ")]
            row = html.split("<tr>")
            assert any(all(c.replace("&", "&amp;").replace("<", "&lt;") in r for c in cells if "`" not in c)
                       for r in row), line


def test_names_must_be_unique(runs: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    code = analysis_main(["compare", str(runs["off"]), f"a={runs['s5']}", f"a={runs['s3']}"])
    assert code == 2 and "given twice" in capsys.readouterr().err


def test_switch_takes_a_fitted_crossing_beside_the_segment_boundary() -> None:
    """Dense noisy levels: the winners change between C=12 and 13, but the line fitted over all six levels
    crosses 1 between 13 and 14. The switch point is that fitted crossing, with its band, not the boundary's
    midpoint without one."""
    ratios = {10: 1.16, 11: 1.10, 12: 1.06, 13: 0.99, 14: 0.982, 15: 0.95}
    spread = (0.99, 1.01, 0.995, 1.005, 0.998, 1.002, 0.993, 1.007)
    table = {c: [Candidate("a", 100.0 * r, tuple(100.0 * r * s for s in spread)),
                 Candidate("b", 100.0, tuple(100.0 * s for s in reversed(spread)))] for c, r in ratios.items()}
    policy = switching_policy(table, n_boot=400)
    assert policy.kind == "switch" and policy.segments == (("a", 10, 12), ("b", 13, 15))
    (s,) = policy.switches
    assert s.fitted == 6 and 13 < s.c < 14
    assert s.c_low is not None and s.c_high is not None and s.c_low <= s.c <= s.c_high

"""compare --out: report.md, CSV, versioned JSON and PNG plots that really are images."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import pytest
from matplotlib.image import imread
from synthetic_runs import SEED_RATIOS, small_pair, write_run

from specbench.analysis.outputs import write_comparison_outputs, write_summary_outputs
from specbench.analysis.records.load import load_run
from specbench.analysis.records.summary import summarize_run
from specbench.analysis.reporting.decompose_report import DECOMPOSITION_FIELDS
from specbench.analysis.reporting.serialize import COMPARISON_SCHEMA, LEVEL_FIELDS, STEP_FIELDS, SUMMARY_SCHEMA
from specbench.analysis.verdicts.compare import Comparison, compare_runs
from specbench.analysis.verdicts.crossover import crossing_log_c

PLOTS = ("throughput_vs_c.png", "ratio_vs_c.png", "latency_vs_c.png", "categories.png", "category_ratio.png")
DECOMPOSITION_PLOTS = ("decomposition_vs_c.png", "acceptance_hist.png")  # where levels have a decomposition


@pytest.fixture(scope="module")
def out_dir(seed_comparison: Comparison, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("out")
    written = write_comparison_outputs(seed_comparison, out)
    assert {p.name for p in written} == {"comparison.txt", "report.md", "report.html", "comparison.csv",
                                         "decomposition.csv", "equivalence.csv", "comparison.json", *PLOTS,
                                         *DECOMPOSITION_PLOTS}  # no answers kept: no equivalence plot
    return out


def test_no_energy_plot_without_gpu_metrics(out_dir: Path) -> None:
    # #40: the seed runs measured no energy: no energy_vs_c.png (the set of files above), nothing in the reports.
    assert not (out_dir / "energy_vs_c.png").exists()
    assert "energy_vs_c" not in (out_dir / "report.md").read_text()
    assert "GPU energy per output token" not in (out_dir / "report.html").read_text()


@pytest.mark.parametrize("name", PLOTS)
def test_plot_is_a_real_picture(out_dir: Path, name: str) -> None:
    image = imread(out_dir / name)
    height, width = image.shape[:2]
    assert height >= 300 and width >= 500
    assert float(np.std(image[..., :3])) > 0.02  # not one flat colour


def test_comparison_json_has_a_schema_version_and_documented_fields(out_dir: Path) -> None:
    data = json.loads((out_dir / "comparison.json").read_text())
    assert data["schema"] == COMPARISON_SCHEMA and data["kind"] == "comparison"
    assert set(data) == {"schema", "kind", "method", "baseline", "spec", "levels", "verdict",
                         "recommendation", "slo", "equivalence", "decomposition", "categories", "warnings",
                         "saturation", "skipped", "energy", "by_category"}
    assert {cell["category"] for cell in data["by_category"]["cells"]} == {"code", "math", "qa", "writing"}
    assert data["equivalence"]["kind"] == "not_checked"  # the seed runs kept no answers
    assert data["energy"] is None and data["levels"][0]["energy_ratio"] is None  # no --gpu-metrics telemetry
    assert tuple(data["levels"][0]) == LEVEL_FIELDS
    assert tuple(data["decomposition"]["levels"][0])[:-2] == DECOMPOSITION_FIELDS
    assert data["slo"] is None  # closed-loop runs started without --slo
    assert tuple(data["baseline"]["steps"][0]) == STEP_FIELDS
    assert [f"{lv['ratio']:.2f}x" for lv in data["levels"]] == list(SEED_RATIOS)
    assert data["verdict"]["kind"] == "baseline_wins_all"
    assert data["recommendation"]["kind"] == "keep_off"
    assert data["method"]["seed"] == 0 and data["method"]["n_boot"] == 2000
    assert len(data["baseline"]["steps"]) == 8


def test_comparison_csv_has_one_row_per_level_with_the_json_fields(out_dir: Path) -> None:
    with (out_dir / "comparison.csv").open() as fh:
        rows = list(csv.DictReader(fh))
    assert [int(r["target_c"]) for r in rows] == [1, 2, 5, 10, 30, 70, 100, 250]
    assert tuple(rows[0]) == LEVEL_FIELDS


def test_report_holds_verdict_tables_warnings_and_plots(out_dir: Path) -> None:
    report = (out_dir / "report.md").read_text()
    assert "Baseline wins at every tested level; ratio 0.84x at C=1 falling to 0.42x at C=30" in report
    assert "| 30 | 299.5 | 711.0 | 0.42x |" in report
    assert "## Warnings" in report and "## Per category" in report
    for name in PLOTS:
        assert f"]({name})" in report


def test_summary_outputs_for_one_run(tmp_path: Path) -> None:
    base, _ = small_pair()
    summary = summarize_run(load_run(write_run(tmp_path / "run", base)))
    written = write_summary_outputs(summary, tmp_path / "out")
    assert {p.name for p in written} == {"summary.txt", "summary.json", "summary.csv", "throughput_vs_c.png",
                                         "latency_vs_c.png"}
    data = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert data["schema"] == SUMMARY_SCHEMA and data["kind"] == "run_summary"
    assert [s["throughput_tok_s"] for s in data["steps"]] == pytest.approx([100.0, 180.0, 320.0])


def test_a_crossing_pair_end_to_end(tmp_path: Path) -> None:
    base, spec = small_pair()
    for level, factor in zip(spec.levels, (1.25, 1.1, 0.8), strict=True):
        level.tok_s = level.tok_s / 0.8 * factor  # spec wins at C=1 and 2, loses at C=4
    comparison = compare_runs(load_run(write_run(tmp_path / "b", base)), load_run(write_run(tmp_path / "s", spec)))
    (x,) = comparison.verdict.crossovers
    assert comparison.verdict.kind == "crossover" and (x.below_c, x.above_c) == (2, 4)
    assert x.c == pytest.approx(crossing_log_c(2, 1.1, 4, 0.8), rel=1e-3)
    rec = comparison.recommendation
    assert rec.kind == "spec_below" and [s.uses for s in rec.levels] == ["spec", "spec", "baseline"]
    paths = write_comparison_outputs(comparison, tmp_path / "out")
    assert float(np.std(imread(next(p for p in paths if p.name == "ratio_vs_c.png"))[..., :3])) > 0.02


def test_a_run_without_steps_still_writes_every_file(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "records.jsonl").write_text("")
    comparison = compare_runs(load_run(empty), load_run(empty))
    assert comparison.verdict.kind == "no_levels" and comparison.recommendation.kind == "none"
    written = write_comparison_outputs(comparison, tmp_path / "out")
    # report.html, decomposition.csv and equivalence.csv (headers only) included; no decomposition plots without
    # levels, no equivalence plot without answers
    assert len(written) == 11 and all(p.stat().st_size > 0 for p in written)
    assert (tmp_path / "out" / "comparison.csv").read_text().startswith("target_c,")


def test_report_leads_with_the_verdict_and_its_picture(out_dir: Path) -> None:
    # #61: the ratio plot with its intervals answers the question, so it sits beside the verdict, before the run
    # settings, the recommendation's tables and both runs' step tables; the other plots stay at the end.
    report = (out_dir / "report.md").read_text()
    headings = [line for line in report.splitlines() if line.startswith("## ")]
    assert headings[0] == "## Verdict"
    ratio = report.index("](ratio_vs_c.png)")
    assert report.index("## Verdict") < ratio < report.index(headings[1])
    assert ratio < report.index("**Baseline**") < report.index("## Steps:") < report.index("](throughput_vs_c.png)")
    assert report.count("](ratio_vs_c.png)") == 1
    page = (out_dir / "report.html").read_text()
    verdict_box = page[page.index('<section class="verdict"><h2 id="verdict">'):]
    verdict_box = verdict_box[:verdict_box.index("</section>")]
    assert 'alt="Spec / baseline throughput ratio' in verdict_box  # the picture is inside the verdict's box
    assert page.index('alt="Spec / baseline throughput ratio') < page.index('id="steps-')

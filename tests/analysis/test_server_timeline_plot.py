"""server_timeline.png reads at a glance: step names never collide with each other, the legend or the titles;
the x axis says what it counts and in which unit; open-loop steps are named by rate. The PNG is written into the
test's temporary directory, so a failing layout can be looked at."""

from __future__ import annotations

import dataclasses
import re
from itertools import combinations

from matplotlib.backends.backend_agg import FigureCanvasAgg

from specbench.analysis import load_run
from specbench.analysis.charts.server_plots import label_rows, step_label, timeline_figure
from specbench.analysis.records.summary import summarize_run
from specbench.analysis.reporting.render import server_section
from tests.analysis.synthetic_runs import Level, RunSpec, write_run

# long windows at C=1-2, then six short ones close together: where names used to run into each other
LEVELS = ((1, 100.0, 150), (2, 180.0, 150), (4, 320.0, 2), (8, 500.0, 2), (16, 600.0, 2), (32, 700.0, 2),
          (64, 760.0, 2), (128, 780.0, 2))

STEP_NAME = re.compile(r"^(C=\d+|[\d.]+ req/s)$")


def _seed_summaries(tmp_path):
    out = []
    for label, factor in (("baseline", 1.0), ("spec", 0.5)):
        # server_counter_factor: a server_metrics.jsonl with a running series, so every window is drawn
        spec = RunSpec(label, [Level(c, t * factor, tokens=8, window_requests=w) for c, t, w in LEVELS],
                       server_counter_factor=1.0)
        out.append(summarize_run(load_run(write_run(tmp_path / spec.label, spec)), name=spec.label))
    return out


def test_step_names_legend_and_titles_never_overlap_and_the_x_axis_has_a_unit(tmp_path):
    summaries = _seed_summaries(tmp_path)
    fig = timeline_figure(summaries)
    canvas = FigureCanvasAgg(fig)
    fig.savefig(tmp_path / "server_timeline.png")  # the screenshot to look at
    renderer = canvas.get_renderer()
    names = [t for ax in fig.axes for t in ax.texts if STEP_NAME.match(t.get_text())]
    assert len(names) == 2 * len(LEVELS), [t.get_text() for t in names]  # every window, in both runs
    boxes = [t.get_window_extent(renderer) for t in names]
    others = [fig.legends[0].get_window_extent(renderer)]
    others += [ax.title.get_window_extent(renderer) for ax in fig.axes if ax.get_title()]
    others += [ax._left_title.get_window_extent(renderer) for ax in fig.axes if ax.get_title(loc="left")]
    for (i, a), (j, b) in combinations(enumerate(boxes), 2):
        assert not a.overlaps(b), (names[i].get_text(), names[j].get_text())
    for box, text in zip(boxes, names, strict=True):
        assert not any(box.overlaps(o) for o in others), text.get_text()
        assert box.x0 >= 0 and box.x1 <= fig.bbox.x1 and box.y1 <= fig.bbox.y1, text.get_text()
    xlabels = [ax.get_xlabel() for ax in fig.axes if ax.get_xlabel()]
    assert xlabels and "(s)" in xlabels[-1]


def test_names_move_up_a_row_only_where_they_would_collide():
    assert label_rows([0.0, 0.5], [0.1, 0.1]) == [0, 0]
    assert label_rows([0.0, 0.05, 0.08, 0.5], [0.1, 0.1, 0.1, 0.1]) == [0, 1, 2, 0]


def test_open_loop_steps_are_named_and_tabled_by_rate(tmp_path):
    summary = _seed_summaries(tmp_path)[0]
    rates = [dataclasses.replace(r, target_c=0, target_rate=float(2 ** i)) for i, r in enumerate(summary.rows)]
    open_loop = dataclasses.replace(summary, rows=rates)
    assert [step_label(r) for r in rates[:3]] == ["1 req/s", "2 req/s", "4 req/s"]
    table = "\n".join(server_section(open_loop))
    header = table.splitlines()[2].split("  ")
    assert "rate req/s" in table and "C" not in [h.strip() for h in header], table
    closed = "\n".join(server_section(summary))
    assert " C " in closed.splitlines()[2] + " "

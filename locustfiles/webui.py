"""The web UI's Tokens tab: live tokens/s and per-step figures, its CSV, and the run's report once stopped.

Served by Locust's own Flask app (``environment.web_ui.app``) through the React UI's extension points: the tab
and its columns are ``extended_tabs`` / ``extended_tables`` template arguments, its rows ride along in the
``/stats/requests`` JSON the UI polls every 2 s (``extended_stats``), and the CSV and report links are
``extended_csv_files`` (the "Download Data" tab). The figures are ``analysis.reporting.live``'s, computed on the process
that serves the UI: the master, which receives every record by message (``shapes.collector``).
"""

from __future__ import annotations

import html
import json
import logging
import time
from pathlib import Path
from typing import Any

import gevent
from flask import Response, request, send_from_directory
from locust.env import Environment
from locust.runners import STATE_CLEANUP, STATE_RUNNING, STATE_SPAWNING, STATE_STOPPING

from specbench.analysis.reporting.live import (
    OpenStep,
    TabRow,
    closing_row,
    final_row,
    live_row,
    tab_cells,
    tab_csv,
    tab_structure,
)
from specbench.contract.rundir import REPORT_DIR, RunDir
from specbench.contract.schema import RunFormatError, StepRecord

log = logging.getLogger("specbench.webui")

TAB_KEY = "tokens"
REFRESH_S = 1.0  # live figures are recomputed at most this often, however many browsers poll
REPORT_PLOTS = ("throughput_vs_c.png", "latency_vs_c.png")
# Locust's page polls /stats/requests only while the state it last read is spawning or running: an answer read
# in the moment between Stop and stopped (cleanup, stopping) leaves the page on that state, with no New button,
# until reloaded. Such a read waits for the runner to settle: at most Locust's --stop-timeout (the users finishing
# their requests) plus this long.
SETTLE_S = 10.0
SETTLE_POLL_S = 0.05
PASSING_STATES = frozenset({STATE_CLEANUP, STATE_STOPPING})


class TokensTab:
    """The tab's rows for the current run: one final row per closed step, plus the open step's live row."""

    def __init__(self, env: Environment, hooks: Any) -> None:
        self.env = env
        # locustfiles.coordinatorhooks.CoordinatorHooks: the shape, its collector and the run's label
        self.hooks = hooks
        self.final: list[TabRow] = []
        self.run_dir: Path | None = None
        self.stopped_run: Path | None = None  # the last run whose directory was ended
        self._cache: tuple[float, list[TabRow]] | None = None
        self._reports: dict[Path, str] = {}

    @property
    def running(self) -> bool:
        runner = self.env.runner
        return runner is not None and runner.state in (STATE_RUNNING, STATE_SPAWNING)

    def run_started(self, run_dir: Path) -> None:
        self.final, self.run_dir, self._cache = [], run_dir, None

    def run_ended(self, run_dir: Path) -> None:
        self.stopped_run, self._cache = run_dir, None
        self._reports.pop(run_dir, None)

    def step_closed(self, step: StepRecord) -> None:
        shape = self.hooks.shape
        if shape is None:
            return
        records = shape.collector.overlapping(step["start_s"], step["end_s"])  # whichever step sent them (#61)
        self.final.append(final_row(self._name(), step, records))
        self._cache = None

    def rows(self) -> list[TabRow]:
        now = time.time()
        if self._cache is not None and now - self._cache[0] < REFRESH_S:
            return self._cache[1]
        rows = list(self.final)
        rows.extend(self._closing())
        live = self._live(now)
        if live is not None:
            rows.append(live)
        self._cache = (now, rows)
        return rows

    def _closing(self) -> list[TabRow]:
        shape = self.hooks.shape
        if shape is None or not self.running:
            return []
        return [closing_row(OpenStep(b.index, b.target_c, b.min_requests, b.start_s, b.steady_start_s))
                for b in shape.books if b.end_s is not None and not b.closed]

    def _live(self, now: float) -> TabRow | None:
        shape = self.hooks.shape
        book = shape.open_step() if shape is not None else None
        if book is None or not self.running:
            return None
        collector = shape.collector
        step = OpenStep(book.index, book.target_c, book.min_requests, book.start_s, book.steady_start_s)
        return live_row(self._name(), step, collector.overlapping(book.start_s, now), now=now,
                        oldest_in_flight_start=collector.oldest_in_flight_start(),
                        in_flight=collector.sending())

    def _name(self) -> str:
        return self.run_dir.name if self.run_dir is not None else "run"

    def report_html(self, base: str) -> str:
        """The last stopped run's summary (text and plots), written into RUN_DIR/report/ the first time."""
        run_dir = self.stopped_run
        if run_dir is None:
            return _page("No run has stopped yet", "<p>Start a run; its report appears here once it has stopped.</p>")
        if self.running:
            return _page("A run is going", "<p>The report appears once the run has stopped. "
                         f"The last stopped run was <code>{html.escape(str(run_dir))}</code>.</p>")
        if run_dir not in self._reports:
            self._reports[run_dir] = _render_report(run_dir, base)
        return self._reports[run_dir]


def wait_settled(env: Environment, limit_s: float) -> None:
    """Yield (gevent) while the runner passes from Stop to stopped, so the page never reads a passing state."""
    deadline = time.monotonic() + limit_s
    while env.runner is not None and env.runner.state in PASSING_STATES and time.monotonic() < deadline:
        gevent.sleep(SETTLE_POLL_S)


def install_settled_state(app: Any, env: Environment) -> None:
    """The page's state reads (``/stats/requests``) wait through the passage from Stop to stopped."""

    @app.before_request
    def _settle_state() -> None:
        if request.path.endswith("/stats/requests"):
            wait_settled(env, float(env.stop_timeout or 0) + SETTLE_S)


def _render_report(run_dir: Path, base: str) -> str:
    # matplotlib and the rest of the analysis only when a report is asked for
    from specbench.analysis.outputs import write_summary_outputs
    from specbench.analysis.records.load import load_run
    from specbench.analysis.records.summary import summarize_run
    from specbench.analysis.reporting.render import render_summary_table

    try:
        summary = summarize_run(load_run(run_dir))
    except (RunFormatError, OSError) as exc:
        return _page("No report", f"<p>{html.escape(str(exc))}</p>")
    write_summary_outputs(summary, RunDir(run_dir).report_dir)
    images = "".join(f'<p><img src="{base}/tokens/report/{name}" alt="{name}"></p>' for name in REPORT_PLOTS)
    body = (f"<p>Run directory <code>{html.escape(str(run_dir))}</code>; these files are in its "
            f"<code>{REPORT_DIR}/</code> folder. Same as <code>python -m specbench.analysis summarize "
            f"{html.escape(str(run_dir))}</code>.</p><pre>{html.escape(render_summary_table(summary))}</pre>{images}")
    return _page(f"Report: {summary.name}", body)


def _page(title: str, body: str) -> str:
    style = "body{font-family:sans-serif;margin:2em}pre{font-size:13px;background:#f4f4f4;padding:1em;overflow:auto}"
    return (f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
            f"<style>{style}</style></head><body><h1>{html.escape(title)}</h1>{body}</body></html>")


def install_tokens_tab(env: Environment, hooks: Any) -> TokensTab:
    """Add the Tokens tab, its CSV and the report page to the web UI of ``env`` (the master or local runner)."""
    ui = env.web_ui
    assert ui is not None and ui.app is not None
    tab = TokensTab(env, hooks)
    if hooks.shape is not None:
        hooks.shape.on_step_closed.append(tab.step_closed)
    options = env.parsed_options
    base = str(getattr(options, "web_base_path", "") or "").rstrip("/")
    ui.template_args.update({
        "extended_tabs": [{"title": "Tokens", "key": TAB_KEY}],
        "extended_tables": [{"key": TAB_KEY, "structure": tab_structure()}],
        "extended_csv_files": [
            {"href": f"{base}/tokens/csv", "title": "Tokens tab (CSV)"},
            {"href": f"{base}/tokens/report", "title": "Report: summary of the last stopped run (text and plots)"},
        ],
    })
    app = ui.app

    install_settled_state(app, env)

    @app.after_request
    def _inject_rows(resp: Response) -> Response:
        if not request.path.endswith("/stats/requests") or not resp.is_json:
            return resp
        try:
            data = resp.get_json()
            data["extended_stats"] = [{"key": TAB_KEY, "data": tab_cells(tab.rows())}]
            resp.set_data(json.dumps(data))
        except Exception:  # the tab must never take Locust's own statistics view down with it
            log.exception("Tokens tab: could not compute the live figures")
        return resp

    @app.route(f"{base}/tokens/csv")
    @ui.auth_required_if_enabled
    def _tokens_csv() -> Response:
        return Response(tab_csv(tab.rows()), mimetype="text/csv",
                        headers={"Content-Disposition": "attachment; filename=specbench-tokens.csv"})

    @app.route(f"{base}/tokens/report")
    @ui.auth_required_if_enabled
    def _tokens_report() -> Response:
        return Response(tab.report_html(base), mimetype="text/html")

    @app.route(f"{base}/tokens/report/<name>")
    @ui.auth_required_if_enabled
    def _tokens_report_plot(name: str) -> Response:
        if name not in REPORT_PLOTS or tab.stopped_run is None:
            return Response("not found", status=404)
        return send_from_directory(RunDir(tab.stopped_run).report_dir.resolve(), name)

    return tab

"""The web UI's Tokens tab in headless Chromium: a fixed-users run and a ladder run, started from the form.

Real components only: the emulator as a server process, Locust with its web UI as a process, Debian's Chromium
driven by Playwright (its driver only; the browser is /usr/bin/chromium). Checks that the tab appears, that its
live "tok/s last 10 s" agrees with the emulator's own ledger over the period the tab names, that every finished
step's row is the row ``python -m specbench.analysis summarize`` prints for the same run directory, and that the
report page shows that summary and its plots once the run has stopped.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import requests

from specbench.launch import free_port
from tests.conftest import LOCUSTFILE, ledger, wait_answering, wait_until

CHROMIUM = shutil.which("chromium")
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync"]
USERS = 4
LADDER = [1, 3]
# The tab's rows come from the records; summarize also reads the run's /metrics samples, whose checks show in the
# report only (README, Tokens tab). Seen once beside another test: server_token_gap at -2.0% on a 1 s span.
SERVER_SIDE_FLAGS = {"server_token_gap"}
SUMMARY_HEADERS = ["step", "C", "achieved C", "ok/total", "tok/s", "tok/s 95% CI", "per-req tok/s", "pct reqs",
                   "TTFT p50/p99 ms",
                   "ITL p50/p99 ms", "TPOT p50/p99 ms", "latency avg/p50/p99 s", "accept len", "flags"]


def _need_browser() -> Any:
    """Playwright's sync API pointed at Debian's Chromium; skip without them, but fail under CI."""
    missing = None if CHROMIUM else "chromium is not installed (apt-get install -y chromium)"
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        missing = missing or "playwright is not installed (pip install -e '.[dev]')"
    if missing:
        if os.environ.get("CI", "").strip().lower() == "true":
            pytest.fail(f"CI=true but {missing}")
        pytest.skip(missing)
    return sync_playwright


def _epoch(clock: str, near: float) -> float:
    """'HH:MM:SS.ss' local time (as the tab shows it) -> epoch seconds, on the day that puts it nearest ``near``."""
    h, m, s = clock.split(":")
    base = dt.datetime.fromtimestamp(near).replace(hour=int(h), minute=int(m), second=0, microsecond=0)
    t = base.timestamp() + float(s)
    return min((t - 86400, t, t + 86400), key=lambda c: abs(c - near))


def _ledger_tok_s(entries: list[dict[str, Any]], t0: float, t1: float) -> float:
    """Output tokens the emulator wrote in [t0, t1) / (t1 - t0): the first token at first_token_s, the rest
    spread evenly up to finished_s (the emulator decodes at a steady pace within a request)."""
    total = 0.0
    for e in entries:
        n = e.get("completion_tokens") or 0
        first, end = e.get("first_token_s"), e.get("finished_s")
        if e.get("status") != 200 or n < 1 or first is None or end is None:
            continue
        total += 1.0 if t0 <= first < t1 else 0.0
        if n > 1 and end > first:
            overlap = max(0.0, min(end, t1) - max(first, t0))
            total += (n - 1) * overlap / (end - first)
    return total / (t1 - t0)


def _tab_rows(page: Any) -> list[dict[str, str]]:
    """The Tokens table as the browser renders it: one dict per row, keyed by column title."""
    return page.evaluate("""() => {
        const table = document.querySelector('table');
        if (!table) return [];
        const heads = [...table.querySelectorAll('thead th')].map(th => th.innerText.trim());
        return [...table.querySelectorAll('tbody tr')].map(tr =>
            Object.fromEntries([...tr.querySelectorAll('td')].map((td, i) => [heads[i], td.innerText.trim()])));
    }""")


def _wait_rows(page: Any, check: Any, timeout: float, what: str) -> list[dict[str, str]]:
    rows: list[dict[str, str]] = []

    def shown() -> list[dict[str, str]]:
        rows[:] = _tab_rows(page)
        return rows if check(rows) else []

    return wait_until(shown, timeout_s=timeout, poll_s=0.5, sleep=lambda s: page.wait_for_timeout(s * 1000),
                      what=lambda: f"the Tokens tab to show {what}; last rows: {rows}")


def _summarize_rows(run_dir: Path) -> list[dict[str, str]]:
    """``python -m specbench.analysis summarize RUN_DIR`` as printed, parsed back into cells by column."""
    out = subprocess.run([sys.executable, "-m", "specbench.analysis", "summarize", str(run_dir)], capture_output=True,
                         text=True, timeout=60, check=True).stdout
    lines = out.splitlines()
    head = next(i for i, line in enumerate(lines) if line.startswith("step "))
    rows = []
    for line in lines[head + 2:]:
        if not line.strip():
            break
        cells = re.split(r"\s{2,}", line.strip())
        row = dict(zip(SUMMARY_HEADERS, cells + [""] * (len(SUMMARY_HEADERS) - len(cells)), strict=True))
        row["flags"] = ",".join(f for f in row["flags"].split(",") if f and f not in SERVER_SIDE_FLAGS)
        rows.append(row)
    return rows


def _start_from_form(page: Any, mode: str, users: int) -> None:
    """Fill the Start form as a person would: users, ramp-up, and the load mode under Custom parameters."""
    page.fill("input[name=userCount]", str(users))
    page.fill("input[name=spawnRate]", str(users))
    page.get_by_text("Custom parameters").click()
    page.select_option("select[name=loadMode]", mode)
    page.get_by_role("button", name="Start").click()


def _run_dirs(root: Path) -> dict[str, Path]:
    found = {}
    for meta_file in sorted(root.glob("runs/*/meta.json")):
        meta = json.loads(meta_file.read_text())
        found[meta["settings"]["load_mode"]] = meta_file.parent
    return found


def test_tokens_tab_live_figures_match_the_ledger_and_final_rows_match_summarize(tmp_path, emulator):
    sync_playwright = _need_browser()
    emu = emulator("baseline", speed=2)
    port = free_port()
    cmd = [sys.executable, "-m", "locust", "-f", str(LOCUSTFILE), "--web-host", "127.0.0.1", "--web-port", str(port),
           "--host", emu.url, "--label", "ui", "--max-tokens", "64", "--ladder", ",".join(map(str, LADDER)),
           "--min-requests", "8", "--min-step-time", "2", "--max-step-time", "30", "--step-ci", "0"]
    log = (tmp_path / "locust.log").open("w")
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, cwd=tmp_path)
    base = f"http://127.0.0.1:{port}"
    try:
        wait_answering(base + "/", timeout_s=30, what="the web UI")
        with sync_playwright() as pw:
            browser = pw.chromium.launch_persistent_context(
                str(tmp_path / "chromium-profile"), executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS,
                viewport={"width": 1800, "height": 700})
            page = browser.new_page()
            page.goto(base + "/")

            # A fixed number of users, started from the form; the tab shows its live figures.
            _start_from_form(page, "users", USERS)
            page.get_by_role("tab", name="Tokens").click()
            live = _wait_rows(page, lambda rows: rows and rows[-1]["state"] == "measuring" and
                              _span_s(rows[-1]["last 10 s"]) >= 8.0, 60, "10 s of measured live figures")[-1]
            page.screenshot(path=str(tmp_path / "tokens-tab-live.png"))
            assert live["C"] == str(USERS) and live["in flight"] == str(USERS)
            t0, t1 = (_epoch(c, time.time()) for c in live["last 10 s"].split("-"))
            truth = _ledger_tok_s(ledger(emu.url), t0, t1)
            shown = float(live["tok/s last 10 s"])
            print(f"live tok/s last 10 s: tab {shown:.1f}, emulator ledger {truth:.1f} ({shown / truth - 1:+.2%})")
            assert truth > 0 and abs(shown / truth - 1) < 0.05, (shown, truth, live)

            # Stop ends the run directory; its one step is summarised like any ladder step.
            page.get_by_role("button", name="Stop").click()
            fixed_rows = _wait_rows(page, lambda rows: rows and rows[-1]["state"] == "final", 30, "the final row")
            fixed_dir = _wait_for_dir(tmp_path, "users")
            assert _strip(fixed_rows) == _summarize_rows(fixed_dir)
            meta = json.loads((fixed_dir / "meta.json").read_text())
            assert meta["partial"] is False and meta["ended_s"] is not None and meta["ladder"] == [USERS]

            # A new Start runs the ladder into a new run directory; each finished step gets summarize's row.
            page.get_by_role("button", name="New").click()
            _start_from_form(page, "ladder", 1)
            page.get_by_role("tab", name="Tokens").click()
            ladder_rows = _wait_rows(page, lambda rows: len(rows) == len(LADDER) and
                                     all(r["state"] == "final" for r in rows), 90, "every ladder step's final row")
            page.screenshot(path=str(tmp_path / "tokens-tab-ladder.png"))
            ladder_dir = _wait_for_dir(tmp_path, "ladder")
            assert ladder_dir != fixed_dir
            assert [r["C"] for r in ladder_rows] == [str(c) for c in LADDER]
            assert _strip(ladder_rows) == _summarize_rows(ladder_dir)
            assert json.loads((ladder_dir / "meta.json").read_text())["partial"] is False

            # The CSV and the report are linked from Download Data; the report is the summary with its plots.
            csv_text = requests.get(base + "/tokens/csv", timeout=10).text
            assert csv_text.splitlines()[0].startswith("state,in_flight,recent_tok_s")
            assert len(csv_text.splitlines()) == 1 + len(LADDER)
            page.get_by_role("tab", name="Download Data").click()
            page.get_by_role("link", name="Report: summary of the last stopped run").click()
            page.wait_for_selector("pre")
            report_text = page.inner_text("pre")
            for row in _summarize_rows(ladder_dir):
                assert row["tok/s"] in report_text and row["TTFT p50/p99 ms"] in report_text
            widths = page.eval_on_selector_all("img", "imgs => imgs.map(i => i.naturalWidth)")
            assert len(widths) == 2 and all(w > 100 for w in widths), widths
            browser.close()
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)
        log.close()


def _span_s(span: str) -> float:
    if "-" not in span or span == "-":
        return 0.0
    now = time.time()
    t0, t1 = (_epoch(c, now) for c in span.split("-"))
    return t1 - t0


def _strip(rows: list[dict[str, str]]) -> list[dict[str, str]]:
    """The tab's rows cut down to summarize's columns."""
    return [{h: r[h] for h in SUMMARY_HEADERS} for r in rows]


def _wait_for_dir(tmp_path: Path, mode: str) -> Path:
    def ended() -> Path | None:
        run = _run_dirs(tmp_path).get(mode)
        return run if run is not None and json.loads((run / "meta.json").read_text()).get("ended_s") else None

    return wait_until(ended, timeout_s=20, poll_s=0.3, what=f"an ended {mode} run directory under {tmp_path / 'runs'}")

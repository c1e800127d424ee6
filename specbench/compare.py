"""The comparison job: the same ladder on the baseline, then on the speculative server, then the report.

Both runs get identical settings and the same prompt order (same prompt set, mode and seed), and the same API
(SGLang's native route only when both servers are SGLang). Ctrl-C stops the run in progress; what was recorded
is kept and a report is still written, marked partial.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path

import requests

from locustfiles.auth import auth_headers
from shapes.budget import fmt_duration
from specbench.loadrun import LoadRun, execute
from specbench.preflight import Preflight


@dataclass
class CompareJob:
    baseline: Preflight
    spec: Preflight
    out: Path
    suite_config: str | None = None
    processes: int = 0
    flush_cache: bool = False
    api_key: str | None = None
    extra: list[str] = field(default_factory=list)
    time_budget_s: float = 0.0  # for both runs together; 0: none

    def common_api(self) -> str:
        """One API for both runs, so the two are measured the same way."""
        if self.baseline.api == self.spec.api:
            return self.baseline.api
        return "chat"


def flush_cache(url: str, api_key: str | None) -> bool:
    """POST /flush_cache where the server has it (SGLang); others simply lack it."""
    headers = auth_headers(api_key)
    try:
        resp = requests.post(url.rstrip("/") + "/flush_cache", timeout=30, headers=headers)
    except requests.RequestException:
        return False
    return resp.status_code == 200


def run_compare(job: CompareJob) -> int:
    from analysis import compare_runs, load_run, render_comparison, write_comparison_outputs

    job.out.mkdir(parents=True, exist_ok=True)
    api = job.common_api()
    runs = {"baseline": (job.baseline, job.out / "baseline"), "spec": (job.spec, job.out / "spec")}
    interrupted = False
    began = time.monotonic()
    if job.time_budget_s:
        print(f"time budget {fmt_duration(job.time_budget_s)} for both runs: the baseline ladder gets half, the "
              "speculative ladder what is left; each ladder shares its part between its steps", flush=True)
    for n, (label, (pre, run_dir)) in enumerate(runs.items()):
        if job.flush_cache and flush_cache(pre.identity.url, job.api_key):
            print(f"{label}: flushed the server cache", flush=True)
        print(f"{label}: ladder against {pre.identity.url} -> {run_dir}", flush=True)
        budget = []
        if job.time_budget_s:
            share = max(1.0, (job.time_budget_s - (time.monotonic() - began)) / (len(runs) - n))
            budget = ["--time-budget", f"{share:.0f}s"]
            print(f"{label}: {fmt_duration(share)} of the budget", flush=True)
        run = LoadRun(pre.identity.url, label, run_dir, job.suite_config, job.processes,
                      ["--api", api, *budget, *job.extra])
        result = execute(run)
        if result.interrupted:
            interrupted = True
            print(f"{label}: interrupted; writing a partial report from what was recorded", flush=True)
            break
        if result.returncode not in (0, 1):
            print(f"{label}: Locust exited with code {result.returncode}", flush=True)
            return result.returncode
    base_dir, spec_dir = runs["baseline"][1], runs["spec"][1]
    if not (spec_dir / "records.jsonl").exists():
        print("No speculative run was recorded, so there is nothing to compare.", flush=True)
        return 130 if interrupted else 2
    comparison = compare_runs(load_run(base_dir), load_run(spec_dir))
    print(render_comparison(comparison), flush=True)
    written = write_comparison_outputs(comparison, job.out)
    print(f"report: {job.out / 'report.md'} ({len(written)} files in {job.out})", flush=True)
    return 130 if interrupted else 0

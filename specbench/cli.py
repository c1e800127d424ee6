"""``specbench``: the main job in one command, and thin wrappers over the analysis.

    specbench demo                                   # two built-in emulators, full comparison, report
    specbench compare --baseline URL --spec URL      # preflight, ladder on each, comparison report
    specbench run --host URL --label NAME            # one ladder, one run directory
    specbench report RUN_DIR                         # python -m analysis summarize RUN_DIR
    specbench compare-runs BASE_RUN SPEC_RUN         # python -m analysis compare BASE_RUN SPEC_RUN

Options it does not know (``--ladder``, ``--max-tokens``, ``--prompts``, ...) go to the Locust runs as they are.
Exit codes: 0 done, 2 a user or server problem (one line on stderr), 130 interrupted (partial report written).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

from contract.schema import APIS
from contract.settings import SettingsError, default_run_dir, parse_duration
from locustfiles.target import start_emulator_process
from specbench.preflight import PreflightError, check_server
from specbench_config import data_path

DEMO_CONFIG = data_path("suite", "demo.yaml")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="specbench", description=__doc__.split("\n\n")[0] if __doc__ else None,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)

    def common_load(p: argparse.ArgumentParser) -> None:
        p.add_argument("--suite-config", help="YAML profile of suite options (config/suite/*.yaml)")
        p.add_argument("--api-key-env", default="", help="environment variable holding the API key")
        p.add_argument("--processes", type=int, default=0, help="Locust worker processes (0: one process)")
        p.add_argument("--time-budget", default="", help="wall time for the whole job, e.g. 30m or 1h30m "
                       "(compare: for both runs)")

    p = sub.add_parser("compare", help="ladder on a baseline and a speculative server, then the comparison")
    p.add_argument("--baseline", required=True, help="URL of the baseline server")
    p.add_argument("--spec", required=True, help="URL of the speculative server")
    p.add_argument("--out", help="report directory (default reports/compare-YYYYmmdd-HHMMSS)")
    p.add_argument("--flush-cache", action="store_true", help="POST /flush_cache before each run")
    p.add_argument("--api", default="auto", choices=("auto", *APIS))
    common_load(p)

    p = sub.add_parser("run", help="one ladder against one server")
    p.add_argument("--host", required=True, help="URL of the server")
    p.add_argument("--label", required=True, help="run label (e.g. baseline, eagle3)")
    p.add_argument("--out", help="run directory (default runs/LABEL-YYYYmmdd-HHMMSS)")
    common_load(p)

    p = sub.add_parser("report", help="tables of one run directory")
    p.add_argument("run_dir")
    p.add_argument("--json", action="store_true")

    p = sub.add_parser("compare-runs", help="comparison report of two run directories")
    p.add_argument("base_run")
    p.add_argument("spec_run")
    p.add_argument("--out")

    p = sub.add_parser("demo", help="the whole comparison against two built-in emulators")
    p.add_argument("--out", default="reports/demo", help="report directory (default reports/demo)")
    p.add_argument("--speed", type=float, default=10.0, help="emulator time scale (default 10)")
    p.add_argument("--suite-config", default=str(DEMO_CONFIG))
    p.add_argument("--processes", type=int, default=0)
    p.add_argument("--api-key-env", default="")
    p.add_argument("--time-budget", default="4m", help="wall time for both runs (default 4m, so the demo ends "
                   "within 5 minutes; 0 or '' for none)")
    return parser


def main(argv: list[str] | None = None) -> int:
    args, extra = _parser().parse_known_args(sys.argv[1:] if argv is None else argv)
    try:
        if args.command == "compare":
            return cmd_compare(args, extra)
        if args.command == "run":
            return cmd_run(args, extra)
        if args.command == "demo":
            return cmd_demo(args, extra)
        if extra:
            raise UsageError(f"unknown options for {args.command}: {' '.join(extra)}")
        from analysis.cli import main as analysis_main

        if args.command == "report":
            return analysis_main(["summarize", args.run_dir] + (["--json"] if args.json else []))
        return analysis_main(["compare", args.base_run, args.spec_run] + (["--out", args.out] if args.out else []))
    except (PreflightError, UsageError, SettingsError) as exc:
        print(f"specbench: error: {exc}", file=sys.stderr)
        return 2


class UsageError(Exception):
    """A mistake in the command line."""


def _api_key(env_name: str) -> str | None:
    if not env_name:
        return None
    if env_name not in os.environ:
        raise UsageError(f"--api-key-env: environment variable {env_name} is not set")
    return os.environ[env_name]


def cmd_run(args: argparse.Namespace, extra: list[str]) -> int:
    from specbench.loadrun import LoadRun, execute

    budget = _budget(args)
    pre = check_server(args.host, "server", api_key=_api_key(args.api_key_env))
    print(pre.describe("server"), flush=True)
    run_dir = Path(args.out) if args.out else default_run_dir(args.label)
    passthrough = _load_options(args) + (["--time-budget", f"{budget:.0f}s"] if budget else []) + extra
    result = execute(LoadRun(args.host, args.label, run_dir, args.suite_config, args.processes, passthrough))
    print(f"run directory: {run_dir}", flush=True)
    if result.returncode not in (0, 1):
        return result.returncode
    return 130 if result.interrupted else 0


def _load_options(args: argparse.Namespace) -> list[str]:
    return ["--api-key-env", args.api_key_env] if args.api_key_env else []


def _budget(args: argparse.Namespace) -> float:
    """--time-budget in seconds (0: none); a bad value is a one-line error, exit 2."""
    return parse_duration(args.time_budget, "--time-budget") if args.time_budget not in ("", "0") else 0.0


def cmd_compare(args: argparse.Namespace, extra: list[str]) -> int:
    from specbench.compare import CompareJob, run_compare

    budget = _budget(args)
    key = _api_key(args.api_key_env)
    base = check_server(args.baseline, "baseline", api=args.api, api_key=key)
    spec = check_server(args.spec, "spec", api=args.api, api_key=key)
    print(base.describe("baseline"), flush=True)
    print(spec.describe("spec"), flush=True)
    out = Path(args.out) if args.out else Path("reports") / f"compare-{time.strftime('%Y%m%d-%H%M%S')}"
    job = CompareJob(baseline=base, spec=spec, out=out, suite_config=args.suite_config,
                     processes=args.processes, flush_cache=args.flush_cache, api_key=key,
                     extra=_load_options(args) + extra, time_budget_s=budget)
    return run_compare(job)


def cmd_demo(args: argparse.Namespace, extra: list[str]) -> int:
    from specbench.compare import CompareJob, run_compare

    budget = _budget(args)
    print(f"Starting two built-in emulators (baseline and eagle3, speed {args.speed:g}) on 127.0.0.1 ...",
          flush=True)
    servers = []
    try:
        servers.append(start_emulator_process("baseline", speed=args.speed))
        servers.append(start_emulator_process("eagle3", speed=args.speed))
        base = check_server(servers[0].url, "baseline")
        spec = check_server(servers[1].url, "spec")
        print(base.describe("baseline"), flush=True)
        print(spec.describe("spec"), flush=True)
        job = CompareJob(baseline=base, spec=spec, out=Path(args.out), suite_config=args.suite_config,
                         processes=args.processes, flush_cache=True, api_key=None, extra=extra,
                         time_budget_s=budget)
        return run_compare(job)
    finally:
        for server in servers:
            server.stop()


if __name__ == "__main__":
    sys.exit(main())

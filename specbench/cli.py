"""``specbench``: the main job in one command, and thin wrappers over the analysis.

    specbench demo [--sweep]                         # built-in emulators, full comparison, report
    specbench demo --rate                            # the same in open loop, judged by goodput under an SLO
    specbench compare --baseline URL --spec URL      # preflight, ladder on each, comparison report
    specbench compare --baseline URL --spec A=URL --spec B=URL ...   # many configurations, one report
    specbench compare --baseline URL --spec URL --trace FILE --slo ...   # trace replay (#28): both replay FILE
    specbench sweep sweep.yaml                       # start, measure and stop each configured server in turn
    specbench run --host URL --label NAME            # one ladder, one run directory
    specbench report RUN_DIR                         # python -m specbench.analysis summarize RUN_DIR
    specbench compare-runs BASE_RUN RUN [RUN ...]    # python -m specbench.analysis compare BASE_RUN RUN [RUN ...]

Options it does not know (``--ladder``, ``--max-tokens``, ``--prompts``, ...) go to the Locust runs as they are.
Exit codes: 0 done, 2 a user or server problem (one line on stderr), 3 a distributed run lost data (a worker
was lost or records never arrived) or a step failed more than --max-error-rate allows, 130 interrupted
(SIGINT, SIGTERM or SIGHUP; partial report written); any other: the Locust child's own failure.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from specbench.analysis.reporting.files import OutputWriteError
from specbench.config import data_path
from specbench.contract import interrupts
from specbench.contract.limits import auto_processes
from specbench.contract.redact import redact
from specbench.contract.rundir import RunDir
from specbench.contract.settings import (
    OPTIONS,
    SettingsError,
    SuiteSettings,
    add_option,
    check_budget_fits,
    default_run_dir,
    duration_arg,
    given_argv,
    parse_budget,
    passthrough_argv,
)
from specbench.contract.version import SUITE_VERSION
from specbench.inputs import InputError, check_fresh_dir, check_host, check_key_and_url, check_load_options, check_speed
from specbench.launch import LaunchError
from specbench.locustfiles.target import start_emulator_process
from specbench.preflight import Preflight, PreflightError, check_server
from specbench.sweepfile import SweepFileError
from specbench.terminal import OneLineParser, closed_pipe, did_you_mean, stdout_on_stderr
from specbench.tunecmd import add_tune_arguments

DEMO_CONFIG = data_path("suite", "demo.yaml")
DEMO_RATE_CONFIG = data_path("suite", "demo-rate.yaml")
DEMO_RATE_SPEED = 4.0  # the SLO in demo-rate.yaml is the seed-scale one divided by this
DEMO_SWEEP_CONFIG = data_path("suite", "demo-sweep.yaml")
# The demo sweep: the baseline, three draft lengths whose cost makes longer drafts win at low C and lose
# sooner as C grows (config/emulator/eagle3-steps*.yaml), and the seed's calibrated EAGLE-3 (loses everywhere).
DESCRIPTION = ("Does speculative decoding pay off under concurrent load? The main job in one command (compare, "
               "demo, sweep, tune, run), and the reports of finished runs (report, compare-runs).")
EXIT_CODES = ("exit codes:\n"
              "  0    done\n"
              "  2    a mistake in the command line, a profile or the output place, or a server that fails its\n"
              "       preflight (one line on stderr, before any load)\n"
              "  3    a step failed over --max-error-rate or had every request refused, or the disk refused a record\n"
              "  130  interrupted (what was recorded is kept and reported)")
EPILOGS = {
    "compare": "examples:\n"
               "  specbench compare --baseline http://127.0.0.1:30000 --spec http://127.0.0.1:30001 "
               "--out reports/mine\n"
               "  specbench compare --baseline http://h:30000 --spec eagle=http://h:30001 --spec ngram=http://h:30002 "
               "\\\n      --ladder 1,8,32,128 --time-budget 30m\n\n" + EXIT_CODES,
    "run": "examples:\n  specbench run --host http://127.0.0.1:30000 --label baseline\n"
           "  specbench run --host http://127.0.0.1:8080 --label llamacpp --api chat --max-tokens 256 --ladder 1,4,16"
           "\n\n" + EXIT_CODES,
    "sweep": "examples:\n  specbench sweep config/sweep/example.yaml --out reports/sweep\n"
             "  specbench sweep my-sweep.yaml --time-budget 2h --refine-levels 0\n\n" + EXIT_CODES,
    "tune": "examples:\n  specbench tune config/tune/emulator.yaml --time-budget 10m --validate\n\n" + EXIT_CODES,
    "demo": "examples:\n  specbench demo\n  specbench demo --sweep --out reports/demo-sweep\n\n" + EXIT_CODES,
}


def _parser() -> argparse.ArgumentParser:
    parser = OneLineParser(prog="specbench", description=DESCRIPTION,
                           formatter_class=argparse.RawDescriptionHelpFormatter, allow_abbrev=False)
    parser.add_argument("--version", action="version", version=f"specbench {SUITE_VERSION}")
    sub = parser.add_subparsers(dest="command", required=True)

    def command(name: str, help: str) -> argparse.ArgumentParser:
        # No abbreviated flags: `run --api chat` (a flag for the Locust child) was taken as --api-key-env chat.
        # The one-line help of the command list is also the first line of the command's own --help.
        return sub.add_parser(name, help=help, description=help[0].upper() + help[1:] + ".", allow_abbrev=False,
                              epilog=EPILOGS.get(name), formatter_class=argparse.RawDescriptionHelpFormatter)

    def common_load(p: argparse.ArgumentParser) -> None:
        add_option(p, "suite_config")
        add_option(p, "api_key_env")
        p.add_argument("--processes", type=processes_arg, default=0,
                       help="Locust worker processes (0: one process; auto: from the ladder's top and the cores)")
        add_option(p, "overwrite")
        add_option(p, "time_budget")
        verbose_flag(p)

    def verbose_flag(p: argparse.ArgumentParser) -> None:
        p.add_argument("--verbose", action="store_true", help="also show Locust's own log and statistics tables "
                       "(always kept in each run directory's locust.log) and, after a comparison, the whole report "
                       "(always in report.md)")

    p = command("compare", help="ladder on a baseline and speculative servers, then the comparison")
    p.add_argument("--baseline", required=True, help="URL of the baseline server")
    p.add_argument("--spec", required=True, action="append", metavar="[NAME=]URL",
                   help="URL of a speculative server; repeat as --spec NAME=URL to compare several")
    p.add_argument("--out", help="report directory (default reports/compare-YYYYmmdd-HHMMSS)")
    p.add_argument("--flush-cache", action="store_true", help="POST /flush_cache before each run")
    p.add_argument("--interleave", choices=("level", "ladder"), default="level",
                   help="with --repeats: alternate the servers level by level (A B, B A, A B at each level; one "
                   "Locust run per level) or whole ladder by whole ladder (fewer runs, wider intervals under "
                   "drift) (default level)")
    p.add_argument("--end-check", action=argparse.BooleanOptionalAction, default=None,
                   help="measure each server's first level again at the end and say whether it changed during "
                   "the run (default: where the --time-budget leaves room for it)")
    p.add_argument("--baseline-gpu-metrics", metavar="URL[,URL...]",
                   help="the baseline's own DCGM exporters (or nvml: this machine's GPUs): its run reads these "
                   "instead of --gpu-metrics (docs/guides/energy.md)")
    p.add_argument("--spec-gpu-metrics", action="append", metavar="[NAME=]URL[,URL...]",
                   help="a speculative server's own DCGM exporters (or nvml), instead of --gpu-metrics; repeat as "
                   "--spec-gpu-metrics NAME=URL for each --spec NAME=URL")
    add_option(p, "api")
    p.add_argument("--json", action="store_true", help="print the report's comparison.json on stdout at the end; "
                   "everything else, the runs' progress included, goes to stderr")
    common_load(p)

    p = command("run", help="one ladder against one server")
    p.add_argument("--host", required=True, help="URL of the server")
    add_option(p, "label", required=True, default=None)
    add_option(p, "out")
    common_load(p)

    p = command("report", help="tables of one run directory")
    p.add_argument("run_dir")
    p.add_argument("--json", action="store_true")

    p = command("compare-runs", help="comparison report of a baseline run and one or more runs")
    p.add_argument("base_run")
    p.add_argument("spec_runs", nargs="+", metavar="[NAME=]RUN")
    p.add_argument("--out", help="report directory (default reports/compare-runs-YYYYmmdd-HHMMSS)")
    p.add_argument("--baseline-name", default="baseline", help="the baseline's name in a many-run report")
    p.add_argument("--overwrite", action="store_true", help="replace a report already in --out")
    verbose_flag(p)

    p = command("sweep", help="start, measure and stop each server configuration of a sweep file")
    p.add_argument("sweep_file", help="YAML sweep file (config/sweep/example.yaml)")
    p.add_argument("--out", help="report directory (default reports/sweep-YYYYmmdd-HHMMSS)")
    p.add_argument("--flush-cache", action="store_true", help="POST /flush_cache before each run")
    add_option(p, "api")
    common_load(p)

    p = command("tune", help="measure each speculative depth and choose one per load; write the server setting")
    add_tune_arguments(p)
    add_option(p, "api")
    common_load(p)

    p = command("demo", help="the whole comparison against two built-in emulators")
    p.add_argument("--out", help="report directory (default reports/demo, reports/demo-sweep with --sweep, "
                   "reports/demo-rate with --rate)")
    p.add_argument("--speed", type=float, default=None, help="emulator time scale (default 10; 4 with --rate)")
    p.add_argument("--sweep", action="store_true",
                   help="the baseline against four speculative emulators (three draft lengths and eagle3)")
    p.add_argument("--rate", action="store_true", help="open loop: a rate ladder judged by goodput and "
                   "capacity under an SLO (config/suite/demo-rate.yaml)")
    # The demo's own defaults: its profiles and a budget that ends the concurrency demo within 5 minutes.
    add_option(p, "suite_config", help="suite profile (default config/suite/demo.yaml, demo-sweep.yaml, "
               "demo-rate.yaml)")
    p.add_argument("--processes", type=processes_arg, default=0)
    add_option(p, "api_key_env")
    add_option(p, "time_budget", default=None, help="wall time for both runs (default 4m for the concurrency "
               "demo, so it ends within 5 minutes; none for --rate and --sweep; 0 or '' for none)")
    verbose_flag(p)

    p = command("options", help="the suite options for plain Locust (locust -f locustfiles/sglang.py), whose "
                "own --help prints before it reads the locustfile")

    # crossover refinement (#27)
    for name in ("compare", "sweep", "demo"):
        sub.choices[name].add_argument(
            "--refine-levels", type=int, default=3, metavar="N",
            help="after the ladders, measure up to N extra levels around each crossover (switch point) on every "
            "server until its 95%% interval is within ±15%% (default 3)")
        sub.choices[name].add_argument("--no-refine", action="store_true", help="no extra levels after the ladders")
    for name in ("compare", "sweep"):  # time as a confounder (docs/guides/drift.md)
        sub.choices[name].add_argument(
            "--repeats", type=int, default=1, metavar="N",
            help="run every ladder N times in alternating order (A B, B A, ...) and combine the repeats: "
            "intervals that hold the variation between runs, and drift flagged (default 1; refinement is off "
            "with more)")
    for name in ("compare", "run", "sweep", "tune", "demo"):  # last: the group follows each command's own options
        suite_options(sub.choices[name])
    return parser


def refine_levels(args: argparse.Namespace) -> int:
    """--refine-levels as a count (0 with --no-refine); a negative one is a usage error (#27)."""
    if args.refine_levels < 0:
        raise UsageError(f"--refine-levels {args.refine_levels}: expected a count of levels, 0 or more")
    return 0 if args.no_refine else args.refine_levels


def subcommands(parser: argparse.ArgumentParser | None = None) -> dict[str, argparse.ArgumentParser]:
    """Each command's own parser (for its --help: the docs' reference page, the tests of what it lists)."""
    action = next(a for a in (parser or _parser())._actions if isinstance(a, argparse._SubParsersAction))
    return dict(action.choices)


def split_args(argv: list[str]) -> tuple[argparse.Namespace, list[str]]:
    """The command's own options, and what each of its Locust children gets: the suite options group
    (``suite_options``, there for --help) exactly as typed, then anything else for Locust."""
    args, extra = _parser().parse_known_args(argv)
    return args, given_argv(args, getattr(args, "suite_dests", ())) + extra


def main(argv: list[str] | None = None) -> int:
    try:
        return _main(argv)
    except BrokenPipeError:  # the reader of stdout has gone (`specbench report --json RUN | head -1`)
        return closed_pipe()


def _main(argv: list[str] | None) -> int:
    args, extra = split_args(sys.argv[1:] if argv is None else argv)
    # SIGTERM and SIGHUP end a command as Ctrl-C does: children are stopped in order, what was recorded is kept.
    interrupts.install()
    try:
        if args.command == "compare":
            return json_on_stdout(args, extra) if args.json else cmd_compare(args, extra)
        if args.command == "run":
            return cmd_run(args, extra)
        if args.command == "demo":
            return cmd_demo(args, extra)
        if args.command == "sweep":
            return cmd_sweep(args, extra)
        if args.command == "tune":
            return cmd_tune(args, extra)
        if args.command == "options":
            return cmd_options()
        return cmd_analysis(args, extra)
    except (PreflightError, UsageError, SweepFileError, LaunchError, InputError, SettingsError,
            OutputWriteError) as exc:
        print(f"specbench: error: {redact(str(exc))}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("specbench: interrupted", file=sys.stderr)
        return 130


def cmd_analysis(args: argparse.Namespace, extra: list[str]) -> int:
    """report and compare-runs: thin wrappers over ``python -m specbench.analysis``."""
    if extra:
        known = subcommands()[args.command]._option_string_actions
        hint = did_you_mean(extra[0], known)
        raise UsageError(f"unknown options for {args.command}: {' '.join(extra)}{f' ({hint})' if hint else ''}")
    from specbench.analysis.cli import main as analysis_main

    if args.command == "report":
        return analysis_main(["summarize", args.run_dir] + (["--json"] if args.json else []))
    from specbench.analysis.cli import UsageError as AnalysisUsageError
    from specbench.analysis.cli import check_distinct_runs, check_report_dir

    out = Path(args.out) if args.out else Path("reports") / f"compare-runs-{time.strftime('%Y%m%d-%H%M%S')}"
    check_fresh_dir(out, "--out", args.overwrite, marker="report.md")
    try:
        check_distinct_runs(args.base_run, args.spec_runs)
        check_report_dir(str(out))
    except AnalysisUsageError as exc:
        raise UsageError(str(exc)) from None
    return compare_finished_runs(args, out)


def compare_finished_runs(args: argparse.Namespace, out: Path) -> int:
    """compare-runs as compare ends: the answer first (the whole report with --verbose), then the report's place."""
    from specbench.analysis import compare_many, load_run, write_outputs
    from specbench.analysis.cli import UsageError as AnalysisUsageError
    from specbench.analysis.cli import named_runs
    from specbench.compare import report_line, terminal_text
    from specbench.contract.runformat import RunFormatError

    try:
        multi = compare_many(load_run(args.base_run), named_runs(args.spec_runs, args.baseline_name),
                             baseline_name=args.baseline_name)
    except (RunFormatError, AnalysisUsageError) as exc:
        raise UsageError(str(exc)) from None
    print(redact(terminal_text(multi, args.verbose)), flush=True)
    written = write_outputs(multi, out)
    print(report_line(out, len(written)), flush=True)
    return 0


def _print_fit(servers: list[tuple[str, Preflight]], settings: SuiteSettings) -> None:
    """Before any load, one line per server naming the prompts that cannot fit its context (#60)."""
    from specbench.contextfit import fit_line

    for role, pre in servers:
        line = fit_line(role, pre.identity, pre.api, settings, settings.api_key())
        if line is not None:
            print(redact(line), flush=True)


class UsageError(Exception):
    """A mistake in the command line."""


def cmd_run(args: argparse.Namespace, extra: list[str]) -> int:
    from specbench.loadrun import LoadRun, execute

    budget = _budget(args)
    host = check_host(args.host, "--host")
    passthrough = passed_on(args) + (["--time-budget", duration_arg(budget)] if budget else []) + extra
    settings = _validated(args, [*passthrough, "--label", args.label])
    check_key_and_url(host, "--host", settings.api_key_env)
    run_dir = Path(args.out) if args.out else default_run_dir(args.label)
    check_fresh_dir(run_dir, "--out", args.overwrite)
    pre = check_server(host, "server", api_key=settings.api_key())
    print(redact(pre.describe("server")), flush=True)
    _print_fit([("server", pre)], settings)
    result = execute(LoadRun(host, args.label, run_dir, args.suite_config, args.processes, passthrough,
                             verbose=args.verbose))
    print(f"run directory: {run_dir} (Locust's log: {RunDir(run_dir).log_file})", flush=True)
    if result.interrupted:
        return 130
    if result.failed and result.disk_error is None:  # a refusing disk: the child has named it in its one line
        print(f"specbench: error: the load run failed (Locust exit code {result.returncode})", file=sys.stderr)
    return result.returncode


# Suite options a load command takes itself and hands on, as given, to each Locust child it starts.
PASSED_ON: tuple[str, ...] = ("api_key_env", "overwrite")
SUITE_GROUP = "suite options"
OPTIONS_BY_DEST = {opt.dest: opt for opt in OPTIONS}


# Options a specbench load command sets on each Locust child itself (its run's name, directory and terminal), or
# that name a built-in target where the command names the servers: not offered on its command line.
SET_BY_COMMAND = frozenset({"label", "out", "console", "emulator_profile", "emulator_speed"})


def suite_options(p: argparse.ArgumentParser, skip: frozenset[str] = SET_BY_COMMAND) -> None:
    """Every suite option the command does not take itself, in its --help, handed on to each Locust child.

    Declared with no default in the namespace (SUPPRESS), so exactly what was typed is handed on: a value equal to
    the default still overrides a --suite-config profile, as on the child's own command line."""
    p.usage = p.format_usage().removeprefix("usage: ").strip() + " [suite options]"  # the group is long
    group = p.add_argument_group(SUITE_GROUP, "passed on to each Locust run; each may also be set in a "
                                 "--suite-config YAML profile (the command line wins)")
    taken = {action.dest for action in p._actions}
    added = tuple(opt.dest for opt in OPTIONS if opt.dest not in taken and opt.dest not in skip)
    for dest in added:
        opt = OPTIONS_BY_DEST[dest]
        shown = "" if "default" in opt.help else f" (default: {_shown_default(opt.default)})"
        # Taken as text: the settings check reads and judges every value (one line naming the flag and the
        # range), as for an option written in a profile; argparse would print its usage instead.
        as_text = {} if isinstance(opt.default, bool) else {"type": str, "choices": None, "metavar": (
            "{" + ",".join(c for c in opt.choices if c) + "}" if opt.choices else dest.upper())}  # '': the default
        add_option(group, dest, default=argparse.SUPPRESS, help=opt.help + shown, **as_text)
    p.set_defaults(suite_dests=added)


def cmd_options() -> int:
    """Every suite option as plain Locust takes it (its own --help cannot show them: it prints before it reads
    the locustfile)."""
    p = argparse.ArgumentParser(prog="locust -f locustfiles/sglang.py", add_help=False, allow_abbrev=False,
                                usage="%(prog)s [locust options]")  # suite_options adds " [suite options]"
    suite_options(p, skip=frozenset())
    print(p.format_help())
    return 0


def _shown_default(value: object) -> str:
    text = "none" if value in ("", None) else str(value).lower() if isinstance(value, bool) else str(value)
    return text.replace("%", "%%")


def passed_on(args: argparse.Namespace) -> list[str]:
    return passthrough_argv(args, PASSED_ON)


def _validated(args: argparse.Namespace, child_options: list[str]) -> SuiteSettings:
    """The settings each Locust child will read (its options and the profile), validated once per command.

    The key is read from them (``api_key()``): the variable may be named by the flag or by the profile.
    ``--processes auto`` is decided here, from the ladder the settings hold, and said on one line."""
    profile = ["--suite-config", args.suite_config] if args.suite_config else []
    own = list(subcommands()[args.command]._option_string_actions)  # offered for a mistyped flag
    if args.processes == "auto":
        settings = check_load_options([*child_options, *profile], 0, own)
        args.processes, said = auto_processes(settings.ladder, settings.rate_ladder)
        print(said, flush=True)
    return check_load_options([*child_options, *profile], args.processes, own)


def processes_arg(text: str) -> int | str:
    """--processes: a whole number, or 'auto' (decided once the ladder is known)."""
    if text.strip().lower() == "auto":
        return "auto"
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number or auto, got {text!r}") from None


def _budget(args: argparse.Namespace) -> float:
    """--time-budget in seconds (0: none); a bad value is a one-line error, exit 2."""
    return parse_budget(args.time_budget, "--time-budget")


def spec_targets(specs: list[str]) -> list[tuple[str, str]]:
    """--spec values as (name, URL): a single plain URL is named ``spec``; several need NAME=URL each."""
    from specbench.analysis.cli import UsageError as NameUsageError
    from specbench.analysis.cli import check_names, split_name

    pairs = [split_name(s) for s in specs]
    if len(pairs) == 1 and pairs[0][0] is None:
        return [("spec", pairs[0][1])]
    unnamed = [url for name, url in pairs if name is None]
    if unnamed:
        raise UsageError(f"--spec {unnamed[0]}: name every speculative server when comparing several "
                         "(--spec NAME=URL)")
    try:
        check_names([name for name, _ in pairs if name], "baseline", what="--spec")
    except NameUsageError as exc:
        raise UsageError(str(exc)) from None
    return [(name or "spec", url) for name, url in pairs]


def cmd_compare(args: argparse.Namespace, extra: list[str]) -> int:
    from specbench.compare import CompareJob, run_compare
    from specbench.exporters import run_exporters
    from specbench.repeatguard import check_compare_budget
    from specbench.repeatrun import run_repeats

    budget = _budget(args)
    refine = refine_levels(args)
    repeats = repeats_arg(args)
    targets = [(name, check_host(url, f"--spec {name}")) for name, url in spec_targets(args.spec)]
    baseline = check_host(args.baseline, "--baseline")
    settings = _validated(args, passed_on(args) + extra)
    if budget:  # each run's first share, checked as its child will check it, before any server is asked (#70)
        check_compare_budget(budget, len(targets) + 1, repeats, settings, per_level=args.interleave == "level",
                             refine=refine)
    for flag, url in [("--baseline", baseline), *((f"--spec {name}", url) for name, url in targets)]:
        check_key_and_url(url, flag, settings.api_key_env)
    exporters = run_exporters(args.baseline_gpu_metrics, args.spec_gpu_metrics, "baseline",
                              [name for name, _ in targets], settings.gpu_metrics)
    out = Path(args.out) if args.out else Path("reports") / f"compare-{time.strftime('%Y%m%d-%H%M%S')}"
    check_fresh_dir(out, "--out", args.overwrite)
    key = settings.api_key()
    base = check_server(baseline, "baseline", api=args.api, api_key=key)
    if args.overwrite:
        _clear_earlier_job(out, ["baseline", *(name for name, _ in targets)], repeats)
    specs = [(name, check_server(url, name, api=args.api, api_key=key)) for name, url in targets]
    print(redact(base.describe("baseline")), flush=True)
    for name, pre in specs:
        print(redact(pre.describe(name)), flush=True)
    _print_fit([("baseline", base), *specs], settings)
    for name, urls in exporters.items():
        print(redact(f"{name}: GPU metrics from {urls.replace(',', ', ')}"), flush=True)
    job = CompareJob(baseline=base, specs=specs, out=out, suite_config=args.suite_config,
                     processes=args.processes, flush_cache=args.flush_cache, api_key=key,
                     extra=passed_on(args) + extra, time_budget_s=budget, verbose=args.verbose,
                     refine_levels=refine, stop_after_saturation=settings.stop_after_saturation,
                     rate_mode=bool(settings.rate_ladder), gpu_metrics=exporters, repeats=repeats,
                     end_check=args.end_check, interleave=args.interleave, equivalence_probe=settings.equivalence_probe,
                     levels=[float(x) for x in (settings.rate_ladder or settings.ladder)])
    return run_repeats(job) if repeats > 1 else run_compare(job)


def repeats_arg(args: argparse.Namespace) -> int:
    """--repeats as a count from 1 to ``MAX_REPEATS``; anything else is a usage error."""
    from specbench.repeatrun import MAX_REPEATS

    if not 1 <= args.repeats <= MAX_REPEATS:
        raise UsageError(f"--repeats {args.repeats}: expected a count from 1 to {MAX_REPEATS}")
    return int(args.repeats)


def json_on_stdout(args: argparse.Namespace, extra: list[str]) -> int:
    """compare --json: the whole job with its stdout (its children's too) on stderr, then comparison.json alone
    on stdout, for a script to read; a job that wrote no report prints nothing there."""
    if not args.out:  # decided here, so the document can be found afterwards
        args.out = str(Path("reports") / f"compare-{time.strftime('%Y%m%d-%H%M%S')}")
    began = time.time()
    with stdout_on_stderr():
        code = cmd_compare(args, extra)
    document = Path(args.out) / "comparison.json"
    if document.is_file() and document.stat().st_mtime >= began - 1:  # this job's, not an --overwrite'd one's
        sys.stdout.write(document.read_text(encoding="utf-8").rstrip("\n") + "\n")
        sys.stdout.flush()
    return code


def cmd_sweep(args: argparse.Namespace, extra: list[str]) -> int:
    from specbench.compare import ladder_share
    from specbench.exporters import left_without
    from specbench.sweep import SweepJob, run_sweep
    from specbench.sweepfile import load_sweep

    refine = refine_levels(args)
    repeats = repeats_arg(args)
    sweep = load_sweep(args.sweep_file)
    settings = _validated(args, passed_on(args) + extra)
    without = [e.name for e in sweep.entries if e.gpu_metrics is None]
    if not settings.gpu_metrics and without and len(without) < len(sweep.entries):
        raise left_without(sweep.source, without, "each configuration gpu_metrics")
    key = settings.api_key()
    budget = _budget(args)
    if budget:
        runs = len(sweep.entries) * repeats
        share = ladder_share(budget, runs, 0 if repeats > 1 else refine)
        check_budget_fits(share, len(settings.ladder), f"--time-budget (a ladder's share, {duration_arg(share)} "
                          f"for {runs} runs)")
    out = Path(args.out) if args.out else Path("reports") / f"sweep-{time.strftime('%Y%m%d-%H%M%S')}"
    check_fresh_dir(out, "--out", args.overwrite)
    if args.overwrite:
        _clear_earlier_job(out, [e.name for e in sweep.entries], repeats)
    names = ", ".join(e.name + (" (baseline)" if e.baseline else "") for e in sweep.entries)
    print(f"Sweep {sweep.source}: {names}", flush=True)
    return run_sweep(SweepJob(sweep, out, args.suite_config, args.processes, args.api, key, args.flush_cache,
                              passed_on(args) + extra, verbose=args.verbose, refine_levels=refine,
                              rate_mode=bool(settings.rate_ladder), repeats=repeats, time_budget_s=budget))


def cmd_tune(args: argparse.Namespace, extra: list[str]) -> int:
    from specbench.tunecmd import checked_tune, start_tune, tune_out

    budget = _budget(args)
    tune, release = checked_tune(args)
    settings = _validated(args, passed_on(args) + extra)
    out = tune_out(args, tune, settings, budget)
    if args.overwrite:
        _clear_earlier_job(out, [e.name for e in tune.sweep.entries])
    return start_tune(args, tune, release, out, settings, budget, passed_on(args) + extra)


def _clear_earlier_job(out: Path, names: list[str], repeats: int = 1) -> None:
    """--overwrite: an earlier compare's or sweep's runs of other configurations (and repeats) go
    (``specbench.stale``)."""
    from specbench.repeatrun import REPEAT_PREFIX
    from specbench.stale import clear_earlier_job, clear_earlier_repeats

    removed = clear_earlier_job(out, names) + clear_earlier_repeats(out, names, repeats, REPEAT_PREFIX)
    if removed:
        print(redact(f"--overwrite: removed the earlier runs of {', '.join(removed)} from {out}"), flush=True)


def cmd_demo(args: argparse.Namespace, extra: list[str]) -> int:
    from specbench.compare import CompareJob, run_compare

    if args.speed is None:
        args.speed = DEMO_RATE_SPEED if args.rate else 10.0
    if args.time_budget is None:  # the rate demo's steps end by their request counts, well inside 3 minutes;
        # the sweep demo's five ladders by their step limits (config/suite/demo-sweep.yaml: about 4 minutes)
        args.time_budget = "" if args.rate or args.sweep else "4m"
    budget = _budget(args)
    refine = refine_levels(args)
    check_speed(args.speed)
    default_config = DEMO_SWEEP_CONFIG if args.sweep else DEMO_RATE_CONFIG if args.rate else DEMO_CONFIG
    args.suite_config = args.suite_config or str(default_config)
    settings = _validated(args, passthrough_argv(args, ("api_key_env",)) + extra)  # the demo's emulators take no key
    if args.sweep:
        from specbench.sweep import DEMO_SWEEP, SweepJob, demo_sweep, run_sweep

        out = Path(args.out or "reports/demo-sweep")
        names = ", ".join(f"{name} ({profile})" for name, profile in DEMO_SWEEP)
        print(f"Sweep over built-in emulators at speed {args.speed:g}, one after another: {names}", flush=True)
        return run_sweep(SweepJob(demo_sweep(args.speed), out, args.suite_config,
                                  args.processes, "auto", None, True, extra, verbose=args.verbose,
                                  refine_levels=refine, rate_mode=bool(settings.rate_ladder), time_budget_s=budget))
    if args.rate:
        args.out = args.out or "reports/demo-rate"
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
        job = CompareJob(baseline=base, specs=[("spec", spec)], out=Path(args.out or "reports/demo"),
                         suite_config=args.suite_config, processes=args.processes,
                         flush_cache=True, api_key=None, extra=extra,
                         time_budget_s=budget, verbose=args.verbose, refine_levels=refine,
                         stop_after_saturation=settings.stop_after_saturation)
        return run_compare(job)
    finally:
        for server in servers:
            server.stop()


if __name__ == "__main__":
    sys.exit(main())

"""``python -m specbench.analysis``: summarize one run, or compare a baseline run with one or more speculative runs.

Bad input (not a run directory, a malformed file) prints one line naming the file and exits 2.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from specbench.analysis.outputs import write_outputs, write_summary_outputs
from specbench.analysis.records.energy import Prices
from specbench.analysis.records.load import load_run
from specbench.analysis.records.summary import run_label, summarize_run
from specbench.analysis.reporting.files import OutputWriteError
from specbench.analysis.reporting.render import render_comparison, render_summary_table
from specbench.analysis.reporting.serialize import comparison_json, summary_json
from specbench.analysis.verdicts.compare import DEFAULT_N_BOOT, DEFAULT_SEED
from specbench.analysis.verdicts.multi import compare_many
from specbench.contract.rundir import RECORDS_FILE, RunDir
from specbench.contract.schema import RunData, RunFormatError
from specbench.contract.servertext import file_slug
from specbench.contract.slo import Slo, SloError, parse_slo

EXIT_BAD_INPUT = 2
EXIT_INTERRUPTED = 130  # as the shell reports Ctrl-C, and as specbench exits
NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+-]{0,63}$")


class UsageError(ValueError):
    """A mistake in the command line (bad configuration names)."""


def _at_least(minimum: int) -> Callable[[str], int]:
    """argparse type: an integer no smaller than ``minimum``."""
    def parse(text: str) -> int:
        value = int(text)
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be at least {minimum}")
        return value
    return parse


def _price(text: str) -> float:
    """argparse type: a price, 0 or more (0 leaves that cost out)."""
    value = float(text)
    if not value >= 0 or value == float("inf"):
        raise argparse.ArgumentTypeError("must be a finite number, 0 or more")
    return value


def _add_prices(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--gpu-hour-price", type=_price, metavar="USD", help="price the steps at this many USD per "
                        "GPU-hour instead of the run's own --gpu-hour-price (0: no cost figure)")
    parser.add_argument("--kwh-price", type=_price, metavar="USD", help="price the GPUs' measured energy at this "
                        "many USD per kWh instead of the run's own --kwh-price (0: no energy cost figure)")


def _prices(args: argparse.Namespace) -> Prices:
    return Prices(gpu_hour=args.gpu_hour_price, kwh=args.kwh_price)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m specbench.analysis", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    summ = sub.add_parser("summarize", help="per-step table of one run directory")
    summ.add_argument("run_dir", help="run directory (records.jsonl, steps.jsonl, meta.json)")
    summ.add_argument("--json", action="store_true", help="print the table as JSON (schema in analysis/README.md)")
    summ.add_argument("--out", metavar="DIR", help="also write summary.txt/.json/.csv and plots into DIR")
    summ.add_argument("--slo", default="", help="judge SLO attainment and goodput by these targets, e.g. "
                      "ttft=2s,tpot=50ms (default: the SLO the run was started with)")
    _add_prices(summ)
    comp = sub.add_parser("compare", help="baseline against one or more speculative runs, level by level")
    comp.add_argument("baseline_run", help="run directory of the baseline (no speculation)")
    comp.add_argument("spec_runs", nargs="+", metavar="[NAME=]RUN",
                      help="run directory of a speculative configuration; NAME= names it (default: its label)")
    comp.add_argument("--baseline-name", default="baseline", help="the baseline's name in a many-run report")
    comp.add_argument("--out", metavar="DIR", help="write report.md, comparison.csv/.json and plots into DIR")
    comp.add_argument("--json", action="store_true", help="print comparison.json instead of the tables")
    comp.add_argument("--slo", default="", help="compare goodput and capacity under these targets "
                      "(default: the SLO the baseline run was started with)")
    comp.add_argument("--seed", type=_at_least(0), default=DEFAULT_SEED, help="bootstrap seed (default %(default)s)")
    comp.add_argument("--n-boot", type=_at_least(1), default=DEFAULT_N_BOOT,
                      help="bootstrap resamples (default %(default)s)")
    _add_prices(comp)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; returns the exit code (0 ok, 2 bad input, 130 interrupted: one line, never a traceback)."""
    args = build_parser().parse_args(argv)
    try:
        if args.command == "summarize":
            return _summarize(args)
        return _compare(args)
    except (RunFormatError, UsageError, SloError, OutputWriteError) as exc:  # OutputWriteError: a refusing disk
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except KeyboardInterrupt as exc:
        print(f"interrupted ({exc.args[0] if exc.args else 'SIGINT'})", file=sys.stderr)
        return EXIT_INTERRUPTED


def _slo(args: argparse.Namespace) -> Slo | None:
    return parse_slo(args.slo)


def _summarize(args: argparse.Namespace) -> int:
    summary = summarize_run(load_run(args.run_dir), slo=_slo(args), prices=_prices(args))
    print(json.dumps(summary_json(summary), indent=2) if args.json else render_summary_table(summary))
    if args.out:
        paths = write_summary_outputs(summary, args.out)
        print(f"wrote {len(paths)} files to {args.out}", file=sys.stderr)
    return 0


def check_distinct_runs(base: str, others: Sequence[str]) -> None:
    """A run compared with itself (same directory, however written) says nothing: refuse it."""
    seen = {Path(base).resolve(): base}
    for arg in others:
        path = Path(split_name(arg)[1]).resolve()
        if path in seen:
            raise UsageError(f"{arg}: the same run directory as {seen[path]}; compare two different runs")
        seen[path] = arg


def check_report_dir(out: str | None) -> None:
    """A report never goes into a run directory (it would mix with, or be read as, the run's files)."""
    if out and RunDir(Path(out)).has_records():
        raise UsageError(f"--out: {out} is a run directory (it holds {RECORDS_FILE}); choose a report directory")


def _compare(args: argparse.Namespace) -> int:
    check_distinct_runs(args.baseline_run, args.spec_runs)
    check_report_dir(args.out)
    base = load_run(args.baseline_run)
    configs = named_runs(args.spec_runs, args.baseline_name)
    multi = compare_many(base, configs, baseline_name=args.baseline_name, seed=args.seed, n_boot=args.n_boot,
                         slo=_slo(args), prices=_prices(args))
    if len(configs) == 1:  # the two-run comparison, exactly as it always was
        comparison = multi.pairs[0]
        print(json.dumps(comparison_json(comparison), indent=2) if args.json else render_comparison(comparison))
    else:
        from specbench.analysis.reporting.multi_render import render_multi
        from specbench.analysis.reporting.multi_serialize import multi_json

        print(json.dumps(multi_json(multi), indent=2) if args.json else render_multi(multi))
    if args.out:
        paths = write_outputs(multi, args.out)
        print(f"wrote {len(paths)} files to {args.out}", file=sys.stderr)
    return 0


def split_name(arg: str) -> tuple[str | None, str]:
    """'NAME=RUN' -> (NAME, RUN); a plain run directory (or URL) -> (None, arg)."""
    head, sep, tail = arg.partition("=")
    if sep and NAME_RE.match(head) and not Path(arg).exists():
        return head, tail
    return None, arg


def check_names(names: Sequence[str], baseline_name: str, what: str = "configuration") -> None:
    """Names become directory names and table headers: safe characters, unique, not the baseline's."""
    for name in names:
        if not NAME_RE.match(name):
            raise UsageError(f"{what} name {name!r}: expected letters, digits and . _ + - (at most 64)")
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise UsageError(f"{what} name {dup[0]!r} is given twice; names must be unique")
    if baseline_name in names:
        raise UsageError(f"{what} name {baseline_name!r} is the baseline's name; choose another")


def named_runs(args: Sequence[str], baseline_name: str) -> list[tuple[str, RunData]]:
    """Load each [NAME=]RUN; unnamed runs are named by their label, else their directory name, each as a safe file
    name (``file_slug``: a label read from meta.json is data, and a name becomes ``pairs/NAME/``)."""
    loaded = []
    for arg in args:
        name, path = split_name(arg)
        run = load_run(path)
        loaded.append((name or file_slug(run_label(run)) or file_slug(Path(path).resolve().name) or "run", run))
    if len(loaded) > 1:
        check_names([n for n, _ in loaded], baseline_name)
    return loaded

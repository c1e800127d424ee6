"""``python -m analysis``: summarize one run or compare a baseline run with a speculative run.

Bad input (not a run directory, a malformed file) prints one line naming the file and exits 2.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Sequence

from analysis.compare import DEFAULT_N_BOOT, DEFAULT_SEED, compare_runs
from analysis.load import load_run
from analysis.outputs import write_comparison_outputs, write_summary_outputs
from analysis.render import render_comparison, render_summary_table
from analysis.serialize import comparison_json, summary_json
from analysis.summary import summarize_run
from contract.schema import RunFormatError

EXIT_BAD_INPUT = 2


def _at_least(minimum: int) -> Callable[[str], int]:
    """argparse type: an integer no smaller than ``minimum``."""
    def parse(text: str) -> int:
        value = int(text)
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be at least {minimum}")
        return value
    return parse


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m analysis", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    summ = sub.add_parser("summarize", help="per-step table of one run directory")
    summ.add_argument("run_dir", help="run directory (records.jsonl, steps.jsonl, meta.json)")
    summ.add_argument("--json", action="store_true", help="print the table as JSON (schema in README)")
    summ.add_argument("--out", metavar="DIR", help="also write summary.txt/.json/.csv and plots into DIR")
    comp = sub.add_parser("compare", help="baseline against speculative, level by level")
    comp.add_argument("baseline_run", help="run directory of the baseline (no speculation)")
    comp.add_argument("spec_run", help="run directory of the speculative server")
    comp.add_argument("--out", metavar="DIR", help="write report.md, comparison.csv/.json and plots into DIR")
    comp.add_argument("--json", action="store_true", help="print comparison.json instead of the tables")
    comp.add_argument("--seed", type=_at_least(0), default=DEFAULT_SEED, help="bootstrap seed (default %(default)s)")
    comp.add_argument("--n-boot", type=_at_least(1), default=DEFAULT_N_BOOT,
                      help="bootstrap resamples (default %(default)s)")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; returns the exit code (0 ok, 2 bad input)."""
    args = build_parser().parse_args(argv)
    try:
        if args.command == "summarize":
            return _summarize(args)
        return _compare(args)
    except RunFormatError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT


def _summarize(args: argparse.Namespace) -> int:
    summary = summarize_run(load_run(args.run_dir))
    print(json.dumps(summary_json(summary), indent=2) if args.json else render_summary_table(summary))
    if args.out:
        paths = write_summary_outputs(summary, args.out)
        print(f"wrote {len(paths)} files to {args.out}", file=sys.stderr)
    return 0


def _compare(args: argparse.Namespace) -> int:
    comparison = compare_runs(load_run(args.baseline_run), load_run(args.spec_run), seed=args.seed,
                              n_boot=args.n_boot)
    print(json.dumps(comparison_json(comparison), indent=2) if args.json else render_comparison(comparison))
    if args.out:
        paths = write_comparison_outputs(comparison, args.out)
        print(f"wrote {len(paths)} files to {args.out}", file=sys.stderr)
    return 0

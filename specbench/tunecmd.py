"""``specbench tune``'s command line: its arguments and the checks made before any server starts (the job itself
is ``specbench.tune``). Kept apart from ``specbench.cli`` so neither grows past one screenful of concerns."""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from specbench.contract.kschedule import parse_release
from specbench.contract.settings import SuiteSettings, check_budget_fits, duration_arg
from specbench.inputs import InputError, check_fresh_dir
from specbench.tune import VALIDATE_RUNS, TuneJob, run_tune
from specbench.tunefile import TuneFile, load_tune, parse_depths

__all__ = ["add_tune_arguments", "checked_tune", "start_tune", "tune_out"]


def add_tune_arguments(p: argparse.ArgumentParser) -> None:
    """The tune command's own arguments (the load options follow, as for every load command)."""
    p.add_argument("tune_file", help="YAML tune file: a baseline and a speculative launch template with {k} or "
                   "{speculative_config} (config/tune/emulator.yaml, docs/guides/tuning.md)")
    p.add_argument("--out", help="report directory (default reports/tune-YYYYmmdd-HHMMSS); the setting goes to "
                   "OUT/tuned/")
    p.add_argument("--depths", metavar="K,K,...", help="draft tokens per step to try, instead of the file's "
                   "(default 1,2,3,4,5; the baseline is depth 0); refused for a file whose speculative is a list")
    p.add_argument("--validate", action="store_true", help="then start the tuned schedule beside the baseline and "
                   "the best single depth, and say level by level whether it delivered what was predicted")
    p.add_argument("--vllm-release", metavar="X.Y.Z", help="the vLLM release the config is for: 0.24.0 and later "
                   "take the schedule; 0.8.2-0.9.2 the disable_by_batch_size form, written only where it says the "
                   "schedule exactly (one depth, then off from a batch size up); others neither (default: the "
                   "schedule)")
    p.add_argument("--objective", choices=("throughput", "energy"), default="throughput",
                   help="choose each level's depth by throughput (default), or by the GPUs' energy per output token "
                   "among the depths shown to keep --throughput-floor of the best's throughput (needs --gpu-metrics "
                   "or gpu_metrics in the tune file)")
    p.add_argument("--throughput-floor", type=float, default=0.95, metavar="F",
                   help="with --objective energy: the share of the best throughput a depth must be shown to keep "
                   "(the low end of its 95%% interval; default 0.95)")
    p.add_argument("--flush-cache", action="store_true", help="POST /flush_cache before each run")


def checked_tune(args: argparse.Namespace) -> tuple[TuneFile, tuple[int, int, int] | None]:
    """The tune file and the stated vLLM release, every tune argument checked; InputError (one line) otherwise."""
    try:
        depths = parse_depths(args.depths) if args.depths is not None else None
    except ValueError as exc:
        raise InputError(str(exc)) from None
    try:
        release = parse_release(args.vllm_release) if args.vllm_release is not None else None
    except ValueError as exc:
        raise InputError(f"--vllm-release: {exc}") from None
    if not 0 < args.throughput_floor <= 1:
        raise InputError(f"--throughput-floor {args.throughput_floor:g}: expected a share of the best throughput, "
                         "above 0 and at most 1 (e.g. 0.95)")
    tune = load_tune(args.tune_file, depths)
    if args.validate and not tune.takes_config:
        raise InputError(f"--validate: {tune.source}: the speculative command does not take {{speculative_config}}, "
                         "so a schedule cannot be launched (a server that takes one depth is validated by the "
                         "best single depth the tune already measured)")
    return tune, release


def tune_out(args: argparse.Namespace, tune: TuneFile, settings: SuiteSettings, budget_s: float) -> Path:
    """The checks that need the load settings (telemetry for the energy objective, each run's budget share), and
    the report directory, refused if it holds an earlier job (unless --overwrite)."""
    without = [e.name for e in tune.sweep.entries if e.gpu_metrics is None]
    if args.objective == "energy" and not settings.gpu_metrics and without:
        raise InputError(f"--objective energy: {tune.source}: energy per token needs the GPUs' telemetry: give "
                         f"--gpu-metrics URL, or gpu_metrics in the tune file's baseline and speculative entries "
                         f"(missing for {', '.join(without)})")
    if budget_s:
        runs = len(tune.sweep.entries) + (VALIDATE_RUNS if args.validate else 0)
        check_budget_fits(budget_s / runs, len(settings.ladder), f"--time-budget (a run's share, "
                          f"{duration_arg(budget_s / runs)} for {runs} runs)")
    out = Path(args.out) if args.out else Path("reports") / f"tune-{time.strftime('%Y%m%d-%H%M%S')}"
    check_fresh_dir(out, "--out", args.overwrite)
    return out


def start_tune(args: argparse.Namespace, tune: TuneFile, release: tuple[int, int, int] | None, out: Path,
               settings: SuiteSettings, budget_s: float, options: list[str]) -> int:
    depths_text = ", ".join(str(k) for k in sorted(tune.depths.values()))
    print(f"Tune {tune.source}: the baseline and depths {depths_text}, one server after another"
          + (", then a validation run" if args.validate else ""), flush=True)
    return run_tune(TuneJob(tune, out, args.suite_config, args.processes, args.api, settings.api_key(),
                            args.flush_cache, options, verbose=args.verbose, time_budget_s=budget_s,
                            validate=args.validate, release=release, objective=args.objective,
                            floor=args.throughput_floor))

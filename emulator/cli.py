"""Command line: ``python -m specbench.emulator --profile eagle3 --port 30001 [--speed N] [--drift F] [faults]``.

Prints the server URL as the single line on stdout (a human summary goes to stderr), serves until
SIGINT or SIGTERM (or, with ``--parent-pid``, until its launcher is gone), then exits 0. A bad profile
prints one line naming the file and key and exits 2.
"""

from __future__ import annotations

import argparse
import math
import os
import signal
import sys
from pathlib import Path
from typing import Any

import gevent
import gevent.event

from .dcgm import build_telemetry
from .depthschedule import DepthScheduleError, launch_depth
from .profile import Faults, Profile, ProfileError, available_profiles, load_profile, with_depth
from .server import Emulator
from .vintage import VINTAGES

__all__ = ["main"]

_FAULT_FLAGS = {
    "fault_503": "error_503",
    "fault_500": "error_500",
    "fault_429": "error_429",
    "fault_cut": "cut_stream",
    "fault_malformed": "malformed_chunk",
    "fault_stream_error": "stream_error",
    "fault_stall": "stall",
    "fault_abort": "abort",
    "stall_s": "stall_s",
    "fault_seed": "seed",
}


def _finite(text: str) -> float:
    """A float that is neither NaN nor infinite: argparse then names the flag in its one-line error."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"must be a finite number, got {text!r}")
    return value


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m specbench.emulator", description="Emulated SGLang server.")
    parser.add_argument("--profile", default="baseline",
                        help=f"built-in name ({', '.join(available_profiles())}) or path to a YAML file")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=30000, help="0 picks a free port")
    parser.add_argument("--speed", type=float, help="time factor: 10 runs the model ten times faster")
    parser.add_argument("--drift", type=_finite, metavar="F",
                        help="relative speed change per minute of wall time since start: speed(t) = speed * "
                        "max(0.05, 1 + F*t/60); -0.1 is 10%% slower after a minute (profile key drift_per_min; "
                        "default 0)")
    parser.add_argument("--num-speculative-tokens", type=int, metavar="K",
                        help="draft tokens per step (the profile's costs re-anchored at this depth; specbench tune)")
    parser.add_argument("--speculative-config", metavar="JSON",
                        help="vLLM's --speculative-config: num_speculative_tokens and "
                             "num_speculative_tokens_per_batch_size are used, other keys are accepted and ignored")
    parser.add_argument("--max-running-requests", type=int)
    parser.add_argument("--max-queued-requests", type=int, metavar="M",
                        help="requests waiting for a batch slot at most (SGLang's --max-queued-requests; profile key "
                        "max_queued_requests); beyond them a request is refused at once")
    parser.add_argument("--refuse-status", type=int, choices=(429, 503),
                        help="a full queue's answer: 503 as the servers give it (default), 429 as a router or gateway")
    parser.add_argument("--retry-after", type=float, metavar="S",
                        help="a full queue's answer carries Retry-After: S (profile key retry_after_s; default none)")
    parser.add_argument("--startup-delay", type=float, help="seconds (at speed 1) of 503 on /ready and /health")
    parser.add_argument("--seed", type=int, help="seed for per-request randomness")
    parser.add_argument("--vintage", choices=sorted(VINTAGES),
                        help="server release imitated on the wire (profile key vintage; default sglang-0.5.23)")
    parser.add_argument("--prefix-cache", action=argparse.BooleanOptionalAction, default=None,
                        help="serve shared prompt prefixes from an emulated prefix cache (profile key prefix_cache)")
    parser.add_argument("--ledger-text", action=argparse.BooleanOptionalAction, default=None,
                        help="ledger entries carry prompt_text and output_text (profile key ledger_text)")
    parser.add_argument("--ledger-chunk-times", action=argparse.BooleanOptionalAction, default=None,
                        help="ledger entries carry chunk_ms, each token chunk's write time (profile key "
                        "ledger_chunk_times)")
    parser.add_argument("--ledger-file", type=Path, metavar="PATH",
                        help="also append every ledger record to this JSONL file as it happens (truth for tests "
                        "of runs whose server stops before they are checked, such as sweeps)")
    parser.add_argument("--parent-pid", type=int, metavar="PID",
                        help="exit (as on SIGTERM) once PID is no longer this process's parent: a launcher's child")
    gpu = parser.add_argument_group("GPU telemetry (emulator.power, emulator.dcgm)")
    gpu.add_argument("--gpu-telemetry", type=int, metavar="N", default=0,
                     help="emulate N GPUs' power and export it as dcgm-exporter does at GET /_emulator/dcgm/metrics "
                     "(truth: GET /_emulator/energy); 0: off")
    gpu.add_argument("--power", default="", metavar="K=V,...",
                     help="power model over its defaults: idle_w, active_w (per GPU), running_w, pass_j (whole "
                     "server), jitter, seed, average_s")
    gpu.add_argument("--gpu-telemetry-fields", default="power,energy,util", metavar="LIST",
                     help="DCGM fields exported: power (DCGM_FI_DEV_POWER_USAGE), energy "
                     "(DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION), util (DCGM_FI_DEV_GPU_UTIL)")
    faults = parser.add_argument_group("faults (fractions of requests, 0..1)")
    for flag, key in _FAULT_FLAGS.items():
        kind = int if key == "seed" else float
        faults.add_argument("--" + flag.replace("_", "-"), dest=flag, type=kind, metavar="N" if kind is int else "F",
                            help=f"faults.{key}")
    return parser


#: Command-line flags (argparse dest) that override a profile key of the same meaning.
_PROFILE_FLAGS = {"max_running_requests": "max_running_requests", "max_queued_requests": "max_queued_requests",
                  "refuse_status": "refuse_status", "retry_after": "retry_after_s",
                  "startup_delay": "startup_delay_s", "seed": "seed", "drift": "drift_per_min",
                  "vintage": "vintage", "prefix_cache": "prefix_cache", "ledger_text": "ledger_text",
                  "ledger_chunk_times": "ledger_chunk_times"}


def _overrides(args: argparse.Namespace) -> dict[str, Any]:
    out: dict[str, Any] = {key: getattr(args, flag) for flag, key in _PROFILE_FLAGS.items()
                           if getattr(args, flag) is not None}
    faults = {key: getattr(args, flag) for flag, key in _FAULT_FLAGS.items() if getattr(args, flag) is not None}
    if faults:
        out["faults"] = faults
    return out


def _depth(profile: Profile, args: argparse.Namespace) -> Profile:
    """``--num-speculative-tokens`` / ``--speculative-config``: the depth (and schedule) the server launches with."""
    if args.speculative_config is not None:
        where = f"--speculative-config (profile {profile.name})"
        try:
            depth, schedule = launch_depth(args.speculative_config)
        except DepthScheduleError as exc:
            raise ProfileError(where, "", str(exc)) from None
        if args.num_speculative_tokens is not None and args.num_speculative_tokens != depth:
            raise ProfileError(where, "num_speculative_tokens", f"{depth} disagrees with --num-speculative-tokens "
                               f"{args.num_speculative_tokens}")
        return with_depth(profile, depth, schedule)
    if args.num_speculative_tokens is not None:
        return with_depth(profile, args.num_speculative_tokens)
    return profile


def _summary(emulator: Emulator) -> str:
    p = emulator.profile
    spec = p.speculative
    mode = f"{spec.algorithm} steps={spec.num_steps} topk={spec.eagle_topk}" if spec else "no speculation"
    if spec is not None and spec.k_schedule:
        mode += " schedule " + ",".join(f"{lo}-{hi}:{k}" for lo, hi, k in spec.k_schedule)
    active = [k for k, v in p.faults.kinds() if v > 0] if p.faults != Faults() else []
    faults = f", faults: {', '.join(active)}" if active else ""
    drift = f", drift {p.drift_per_min:+g}/min" if p.drift_per_min else ""
    return (f"emulator: profile {p.name} ({p.vintage}, {mode}, max_running_requests={p.max_running_requests}, "
            f"speed {p.speed:g}{drift}{faults}) on {emulator.url}")


def _watch_parent(pid: int, stop: gevent.event.Event, every_s: float = 0.5) -> None:
    """Set ``stop`` once ``pid`` is gone: the orphaned child is re-parented, so ``getppid`` changes."""
    while os.getppid() == pid:
        gevent.sleep(every_s)
    print(f"emulator: parent process {pid} is gone; stopping", file=sys.stderr, flush=True)
    stop.set()


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        profile = load_profile(args.profile, speed=args.speed, overrides=_overrides(args))
        profile = _depth(profile, args)
    except ProfileError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    try:
        telemetry = build_telemetry(profile, args.gpu_telemetry, args.power, args.gpu_telemetry_fields) \
            if args.gpu_telemetry else None
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    try:
        emulator = Emulator(profile, args.host, args.port, ledger_file=args.ledger_file, telemetry=telemetry)
        emulator.start()
    except OSError as exc:
        if args.ledger_file is not None and exc.filename == str(args.ledger_file):
            print(f"error: --ledger-file {args.ledger_file}: {exc.strerror or exc}", file=sys.stderr)
            return 2
        print(f"error: cannot listen on {args.host}:{args.port}: {exc.strerror or exc}", file=sys.stderr)
        return 1
    stop = gevent.event.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        gevent.signal_handler(signum, stop.set)
    if args.parent_pid is not None:
        gevent.spawn(_watch_parent, args.parent_pid, stop)
    print(emulator.url, flush=True)
    print(_summary(emulator), file=sys.stderr, flush=True)
    stop.wait()
    emulator.stop()
    print("emulator: stopped", file=sys.stderr, flush=True)
    return 0

"""``OUT/tuned/``: what a depth tune hands back, ready to launch.

* ``tune.json``: every level's candidates, the depth chosen and why, the schedule and the best single depth;
* ``vllm-speculative-config.json``: vLLM's ``--speculative-config`` with the schedule (vLLM 0.24.0 and later),
  the ``disable_by_batch_size`` form for a stated release that has it instead, or no file (and a line saying
  why) for a release that has neither;
* ``launch.txt``: one line per server kind: vLLM with the schedule, and the best single depth for servers that
  take one depth per launch (SGLang, llama.cpp, and vLLM before 0.24.0);
* ``README.md``: how to use them, what they were measured on, and the per-level table.

A partial tune (a level where a candidate failed or was not measured, or the job interrupted) writes only
``README.md`` and ``tune.json``, both saying it is partial and why, and neither a config nor launch lines: what
it measured is there to read, nothing there to launch. The folder appears whole or not at all (it is written
beside and renamed into place).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from specbench.analysis.reporting.files import add_report_section, write_whole
from specbench.analysis.reporting.tune_report import depth_name, schedule_text, tune_json, tune_table
from specbench.analysis.verdicts.tune import ENERGY_TIE, TOO_FEW, TUNE_MARGIN, TuneResult, ValidatedLevel
from specbench.contract.kschedule import (
    DISABLE_FIELD,
    SCHEDULE_SINCE,
    KScheduleError,
    disable_form,
    release_form,
    speculative_config,
)

TUNED_DIR = "tuned"
VLLM_CONFIG = "vllm-speculative-config.json"
TUNED_FILES = (VLLM_CONFIG, "launch.txt", "tune.json", "README.md", "validation.json")  # all tuned/ ever holds


@dataclass(frozen=True)
class TuneContext:
    """What the tune was measured on, for the README and the launch lines."""

    source: str  # the tune file
    server: Mapping[str, Any]  # the speculative run's meta.json ``server``: kind, model, ...
    ladder: tuple[int, ...]
    base_config: Mapping[str, Any]
    release: tuple[int, int, int] | None  # --vllm-release
    max_batch: int


def _release_text(release: tuple[int, int, int] | None) -> str:
    return "not stated" if release is None else ".".join(map(str, release))


def vllm_config(result: TuneResult, ctx: TuneContext) -> tuple[dict[str, Any] | None, str]:
    """The vLLM config for the stated release and a sentence on its form; None where the release takes neither."""
    deepest = max(result.depths)
    form = release_form(ctx.release)
    if not result.complete:
        return None, f"no config written: the tune is partial ({'; '.join(result.problems)})"
    if result.keyed_on != "batch":
        note = " Keyed on concurrency (the server reported no running count): check it against your batch sizes."
    else:
        note = ""
    if form == "schedule":
        since = ".".join(map(str, SCHEDULE_SINCE))
        return (speculative_config(ctx.base_config, deepest, result.schedule),
                f"vLLM {since} or later (num_speculative_tokens_per_batch_size).{note}")
    if form == "disable":
        return _disable_config(result, ctx, note)
    return None, (f"vLLM {_release_text(ctx.release)} takes neither num_speculative_tokens_per_batch_size (0.24.0 "
                  f"on) nor an effective {DISABLE_FIELD} (0.8.2 to 0.9.2): no config written; use the best single "
                  f"depth in launch.txt (releases 0.4.3 to 0.8.1 had a --speculative-disable-by-batch-size flag "
                  f"instead, not written here).")


def _disable_config(result: TuneResult, ctx: TuneContext, note: str) -> tuple[dict[str, Any] | None, str]:
    """The 0.8.2-0.9.2 form where it says the schedule exactly (one depth, off from N up); else no config."""
    release = _release_text(ctx.release)
    try:
        depth, threshold = disable_form(result.schedule)
    except KScheduleError as exc:
        return None, (f"no config written: vLLM {release} has no schedule, only {DISABLE_FIELD} (one depth below N "
                      f"running requests, none from N up), and {exc}; the best single depth is in launch.txt.{note}")
    config = speculative_config(ctx.base_config, depth)
    if threshold is None:
        return config, f"vLLM {release}: the schedule is one depth at every batch size, K={depth}.{note}"
    config[DISABLE_FIELD] = threshold
    return config, (f"vLLM {release} has no schedule; this is its {DISABLE_FIELD} form, which says the schedule "
                    f"exactly: K={depth} below {threshold} running requests, no speculation from {threshold} up.{note}")


def launch_lines(result: TuneResult, config: Mapping[str, Any] | None) -> list[str]:
    """One launch line per server kind."""
    lines = []
    if config is not None:
        lines.append(f"vllm serve MODEL --speculative-config '{json.dumps(config, separators=(',', ':'))}'")
    depth = result.best_single
    if depth is not None:
        lines += [f"# the best single depth over the measured levels: K={depth}",
                  f"python -m sglang.launch_server --model-path MODEL --speculative-algorithm EAGLE3 "
                  f"--speculative-draft-model-path DRAFT --speculative-num-steps {depth} --speculative-eagle-topk 1 "
                  f"--speculative-num-draft-tokens {depth + 1}",
                  f"llama-server -m MODEL -md DRAFT --spec-draft-n-max {depth}   # builds before the 2026 rename: "
                  f"--draft-max {depth}"]
    return lines


def write_tuned(out: Path, result: TuneResult, ctx: TuneContext) -> tuple[Path, str]:
    """Write ``out/tuned/`` whole (beside it first, then renamed into place, so an interrupt leaves the earlier
    folder or none, never a part); returns its path and the vLLM config's note. Raises OutputWriteError naming a
    file the disk refused."""
    folder = out / TUNED_DIR
    begun = out / f".{TUNED_DIR}.part"
    config, config_note = vllm_config(result, ctx)
    try:
        shutil.rmtree(begun, ignore_errors=True)
        begun.mkdir(parents=True)
        if config is not None:
            write_whole(begun / VLLM_CONFIG, json.dumps(config, indent=2) + "\n")
        if result.complete:
            write_whole(begun / "launch.txt", "\n".join(launch_lines(result, config)) + "\n")
        data = {**tune_json(result), "vllm_config_note": config_note, "vllm_release": _release_text(ctx.release),
                "server": dict(ctx.server), "ladder": list(ctx.ladder), "tune_file": ctx.source}
        write_whole(begun / "tune.json", json.dumps(data, indent=2) + "\n")
        write_whole(begun / "README.md", readme(result, ctx, config is not None, config_note))
        _replace_folder(begun, folder)
    finally:
        shutil.rmtree(begun, ignore_errors=True)
    return folder, config_note


def _replace_folder(begun: Path, folder: Path) -> None:
    """``begun`` becomes ``folder``; an earlier ``folder`` (--overwrite) loses the files a tune writes first."""
    for name in TUNED_FILES:
        with contextlib.suppress(OSError):
            (folder / name).unlink()
    with contextlib.suppress(OSError):
        folder.rmdir()
    if not folder.exists():
        os.replace(begun, folder)
        return
    for path in sorted(begun.iterdir()):  # the earlier folder holds something else of the user's: kept beside
        os.replace(path, folder / path.name)


def partial_readme(result: TuneResult, ctx: TuneContext) -> str:
    """A partial tune's README: what is missing, and that nothing here is a setting to launch."""
    return "\n".join([
        "# Tuned speculative depth: PARTIAL, not a setting to use",
        "",
        f"`specbench tune {ctx.source}` did not measure every depth at every level, so it wrote no vLLM config and "
        "no launch lines. What was missing:",
        "",
        *(f"- {problem}" for problem in result.problems),
        "",
        "Fix what the lines name (a server that failed or stopped, an interrupted job) and run the tune again. The "
        "table below is what was measured, for reading only.",
        "",
        tune_table(result),
        "",
    ])


def readme(result: TuneResult, ctx: TuneContext, has_config: bool, config_note: str) -> str:
    if not result.complete:
        return partial_readme(result, ctx)
    server = ctx.server
    what = f"{server.get('kind', 'a server')} serving {server.get('model', 'its model')}"
    use = (f"- vLLM: `vllm serve MODEL --speculative-config \"$(cat {VLLM_CONFIG})\"` ({config_note})"
           if has_config else f"- vLLM: {config_note}")
    single = depth_name(result.best_single)
    return "\n".join([
        "# Tuned speculative depth",
        "",
        f"Measured {time.strftime('%Y-%m-%d')} by `specbench tune {ctx.source}` on {what}, ladder "
        f"{', '.join(map(str, ctx.ladder))}, depths {', '.join(depth_name(k) for k in result.depths)}.",
        "",
        "## Use it",
        "",
        use,
        f"- Servers that take one depth per launch (SGLang, llama.cpp): {single}, the best single depth over the "
        "measured levels (launch.txt has the lines).",
        "",
        f"Schedule ({result.key_note}): {schedule_text(result)}, up to {ctx.max_batch} running requests (the "
        "tune file's max_batch).",
        "",
        "## How each level was chosen",
        "",
        f"Per level the depth chosen is the smallest whose throughput is not worse than the best beyond noise and is "
        f"shown within {TUNE_MARGIN:.0%} of it (95% interval of its ratio to the best); \"off\" is speculation off "
        "(the baseline). Each \"over\" column is the chosen depth's throughput over that candidate's, with its 95% "
        "interval. \"Predicted\" is what the chosen depth should deliver, cross-fitted: each half of the window "
        "batches (even, odd) chose a depth by the same rule and the other half measured it, so the measurements "
        "that chose do not also predict (a depth's own maximum reads high).",
        "",
        *([f"Objective: energy. Per level the depth chosen has the least GPU energy per output token among those "
           f"shown to keep at least {result.floor:.0%} of the best's throughput (the 95% interval's low end); "
           f"energies within {ENERGY_TIE:.0%} of the least count as one, and the shallower depth is taken.", ""]
          if result.objective == "energy" and result.floor is not None else []),
        tune_table(result),
        "",
        "## What it is a claim about",
        "",
        "A schedule tuned on one workload is a claim about that workload: the prompts, output lengths and sampling "
        "of this run, on this server build and hardware. Re-tune when any of them changes, and check it with "
        "`specbench tune --validate`.",
        "",
    ])


def _predicted(lv: ValidatedLevel) -> str:
    if not lv.predicted_tok_s:
        return "-"
    band = (f" ({lv.predicted_low:.0f}-{lv.predicted_high:.0f})"
            if lv.predicted_low is not None and lv.predicted_high is not None else "")
    return f"{lv.predicted_tok_s:.0f}{band}"


def validation_section(levels: tuple[ValidatedLevel, ...], fixed: str) -> str:
    """The validation table: did the schedule deliver what the tune predicted, level by level?"""
    outcome = {"as_predicted": "as predicted", "short": "short of the prediction", "above": "above the prediction",
               "unknown": "no interval", "too_few": TOO_FEW}
    rows = ["| C | depth | predicted tok/s (95%) | delivered tok/s | delivered / predicted | over baseline | "
            f"over {fixed} | outcome |", "|---|---|---|---|---|---|---|---|"]
    for lv in levels:
        delivered = f"{lv.delivered_tok_s:.0f}" if lv.delivered_tok_s else "-"
        rows.append(f"| {lv.target_c} | {depth_name(lv.depth)} | {_predicted(lv)} | {delivered} | "
                    f"{lv.vs_predicted.text()} | {lv.vs_baseline.text()} | {lv.vs_fixed.text()} | "
                    f"{outcome[lv.outcome]} |")
    short = [lv.target_c for lv in levels if lv.outcome == "short"]
    starved = [lv.target_c for lv in levels if lv.outcome == "too_few"]
    verdict = ("The schedule delivered what the tune predicted at every level with an interval." if not short else
               "The schedule fell short of the prediction at C=" + ", ".join(map(str, short)) + ".")
    if starved:
        verdict += (" No interval at C=" + ", ".join(map(str, starved)) + ": a window there finished fewer requests "
                    "than the level's minimum (a longer --time-budget gives it more).")
    return "\n".join(["## Validation", "", f"The tuned schedule (a depth per batch size, not one fixed depth) "
                      f"measured beside the baseline and the best fixed depth ({fixed}) in one run. \"Predicted\" "
                      "is cross-fitted: each half of the tune's window batches chose a depth and the other half "
                      f"measured it, so the measurements that chose do not also predict. {verdict}", "", *rows])


def write_validation(folder: Path, levels: tuple[ValidatedLevel, ...], fixed: str) -> str:
    """Add the validation to tuned/README.md and tuned/validation.json; returns the section."""
    section = validation_section(levels, fixed)
    add_report_section(folder / "README.md", section)
    data = [{"target_c": lv.target_c, "depth": lv.depth, "predicted_tok_s": lv.predicted_tok_s,
             "predicted_low": lv.predicted_low, "predicted_high": lv.predicted_high,
             "delivered_tok_s": lv.delivered_tok_s, "outcome": lv.outcome,
             **{name: {"ratio": iv.ratio, "low": iv.low, "high": iv.high, "note": iv.note}
                for name, iv in (("vs_predicted", lv.vs_predicted), ("vs_baseline", lv.vs_baseline),
                                 ("vs_fixed", lv.vs_fixed))}} for lv in levels]
    write_whole(folder / "validation.json", json.dumps({"fixed": fixed, "prediction": "cross-fitted",
                                                        "levels": data}, indent=2) + "\n")
    return section


__all__ = ["TUNED_DIR", "TUNED_FILES", "VLLM_CONFIG", "TuneContext", "launch_lines", "vllm_config", "write_tuned",
           "write_validation"]

"""Each ``specbench compare`` run's own DCGM exporters (#40): ``--baseline-gpu-metrics`` and ``--spec-gpu-metrics``.

A baseline and a speculative server usually sit on different GPUs, each watched by its own dcgm-exporter. The suite
option ``--gpu-metrics`` (command line or profile) hands the same exporters to every run; these two give a run its
own instead, which its Locust child gets as its ``--gpu-metrics``:

    --baseline-gpu-metrics URL[,URL...]          the baseline's exporters
    --spec-gpu-metrics [NAME=]URL[,URL...]       a speculative server's; NAME= (its --spec name) when there are
                                                 several, the option repeated once per server

Either also takes ``nvml`` or ``nvml:I[,I...]`` (GPUs of the load machine, ``contract.nvml``).

Once either is given, every run needs exporters, its own or ``--gpu-metrics``: an energy ratio needs both sides.
Each mistake is one line naming the option and what was expected (``InputError``: exit 2, before any load).
"""

from __future__ import annotations

from collections.abc import Sequence

from specbench.contract.gpu_metrics import is_nvml, parse_exporter_urls
from specbench.contract.nvml import NvmlError, check_nvml
from specbench.contract.urls import UrlError, shown_url
from specbench.inputs import InputError

BASELINE_FLAG = "--baseline-gpu-metrics"
SPEC_FLAG = "--spec-gpu-metrics"
SHARED_FLAG = "--gpu-metrics"


def _urls(text: str, flag: str) -> str:
    """Checked exporter URLs (dcgm-exporter's /metrics added where no path is given), comma-joined; ``nvml``
    checked here too (NVML opens on this machine), before any run."""
    try:
        urls = parse_exporter_urls(text, flag)
        for entry in filter(is_nvml, urls):
            check_nvml(entry, flag)
    except (UrlError, NvmlError) as exc:
        raise InputError(str(exc)) from None
    if not urls:
        raise InputError(f"{flag}: expected URL[,URL...] of DCGM exporters (e.g. http://GPU-HOST:9400), got "
                         f"{text!r}")
    return ",".join(urls)


def _spec_entry(text: str, names: Sequence[str]) -> tuple[str, str]:
    """One --spec-gpu-metrics value -> (the --spec name it is for, its URLs)."""
    from specbench.analysis.cli import (
        split_name,  # as --spec NAME=URL is read (specbench.cli); here, not at import: heavy
    )

    name, urls = split_name(text.strip())
    if name is None:
        if len(names) > 1:
            raise InputError(f"{SPEC_FLAG} {shown_url(text)}: name the speculative server when comparing several "
                             f"({SPEC_FLAG} NAME=URL[,URL...], NAME one of {', '.join(names)})")
        return names[0], _urls(text, SPEC_FLAG)
    if name not in names:
        raise InputError(f"{SPEC_FLAG} {name}=...: no --spec is named {name!r} (expected one of "
                         f"{', '.join(names)})")
    return name, _urls(urls, f"{SPEC_FLAG} {name}")


def run_exporters(baseline: str | None, specs: Sequence[str] | None, baseline_name: str,
                  spec_names: Sequence[str], shared: Sequence[str]) -> dict[str, str]:
    """Run name -> its own exporters (the child's ``--gpu-metrics`` value), for the runs given their own.

    ``shared``: the validated ``--gpu-metrics`` (command line or profile), which the other runs keep. Empty when
    neither option is given; raises InputError on a bad URL, an unknown or repeated name, or a run left with no
    exporters while another has its own."""
    own: dict[str, str] = {}
    if baseline is not None:
        own[baseline_name] = _urls(baseline, BASELINE_FLAG)
    for text in specs or ():
        name, urls = _spec_entry(text, spec_names)
        if name in own:
            raise InputError(f"{SPEC_FLAG}: {name}'s exporters are given twice; give each server's once "
                             "(URL,URL for several)")
        own[name] = urls
    if not own or shared:
        return own
    missing = [name for name in (baseline_name, *spec_names) if name not in own]
    if missing:
        given = BASELINE_FLAG if baseline is not None else SPEC_FLAG
        needed = f"{BASELINE_FLAG} URL" if baseline_name in missing else f"{SPEC_FLAG} [NAME=]URL"
        raise left_without(given, missing, needed)
    return own


def left_without(where: str, missing: Sequence[str], needed: str) -> InputError:
    """The one line for runs left without exporters while others have their own (compare's options, a sweep
    file's entries): an energy ratio needs both sides."""
    return InputError(f"{where}: {', '.join(missing)} would have no GPU metrics, and an energy comparison needs "
                      f"every run's: give {needed}, or {SHARED_FLAG} URL for the runs without their own")


def with_own_exporters(extra: Sequence[str], urls: str | None) -> list[str]:
    """A run's Locust options: ``extra`` with its ``--gpu-metrics`` replaced by ``urls`` (unchanged when None)."""
    if urls is None:
        return list(extra)
    kept: list[str] = []
    skip = False
    for arg in extra:
        if skip:
            skip = False
        elif arg == SHARED_FLAG:
            skip = True  # and its value
        elif not arg.startswith(SHARED_FLAG + "="):
            kept.append(arg)
    return [*kept, SHARED_FLAG, urls]

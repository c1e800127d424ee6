"""What ``compare`` / ``sweep --overwrite`` clears beside the runs it makes again: an earlier job's runs.

A comparison's output holds one run directory per configuration (``OUT/NAME``), sub-runs inside them
(``refined/round-N``, ``paired``, ``remeasured``: ``contract.rundir.SUB_RUNS``) and, for a sweep, each server's
log (``servers/NAME.log``). Rerun into the same directory with other configurations, the old ones would stay
beside the new report, and a reader (or a later ``python -m specbench.analysis compare``) would take them for
this job's. Only what the suite
recognisably made is removed: a directory whose ``meta.json`` names the run's label as the directory's
name (every compare and sweep run is labelled by its configuration's name), and in it only the run files
(``contract.rundir.RUN_FILES``) and Locust's log; a directory holding anything else is left whole.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable
from pathlib import Path

from specbench.contract.rundir import RunDir, server_log


def run_label(run_dir: Path) -> str | None:
    """The label in a run directory's meta.json, or None when there is none to read."""
    return RunDir(run_dir).label()


def _clear_run(run_dir: Path, label: str) -> bool:
    """Remove a run directory the suite made for ``label`` (its sub-runs too); True when it is gone."""
    run = RunDir(run_dir)
    if not run_dir.is_dir() or run_dir.is_symlink() or run.label() != label:
        return False
    if not run.holds_only_ours():
        return False  # a file we never write: someone else's too, so the directory is left whole
    for sub in run.sub_run_roots():
        _clear_refined(sub, label)
    run.clear(log=True)
    try:
        run_dir.rmdir()
    except OSError:
        return False  # something else is in it: not ours to remove
    return True


def _clear_refined(root: Path, label: str) -> None:
    """``refined/round-N`` (or ``paired``, ``remeasured`` itself): each sub-run of ``label``, then the folder if left
    empty."""
    if not root.is_dir() or root.is_symlink():
        return
    if run_label(root) == label:
        _clear_run(root, label)
        return
    for sub in sorted(root.iterdir()):
        _clear_run(sub, label)
    with contextlib.suppress(OSError):  # something else is in it: kept
        root.rmdir()


def clear_earlier_job(out: Path, names: Iterable[str]) -> list[str]:
    """Before a compare or sweep writes into ``out`` (given --overwrite): remove the run directories of
    configurations that are not among ``names`` and that an earlier job made, with a sweep's log of each, and the
    refinement rounds of the configurations that will run again (each run's own files are cleared as it starts).
    Returns the names of the run directories removed."""
    keep = set(names)
    if not out.is_dir():
        return []
    removed = []
    for child in sorted(out.iterdir()):
        if child.name in keep:
            for sub in RunDir(child).sub_run_roots():
                _clear_refined(sub, child.name)
        elif _clear_run(child, child.name):
            removed.append(child.name)
            server_log(out, child.name).unlink(missing_ok=True)
    return removed


def clear_earlier_repeats(out: Path, names: Iterable[str], repeats: int, prefix: str) -> list[str]:
    """compare --repeats: in each ``OUT/<prefix>K`` of an earlier job, the runs of configurations not among
    ``names`` (all of them where K is above this job's ``repeats``) as ``clear_earlier_job`` does, then the folder
    itself when nothing else is left in it. Returns the run directories removed, as ``<prefix>K/NAME``."""
    if not out.is_dir():
        return []
    removed = []
    for child in sorted(out.glob(f"{prefix}*")):
        number = child.name[len(prefix):]
        if not child.is_dir() or child.is_symlink() or not number.isdigit():
            continue
        keep = list(names) if int(number) <= repeats else []
        removed += [f"{child.name}/{name}" for name in clear_earlier_job(child, keep)]
        with contextlib.suppress(OSError):  # something else is in it: kept
            child.rmdir()
    return removed

"""What ``compare`` / ``sweep --overwrite`` clears beside the runs it makes again: an earlier job's runs.

A comparison's output holds one run directory per configuration (``OUT/NAME``), refinement rounds inside them
(``refined/round-N``, ``paired``) and, for a sweep, each server's log (``servers/NAME.log``). Rerun into the same
directory with other configurations, the old ones would stay beside the new report, and a reader (or a
later ``python -m specbench.analysis compare``) would take them for this job's. Only what the suite
recognisably made is removed: a directory whose ``meta.json`` names the run's label as the directory's
name (every compare and sweep run is labelled by its configuration's name), and in it only the run files
(``contract.schema.RUN_FILES``) and Locust's log; a directory holding anything else is left whole.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterable
from pathlib import Path

from specbench.contract.schema import LOG_FILE, META_FILE, RUN_FILES

REFINE_DIRS = ("refined", "paired")  # specbench.refine's sub-runs inside a configuration's run directory
SERVER_LOGS = "servers"  # a sweep's server logs, SERVER_LOGS/NAME.log
OURS = frozenset((*RUN_FILES, LOG_FILE, *REFINE_DIRS))  # what a run directory of ours holds


def run_label(run_dir: Path) -> str | None:
    """The label in a run directory's meta.json, or None when there is none to read."""
    try:
        meta = json.loads((run_dir / META_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    settings = meta.get("settings") if isinstance(meta, dict) else None
    label = settings.get("label") if isinstance(settings, dict) else None
    return label if isinstance(label, str) else None


def _clear_run(run_dir: Path, label: str) -> bool:
    """Remove a run directory the suite made for ``label`` (its refinement rounds too); True when it is gone."""
    if not run_dir.is_dir() or run_dir.is_symlink() or run_label(run_dir) != label:
        return False
    if any(p.name not in OURS for p in run_dir.iterdir()):
        return False  # a file we never write: someone else's too, so the directory is left whole
    for sub in REFINE_DIRS:
        _clear_refined(run_dir / sub, label)
    for name in (*RUN_FILES, LOG_FILE):
        (run_dir / name).unlink(missing_ok=True)
    try:
        run_dir.rmdir()
    except OSError:
        return False  # something else is in it: not ours to remove
    return True


def _clear_refined(root: Path, label: str) -> None:
    """``refined/round-N`` (or ``paired`` itself): each sub-run of ``label``, then the folder if left empty."""
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
            for sub in REFINE_DIRS:
                _clear_refined(child / sub, child.name)
        elif _clear_run(child, child.name):
            removed.append(child.name)
            (out / SERVER_LOGS / f"{child.name}.log").unlink(missing_ok=True)
    return removed

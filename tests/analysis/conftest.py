"""Shared synthetic runs: the seed case is written and compared once per test session."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))  # synthetic_runs, whatever pytest's import mode

from synthetic_runs import seed_specs, write_run

from specbench.analysis.records.load import load_run
from specbench.analysis.verdicts.compare import Comparison, compare_runs


@pytest.fixture(scope="session")
def seed_dirs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(baseline, EAGLE-3) run directories that stream exactly the seed case's tok/s at every level."""
    root = tmp_path_factory.mktemp("seed")
    base, spec = seed_specs()
    return write_run(root / "baseline", base), write_run(root / "eagle3", spec)


@pytest.fixture(scope="session")
def seed_comparison(seed_dirs: tuple[Path, Path]) -> Comparison:
    return compare_runs(load_run(seed_dirs[0]), load_run(seed_dirs[1]))

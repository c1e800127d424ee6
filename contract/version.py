"""The suite's version: one place, read by the package build (pyproject's dynamic version), ``specbench
--version`` and every run's meta.json (``suite_version``), so the three cannot disagree."""

SUITE_VERSION = "0.1.0"

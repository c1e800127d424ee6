"""From a run directory to one run's figures: loading, windows, per-request figures, the step table, warnings.

May import ``analysis.stats``; never the verdicts, reporting or charts above it. Map: analysis/README.md.
"""

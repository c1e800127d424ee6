"""Interval estimators: over a measured window (the token-rate series, batch means, the bootstrap fallback)
and of a share (the Wilson interval).

The bottom layer of ``analysis``: imports nothing of it (only ``contract``), so the live ladder's ``--step-ci``
(``shapes.ladder``) uses the same estimator as the reports without loading the rest. Map: analysis/README.md.
"""

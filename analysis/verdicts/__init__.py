"""Runs judged against each other: ratios and intervals, crossover, recommendation, policy, SLO capacity,
output equivalence, the decomposition and the "why" lines, saturation and refinement.

Returns data (dataclasses and sentences), never layout: may import ``analysis.stats``, ``analysis.records`` and
the cell formats of ``analysis.table``; never reporting or charts. Map: analysis/README.md.
"""

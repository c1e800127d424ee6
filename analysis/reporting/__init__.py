"""Text out of figures and verdicts: terminal tables, report.md and report.html, JSON and CSV, the web UI's tab.

May import every layer below it; never ``analysis.charts``, and never matplotlib, so the text outputs and the
web UI's Tokens tab stay light. Map: analysis/README.md.
"""

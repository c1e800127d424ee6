"""``specbench``: the suite's command line (demo, run, compare, sweep) over the load side and the analysis.

It starts the emulated servers or the user's server commands, checks each server before load
(``preflight.py``), runs the ladder once per server with identical settings (``loadrun.py``), and hands the
run directories to ``analysis`` for the report.
"""

"""Locust LoadTestShape classes: which step the run is in and how many users (or requests/s) it asks for.

``ladder.py`` walks the closed-loop concurrency ladder (C = 1, 2, 5, ...) and closes each step's measured
window; ``rate.py`` does the same for open-loop request rates. ``books.py`` keeps each step's accounts
(warm-up, steady window, requests measured) that become ``steps.jsonl``.
"""

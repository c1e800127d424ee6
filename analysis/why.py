"""Why a level came out as it did, in the servers' own words: one line per level where the data support one.

Built from the server-side figures of each step (``analysis.server_side``) and the load processes' CPU:
a server that queued because it capped its running batch, a KV cache near full, acceptance that fell as
load rose, a client that ran out of CPU. Levels without such evidence get no line rather than a guess.
"""

from __future__ import annotations

from collections.abc import Sequence

from analysis.summary import StepRow
from contract.policy import CLIENT_BOUND_CPU

MIN_QUEUED = 1.0  # mean requests waiting for a slot before queueing counts as a cause
KV_FULL = 0.90
ACCEPT_DROP = 0.90  # acceptance length below this share of its value at the lowest level


def _side(name: str, row: StepRow, other: StepRow) -> list[str]:
    found = []
    queued = row.server_queued
    other_queued = other.server_queued
    if queued is not None and queued >= MIN_QUEUED and (other_queued is None or other_queued < queued / 2):
        cap = f": capped at {row.server_running_max:.0f} running" if row.server_running_max is not None else ""
        found.append(f"{name} queued {queued:.0f} requests on average{cap}")
    if row.server_kv_usage is not None and row.server_kv_usage >= KV_FULL:
        found.append(f"{name} KV cache {row.server_kv_usage:.0%} full")
    if row.client_cpu_max is not None and row.client_cpu_max > CLIENT_BOUND_CPU:
        found.append(f"{name}'s load process used {row.client_cpu_max:.0%} of a core: the client may set the pace")
    return found


def accept_length(row: StepRow) -> float | None:
    """The server's acceptance length when it reports one, else the one the records give."""
    return row.server_accept_length if row.server_accept_length is not None else row.accept_length


def level_why(base: StepRow, spec: StepRow, spec_rows: Sequence[StepRow]) -> str | None:
    """The reasons for one level, joined by '; ', or None when the data show none."""
    reasons = [*_side("spec", spec, base), *_side("baseline", base, spec)]
    measured = [r for r in spec_rows if r.window_s and accept_length(r) is not None]
    first = min(measured, key=lambda r: r.target_c) if measured else None
    now = accept_length(spec)
    if first is not None and now is not None and first.target_c < spec.target_c:
        then = accept_length(first)
        if then and now < ACCEPT_DROP * then:
            reasons.append(f"spec acceptance length {now:.2f}, down from {then:.2f} at C={first.target_c}")
    return "; ".join(reasons) or None

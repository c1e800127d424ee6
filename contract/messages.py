"""The names of the suite's custom Locust messages between the master and its workers, in one place.

Why one module: both ends of every message (the master's handlers and the workers' senders, the shape on the
master among them) must spell a name the same way; a name declared beside one end was imported by the other
from there. Why in ``contract``: the shapes (``shapes.ladder``) and the load side (``locustfiles``) both speak
them, and the shapes sit below the load side, so the names sit below both. Each line says who sends it, to whom,
and what ``data`` holds. With the local runner ``send_message`` calls the handler directly, so the same names
serve both modes.
"""

from __future__ import annotations

# -- the run and its steps (the shape and the hooks) --
PLAN_MESSAGE = "specbench_plan"  # master -> workers: API, model, run directory and server of this run
STEP_MESSAGE = "specbench_step"  # master -> workers: the current step (shapes.live.LiveStep)
START_MESSAGE = "specbench_start"  # worker -> master: a request started
RECORD_MESSAGE = "specbench_record"  # worker -> master: {"n": its record number, "record": the whole record}
DROP_MESSAGE = "specbench_drop"  # worker -> master: open loop, requests due while every user was busy

# -- a worker's handshake and clock (locustfiles.link, locustfiles.fleet) --
HELLO_MESSAGE = "specbench_hello"  # worker -> master: {"token", "t0", "pid", "cwd"}
WELCOME_MESSAGE = "specbench_welcome"  # master -> worker: {"t0", "tm"} or {"refused": reason}
CLOCK_MESSAGE = "specbench_clock"  # worker -> master {"t0"}; master -> worker {"t0", "tm"}
CPU_MESSAGE = "specbench_cpu"  # worker -> master, once a second: {"cpu_s", "t"} (its CPU seconds, monotonic time)

# -- prompt sequence numbers (locustfiles.sequencer) --
SEQ_ASK_MESSAGE = "specbench_seq_ask"  # worker -> master: {"step", "n"}
SEQ_GRANT_MESSAGE = "specbench_seq_grant"  # master -> one worker: {"step", "start", "n"}

"""What --check-output costs the load side: the read loop in isolation, and whole runs, with the check on and off.

    python benchmarks/bench_check_output.py [--rounds 15] [--runs 3] [--users 64] [--seconds 6] [--speed 100]

1. Read loop: real streams of 256-token answers are captured once from the emulator (``/generate``, whose chunks
   carry cumulative ``output_ids``, and the chat route, text deltas), then fed through ``StreamState`` and the
   record's end-of-request work (token counts, and with the check the digest and the answers.jsonl line)
   ``--rounds`` times, off and on interleaved, in this one process: SSE events per second of CPU.
2. Whole runs: one ladder step of ``--users`` users against the emulator at ``--speed``, off and on alternating:
   SSE events/s in the window and the load processes' CPU per event (as ``bench_distributed.py``).

Prints figures, asserts nothing: the machine is shared.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

import requests

from specbench.contract.schema import answer_digest
from specbench.locustfiles.sse import iter_events
from specbench.locustfiles.streams import StreamState
from specbench.locustfiles.target import start_emulator_process

from floodrun import flood

BODIES = {
    "generate": ("/generate", {"text": "Explain speculative decoding.", "stream": True,
                               "sampling_params": {"max_new_tokens": 256, "temperature": 0, "ignore_eos": True}}),
    "chat": ("/v1/chat/completions", {"model": "default", "messages": [{"role": "user", "content": "Explain."}],
                                      "max_tokens": 256, "temperature": 0, "ignore_eos": True, "stream": True,
                                      "stream_options": {"include_usage": True, "continuous_usage_stats": True}}),
}


def capture(url: str, api: str) -> list[bytes]:
    path, body = BODIES[api]
    with requests.post(url + path, json=body, stream=True, timeout=60) as resp:
        return [payload for _, payload in iter_events(lambda: resp.raw.read1(65536))]


def read_loop(payloads: list[bytes], api: str, check: bool, repeat: int) -> float:
    """Events per CPU second over ``repeat`` streams."""
    start = time.process_time()
    for _ in range(repeat):
        state = StreamState(api, keep_ids=check)
        for i, payload in enumerate(payloads):
            state.feed(float(i), payload)
        state.resolve_tokens()
        if check:
            text = state.answer_text if not state.ids else ""
            line = {"digest": answer_digest(state.ids, text), "ids": list(state.ids), "text": text}
            json.dumps(line)
    return repeat * len(payloads) / (time.process_time() - start)


def whole_run(url: str, check: bool, users: int, seconds: float, out: Path) -> tuple[float, float]:
    got = flood(url, "on" if check else "off", users, seconds, out,
                ["--step-ci", "0", "--check-output" if check else "--no-check-output"])
    return got.events_s, got.cpu_us_per_event


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--users", type=int, default=64)
    parser.add_argument("--seconds", type=float, default=6.0)
    parser.add_argument("--speed", type=float, default=100.0)
    parser.add_argument("--runs", type=int, default=3, help="whole runs per setting (off and on alternate)")
    args = parser.parse_args()
    emu = start_emulator_process("baseline", speed=args.speed)
    try:
        print("1. read loop (events per CPU second; best and median of the rounds, off and on interleaved)")
        for api in BODIES:
            payloads = capture(emu.url, api)
            rates: dict[bool, list[float]] = {False: [], True: []}
            for _ in range(args.rounds):
                for check in (False, True):
                    rates[check].append(read_loop(payloads, api, check, 200))
            off, on = max(rates[False]), max(rates[True])
            m_off, m_on = statistics.median(rates[False]), statistics.median(rates[True])
            print(f"   {api:<9} {len(payloads)} events/stream: best off {off:,.0f}/s, on {on:,.0f}/s "
                  f"({100 * (on / off - 1):+.1f}%); median off {m_off:,.0f}/s, on {m_on:,.0f}/s "
                  f"({100 * (m_on / m_off - 1):+.1f}%)")
        print(f"2. whole runs: C={args.users}, 256-token answers, emulator x{args.speed:g}, {args.seconds:g} s windows")
        with tempfile.TemporaryDirectory() as tmp:
            found: dict[bool, list[tuple[float, float]]] = {False: [], True: []}
            for i in range(args.runs):
                for check in ((False, True) if i % 2 == 0 else (True, False)):  # ABBA: no order effect
                    events_s, cpu_us = whole_run(emu.url, check, args.users, args.seconds, Path(tmp) / f"r{i}{check}")
                    found[check].append((events_s, cpu_us))
                    print(f"   check {'on ' if check else 'off'}: {events_s:,.0f} SSE events/s, "
                          f"{cpu_us:.0f} us CPU/event")
            for check in (False, True):
                print(f"   median, check {'on ' if check else 'off'}: "
                      f"{statistics.median(e for e, _ in found[check]):,.0f} SSE events/s, "
                      f"{statistics.median(c for _, c in found[check]):.0f} us CPU/event")
    finally:
        emu.stop()


if __name__ == "__main__":
    main()

"""Redaction on the record path: what one JSONL line costs with a 164-character key registered.

``python benchmarks/bench_redact.py [--number 20000]``

Every record line goes through ``redacted_json_line``; most hold no secret and take its fast path (one
encoding, a few substring searches); a line holding a needle (a percent sign, a ``\\u``, the key) takes the
walk, and ``clip`` runs once per failed request. Prints microseconds per call, the best of five repeats.
"""

from __future__ import annotations

import argparse
import sys
import timeit
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from specbench.contract.redact import clip, redact, redacted_json_line, register_key

KEY = ("sk-proj-" + "A1b2C3d4_-" * 16)[:160] + "/Zx+"
RECORD = {"schema": 3, "step": 4, "concurrency": 16, "user": 7, "prompt_id": "sharegpt-00123", "api": "chat",
          "status": "ok", "http_status": 200, "error": None, "t_send": 1733300000.123456, "ttft_s": 0.0812,
          "e2e_s": 1.234, "output_tokens": 256, "prompt_tokens": 812, "cached_tokens": 0, "finish_reason": "length",
          "chunk_t": [0.01 * i for i in range(128)], "chunk_tokens": [2] * 128, "server_request_id": "chatcmpl-1",
          "spec": {"accept_len": 2.31, "draft_tokens": 300, "accepted": 190}}
ERROR = 'HTTP 500: {"error": {"message": "internal error, try again", "type": "server_error"}}'
CASES = {
    "record, ok": lambda: redacted_json_line(RECORD),
    "record, error text": lambda: redacted_json_line({**RECORD, "status": "http_error", "error": ERROR}),
    "record, 100% in text (walk)": lambda: redacted_json_line({**RECORD, "error": "GPU at 100% " + ERROR}),
    "redact(error text)": lambda: redact(ERROR),
    "clip(error text, 200)": lambda: clip(ERROR * 4, 200),
}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--number", type=int, default=20000)
    args = parser.parse_args()
    register_key(KEY)
    for name, call in CASES.items():
        best = min(timeit.repeat(call, number=args.number, repeat=5)) / args.number
        print(f"{name:30s} {best * 1e6:8.2f} us")
    return 0


if __name__ == "__main__":
    sys.exit(main())

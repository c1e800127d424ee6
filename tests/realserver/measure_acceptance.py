"""Measure draft acceptance against the target on a real llama-server, for a range of draft layer scales.

Why: the draft's ``layer_scale`` is the knob that sets acceptance, but the mapping depends on llama.cpp's
speculative loop, so it is measured rather than derived. Re-run after changing make_gguf.py and update the
PRESETS table and PRESET_ACCEPTANCE there.

Usage: python tests/realserver/measure_acceptance.py [--scales 0.05,0.1,0.2] [--max-tokens 64] [--n-max 8]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # run as a script: import the sibling modules

from client import chat_payload, stream
from make_gguf import PRESETS, make_model
from server import LlamaServer

PROMPTS = [
    "Hello, how are you?",
    "Write a short story about a server that streams tokens.",
    "List three facts about speculative decoding and batching.",
    "What is the capital of France? Answer in one word.",
    "Explain the difference between latency and throughput for a model server.",
    "Summarise: the quick brown fox jumps over the lazy dog again and again.",
]


def measure(target: Path, draft: Path, max_tokens: int, n_max: int) -> tuple[int, int, list[float]]:
    """Sum draft_n and draft_n_accepted over PROMPTS at temperature 0; also per-request rates."""
    total_n = total_acc = 0
    rates = []
    with LlamaServer(target, draft=draft, draft_n_max=n_max, n_parallel=1, ctx_size=4096) as server:
        for prompt in PROMPTS:
            result = stream(server.url, "/v1/chat/completions", chat_payload(prompt, max_tokens))
            timings = result.timings or {}
            n, acc = int(timings.get("draft_n", 0)), int(timings.get("draft_n_accepted", 0))
            total_n += n
            total_acc += acc
            rates.append(acc / n if n else float("nan"))
    return total_n, total_acc, rates


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--scales", default="0.05,0.1,0.15,0.2,0.3,0.5")
    p.add_argument("--target-preset", default="target")
    p.add_argument("--draft-preset", default="draft-high")
    p.add_argument("--max-tokens", type=int, default=64)
    p.add_argument("--n-max", type=int, default=8)
    args = p.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        target = make_model(Path(tmp) / "target.gguf", **PRESETS[args.target_preset])
        print(f"{'layer_scale':>11} {'draft_n':>8} {'accepted':>8} {'rate':>6}  per-request")
        for scale in (float(s) for s in args.scales.split(",")):
            params = {**PRESETS[args.draft_preset], "layer_scale": scale}
            draft = make_model(Path(tmp) / f"draft-{scale:g}.gguf", **params)
            n, acc, rates = measure(target, draft, args.max_tokens, args.n_max)
            per = " ".join(f"{r:.2f}" for r in rates)
            print(f"{scale:>11g} {n:>8} {acc:>8} {acc / max(n, 1):>6.3f}  {per}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

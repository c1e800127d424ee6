"""Memory and time of ``specbench report`` (``python -m specbench.analysis summarize``) on a large run directory.

Why a script and not a test: the figure is a machine's, and the suite's claim (peak memory per million records)
is printed for the docs. It makes a run directory of ``--records`` records from a template run (its meta.json,
steps.jsonl and records, each record cut to ``--tokens`` output tokens and copied with a new id; the figures in
the report are then meaningless, the work is not), runs the summary in a child process, and prints its wall
time and peak resident memory, per record.

    .venv/bin/python benchmarks/bench_summarize.py --template RUN_DIR --records 1000000 --tokens 64
"""

from __future__ import annotations

import argparse
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import orjson

ROOT = Path(__file__).resolve().parent.parent


def _cut(record: dict, tokens: int) -> dict:
    """``record`` with at most ``tokens`` output chunks, its counts made to agree."""
    out = dict(record)
    n = min(tokens, len(record["chunk_ms"]))
    out["chunk_ms"], out["chunk_tokens"] = record["chunk_ms"][:n], record["chunk_tokens"][:n]
    if n:
        out["output_tokens"] = out["chunk_tokens"][-1]
        out["e2e_s"] = out["chunk_ms"][-1] / 1000.0 + 0.001
    return out


def make_run(template: Path, dest: Path, records: int, tokens: int) -> int:
    """Write ``dest`` as a run of ``records`` records copied from ``template``; returns the bytes written."""
    dest.mkdir(parents=True)
    for name in ("meta.json", "steps.jsonl"):
        shutil.copy(template / name, dest / name)
    base = [_cut(orjson.loads(line), tokens) for line in (template / "records.jsonl").read_bytes().splitlines()
            if line.strip()]
    written = 0
    with open(dest / "records.jsonl", "wb") as fh:
        for i in range(records):
            rec = base[i % len(base)]
            rec["request_id"] = f"bench-{i}"
            line = orjson.dumps(rec, option=orjson.OPT_APPEND_NEWLINE)
            written += fh.write(line)
    return written


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--template", type=Path, required=True, help="a finished run directory to copy")
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--tokens", type=int, default=64, help="output tokens (chunks) per record")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-summarize-") as tmp:
        run = Path(tmp) / "run"
        t0 = time.perf_counter()
        size = make_run(args.template, run, args.records, args.tokens)
        print(f"made {args.records:,} records of {args.tokens} chunks: {size / 1e9:.2f} GB, "
              f"{time.perf_counter() - t0:.0f} s", flush=True)
        t0 = time.perf_counter()
        proc = subprocess.run([sys.executable, "-m", "specbench.analysis", "summarize", str(run), "--json"], cwd=ROOT,
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        wall = time.perf_counter() - t0
        peak_mb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024  # kB on Linux
    if proc.returncode:
        print(f"summarize failed (exit {proc.returncode}): {proc.stderr.strip()[-500:]}")
        return 1
    per_million = 1e6 / args.records
    print(f"summarize: {wall:.1f} s, peak RSS {peak_mb:,.0f} MB "
          f"({peak_mb * 1024 / args.records:.2f} KB per record; per million records: "
          f"{peak_mb * per_million / 1024:.2f} GB, {wall * per_million:.0f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

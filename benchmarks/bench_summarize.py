"""Memory and time of ``specbench report`` (``python -m specbench.analysis summarize``) on a large run directory.

Why a script and not a test: the figure is a machine's, and the suite's claim (peak memory per million records)
is printed for the docs. It makes a run directory of ``--records`` records from a template run (its meta.json,
steps.jsonl and records, each record cut to ``--tokens`` output tokens and copied with a new id; the figures in
the report are then meaningless, the work is not), runs the summary in a child process, and prints its wall
time and peak resident memory, per record: by default twice, on the columnar path (``contract.columnar``: Arrow's
reader, the default) and on the line-by-line path it falls back to (each line parsed by ``json`` and compacted,
as every read was before the columnar reader), so the two figures come from the same run of the same machine.
Both must print the same JSON: the script says whether they did.

    .venv/bin/python benchmarks/bench_summarize.py --template RUN_DIR --records 1000000 --tokens 64
"""

from __future__ import annotations

import argparse
import hashlib
import os
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


# The child: summarize --json with the columnar reader declining, so every file is read line by line.
_LINE_PATH = ("import sys; import specbench.contract.schema as s; s.read_columns = lambda *a: None; "
              "from specbench.analysis.cli import main; raise SystemExit(main(sys.argv[1:]))")
PATHS = {"columnar": ["-m", "specbench.analysis"], "line": ["-c", _LINE_PATH]}


def summarize_child(path: str, run: Path, scratch: Path) -> tuple[float, float, str | None, str]:
    """(wall s, peak RSS MB, error or None, sha256 of the JSON) of ``summarize --json`` on one path, in a child.

    The child's own peak, from ``os.wait4`` (RUSAGE_CHILDREN would give the largest child so far)."""
    out, err = scratch / f"{path}.json", scratch / f"{path}.err"
    t0 = time.perf_counter()
    with out.open("wb") as stdout, err.open("wb") as stderr:
        proc = subprocess.Popen([sys.executable, *PATHS[path], "summarize", str(run), "--json"], cwd=ROOT,
                                stdout=stdout, stderr=stderr)
        _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    code = os.waitstatus_to_exitcode(status)
    error = f"exit {code}: {err.read_text(errors='replace').strip()[-500:]}" if code else None
    return wall, usage.ru_maxrss / 1024, error, hashlib.sha256(out.read_bytes()).hexdigest()  # ru_maxrss: kB


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--template", type=Path, help="a finished run directory to copy")
    parser.add_argument("--run", type=Path, help="summarize this run directory as it is (no --template copy)")
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--tokens", type=int, default=64, help="output tokens (chunks) per record")
    parser.add_argument("--paths", default="line,columnar",
                        help="which readers, in this order: line (json line by line, compacted), columnar (Arrow)")
    args = parser.parse_args()
    if (args.template is None) == (args.run is None):
        parser.error("give --template (a run to copy) or --run (a run to read as it is)")
    with tempfile.TemporaryDirectory(prefix="bench-summarize-") as tmp:
        run = args.run
        if run is None:
            run = Path(tmp) / "run"
            t0 = time.perf_counter()
            size = make_run(args.template, run, args.records, args.tokens)
            print(f"made {args.records:,} records of {args.tokens} chunks: {size / 1e9:.2f} GB, "
                  f"{time.perf_counter() - t0:.0f} s", flush=True)
        records = sum(1 for line in (run / "records.jsonl").open("rb") if line.strip())
        per_million = 1e6 / records
        digests = set()
        for path in args.paths.split(","):
            wall, peak_mb, error, digest = summarize_child(path, run, Path(tmp))
            if error:
                print(f"summarize ({path}) failed ({error})")
                return 1
            digests.add(digest)
            print(f"summarize ({path}): {records:,} records, {wall:.1f} s, peak RSS {peak_mb:,.0f} MB "
                  f"({peak_mb * 1024 / records:.2f} KB per record; per million records: "
                  f"{peak_mb * per_million / 1024:.2f} GB, {wall * per_million:.0f} s)", flush=True)
    print("same JSON on every path" if len(digests) == 1 else "the paths printed different JSON")
    return 0 if len(digests) == 1 else 1


if __name__ == "__main__":
    raise SystemExit(main())

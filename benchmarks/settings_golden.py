"""Snapshot of what the options produce: help texts, meta.json, steps and records of three short seeded runs.

Run it before and after a change to how options are declared or meta.json is written, then diff the two
snapshots (``--compare OLD NEW``): field names and settings must match; figures only within noise.

    python benchmarks/settings_golden.py OUT.json
    python benchmarks/settings_golden.py --compare BEFORE.json AFTER.json
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from specbench.loadrun import LOCUSTFILE

COMMON = ("--max-tokens", "24", "--seed", "7", "--min-step-time", "1", "--max-step-time", "30", "--step-ci", "0",
          "--emulator-speed", "10", "--min-requests", "12")
RUNS: dict[str, tuple[str, ...]] = {
    "ladder": ("--ladder", "1,3"),
    "open_loop": ("--rate-ladder", "4,8", "--arrivals", "constant", "--slo", "ttft=2s"),
    "users": ("--load-mode", "users", "-u", "2", "-t", "3s", "--multi-turn", "2"),
}
VOLATILE = {"started_s", "ended_s", "command_line", "out", "url"}


def _help(cmd: list[str]) -> str:
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120, env={**os.environ, "COLUMNS": "120"}).stdout


def _run(name: str, args: tuple[str, ...], root: Path) -> dict[str, Any]:
    out = root / name
    cmd = [sys.executable, "-m", "locust", "-f", str(LOCUSTFILE), "--headless", "--only-summary", "--out", str(out),
           "--label", name, *COMMON, *args]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=240)
    meta = json.loads((out / "meta.json").read_text())
    steps = [json.loads(line) for line in (out / "steps.jsonl").read_text().splitlines()]
    records = [json.loads(line) for line in (out / "records.jsonl").read_text().splitlines()]
    meta = {k: v for k, v in meta.items() if k not in VOLATILE}
    meta["server"] = {k: v for k, v in meta.get("server", {}).items() if k not in VOLATILE}
    meta.get("settings", {}).pop("out", None)
    return {"rc": proc.returncode, "meta": meta,
            "step_fields": sorted({k for s in steps for k in s}),
            "steps": [{k: s.get(k) for k in ("index", "target_c", "target_rate", "requests_measured", "ended_by",
                                             "flags", "throughput_tok_s")} for s in steps],
            "record_fields": sorted({k for r in records for k in r}),
            "records": len(records), "ok": sum(r["status"] == "ok" for r in records),
            "output_tokens": sum(r["output_tokens"] for r in records)}


def snapshot(path: Path) -> None:
    exe = [sys.executable, "-m"]
    snap: dict[str, Any] = {"help": {
        "locust": _help([*exe, "locust", "-f", str(LOCUSTFILE), "--help"]),
        **{cmd: _help([*exe, "specbench.cli", cmd, "--help"]) for cmd in ("run", "compare", "sweep", "demo")}}}
    with tempfile.TemporaryDirectory() as tmp:
        snap["runs"] = {name: _run(name, args, Path(tmp)) for name, args in RUNS.items()}
    path.write_text(json.dumps(snap, indent=1, sort_keys=True))
    print(f"wrote {path}")


def compare(old_path: Path, new_path: Path) -> None:
    old, new = json.loads(old_path.read_text()), json.loads(new_path.read_text())
    for name in sorted(old["help"]):
        same = old["help"][name] == new["help"][name]
        print(f"help {name}: {'identical' if same else 'DIFFERS'}")
        if not same:
            import difflib

            sys.stdout.writelines(difflib.unified_diff(old["help"][name].splitlines(True),
                                                       new["help"][name].splitlines(True), "before", "after", n=0))
    for name in sorted(old["runs"]):
        a, b = old["runs"][name], new["runs"][name]
        print(f"run {name}: rc {a['rc']} -> {b['rc']}; records {a['records']} -> {b['records']}, ok {a['ok']} -> "
              f"{b['ok']}, output tokens {a['output_tokens']} -> {b['output_tokens']}")
        for key in ("step_fields", "record_fields"):
            print(f"  {key}: {'identical' if a[key] == b[key] else f'DIFFER {a[key]} -> {b[key]}'}")
        for sa, sb in zip(a["steps"], b["steps"], strict=False):
            print(f"  step {sa['index']}: " + ", ".join(f"{k} {sa[k]} -> {sb[k]}" for k in sa if k != "index"))
        _diff("meta", {k: v for k, v in a["meta"].items() if k != "settings"},
              {k: v for k, v in b["meta"].items() if k != "settings"})
        _diff("meta.settings", a["meta"].get("settings", {}), b["meta"].get("settings", {}))


def _diff(where: str, old: dict[str, Any], new: dict[str, Any]) -> None:
    for key in sorted(set(old) | set(new)):
        if old.get(key, "<absent>") != new.get(key, "<absent>"):
            print(f"  {where}.{key}: {old.get(key, '<absent>')!r} -> {new.get(key, '<absent>')!r}")


if __name__ == "__main__":
    if sys.argv[1:2] == ["--compare"]:
        compare(Path(sys.argv[2]), Path(sys.argv[3]))
    else:
        snapshot(Path(sys.argv[1]))

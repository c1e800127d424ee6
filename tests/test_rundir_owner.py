"""The run directory has one owner (#54): ``contract/rundir.py`` names its files and sub-runs; every other module
asks a ``RunDir`` for a path or the contents. Here the product source is scanned for a file's name written out
(``"records.jsonl"``, ``run_dir / "paired"``, ``f"round-{n}"``), and ``RunDir``'s reading, appending and merging is
tried on real files."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

from specbench.contract import rundir
from specbench.contract.rundir import RunDir, read_run
from specbench.contract.runformat import RunFormatError

ROOT = Path(__file__).resolve().parent.parent
PRODUCT = ("analysis", "contract", "emulator", "locustfiles", "shapes", "specbench")
OWNER = Path("contract/rundir.py")

# The names as they are on disk, written out here so that a renamed constant is a decision this test sees.
FILE_NAMES = frozenset(("records.jsonl", "steps.jsonl", "meta.json", "meta.json.tmp", ".json.tmp", "answers.jsonl",
                        "server_metrics.jsonl", "gpu_metrics.jsonl", "locust.log"))
# words of their own elsewhere (a step's "refined", the "report" command): named only when joined into a path
DIR_NAMES = frozenset(("refined", "paired", "remeasured", "servers", "report"))
PREFIXES = frozenset(("round-", ".log"))  # the pieces of f"round-{k}" and f"{name}.log"


def test_the_owner_holds_the_names_written_here() -> None:
    held = {*rundir.RUN_FILES, rundir.LOG_FILE}
    assert held | {".json.tmp"} == FILE_NAMES
    assert {*rundir.SUB_RUNS, rundir.SERVER_LOGS, rundir.REPORT_DIR} == DIR_NAMES
    assert rundir.ROUND_PREFIX in PREFIXES


def product_files() -> list[Path]:
    """Every module of the product, each once: the real folders, not the ``specbench/<pkg>`` links to them."""
    found = []
    for package in PRODUCT:
        for path in sorted((ROOT / package).rglob("*.py")):
            rel = path.relative_to(ROOT)
            if any((ROOT / Path(*rel.parts[:i])).is_symlink() for i in range(1, len(rel.parts) + 1)):
                continue
            found.append(rel)
    return found


def _docstrings(tree: ast.AST) -> set[int]:
    ids = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                ids.add(id(first.value))
    return ids


def _pieces(node: ast.AST) -> list[str]:
    """The literal text of a string or f-string operand."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, ast.JoinedStr):
        return [v.value for v in node.values if isinstance(v, ast.Constant) and isinstance(v.value, str)]
    return []


def _path_operands(node: ast.AST) -> list[ast.AST]:
    """What is joined into a path: ``a / "x"``, ``p.joinpath("x")``, ``Path("x")``."""
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div):
        return [node.left, node.right]
    if isinstance(node, ast.Call):
        func = node.func
        if (isinstance(func, ast.Attribute) and func.attr == "joinpath") or (
                isinstance(func, ast.Name) and func.id in ("Path", "PurePath")):
            return list(node.args)
    return []


def offences(source: str, name: str) -> list[str]:
    """Each place ``source`` names a run directory's file or sub-run: ``name:line: text``."""
    tree = ast.parse(source)
    docs = _docstrings(tree)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docs:
            text = node.value
            if text in FILE_NAMES or text == "round-" or any(text.endswith("/" + f) for f in FILE_NAMES):
                found.append(f"{name}:{node.lineno}: {text!r}")
        for operand in _path_operands(node):
            for text in _pieces(operand):
                if text.strip("/") in DIR_NAMES or text in PREFIXES:
                    found.append(f"{name}:{node.lineno}: {text!r} in a path")
    return found


def test_only_the_run_directory_module_names_its_files() -> None:
    files = product_files()
    assert OWNER in files and len(files) > 100  # the scan sees the product, the links' targets once
    found = [o for rel in files if rel != OWNER
             for o in offences((ROOT / rel).read_text(encoding="utf-8"), str(rel))]
    assert not found, "ask contract.rundir.RunDir for these paths instead:\n" + "\n".join(found)


def test_the_scan_finds_each_way_of_naming_a_file() -> None:
    source = '''"""Docstring: records.jsonl is fine in prose."""
def f(run_dir, n, out, name):
    """Also here: meta.json."""
    a = run_dir / "records.jsonl"
    b = run_dir / "refined" / f"round-{n}"
    c = out / "servers" / f"{name}.log"
    d = run_dir.joinpath("paired")
    e = {"refined": True}  # a step's field, not a folder
    g = "no meta.json; settings unknown"  # prose in a message
    h = target.with_suffix(".json.tmp")
    return "locust.log"
'''
    found = sorted((int(o.split(":")[1]), o.split(": ", 1)[1]) for o in offences(source, "x.py"))
    assert found == [(4, "'records.jsonl'"), (5, "'refined' in a path"), (5, "'round-'"), (5, "'round-' in a path"),
                     (6, "'.log' in a path"), (6, "'servers' in a path"), (7, "'paired' in a path"),
                     (10, "'.json.tmp'"), (11, "'locust.log'")], found


# -- RunDir on real files --

def _write(path: Path, objs: list[dict[str, object]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(o) + "\n" for o in objs), encoding="utf-8")


def _record(request_id: str, step: int, target_c: int, **extra: object) -> dict[str, object]:
    return {"schema": 2, "request_id": request_id, "step": step, "target_c": target_c, "start_s": 10.0 + step,
            "e2e_s": 1.0, "status": "ok", "output_tokens": 4, "chunk_ms": [100.0, 900.0], "chunk_tokens": [1, 4],
            **extra}


def _step(index: int, target_c: int) -> dict[str, object]:
    return {"schema": 2, "index": index, "target_c": target_c, "start_s": 10.0 + index, "steady_start_s": 11.0,
            "end_s": 20.0 + index}


def _run(root: Path, steps: list[int], tag: str = "") -> RunDir:
    run = RunDir(root)
    _write(run.steps_file, [_step(i, c) for i, c in enumerate(steps)])
    _write(run.records_file, [_record(f"{tag}0-{i}", i, c, conversation_id=f"s{i}-0") for i, c in enumerate(steps)])
    _write(run.answers_file, [{"schema": 2, "request_id": f"{tag}0-{i}", "step": i, "target_c": c, "prompt_seq": 0,
                               "kind": "text", "text": "x", "digest": "text:0"} for i, c in enumerate(steps)])
    return run


def test_paths_and_sub_runs(tmp_path: Path) -> None:
    run = RunDir(tmp_path / "spec")
    assert run.records_file == tmp_path / "spec" / "records.jsonl"
    assert run.meta_tmp_file == tmp_path / "spec" / "meta.json.tmp"
    assert run.refined(2).path == tmp_path / "spec" / "refined" / "round-2"
    assert run.paired().path == tmp_path / "spec" / "paired"
    assert run.remeasured().path == tmp_path / "spec" / "remeasured"
    assert run.report_dir == tmp_path / "spec" / "report"
    assert rundir.server_log(tmp_path, "spec") == tmp_path / "servers" / "spec.log"
    assert not run.has_records() and run.steps() == [] and run.meta_json() is None and not run.partial()
    with pytest.raises(RunFormatError, match="not a run directory"):
        run.read()
    run.path.mkdir()
    with pytest.raises(RunFormatError, match=r"no records\.jsonl"):
        read_run(run.path)


def test_merge_appends_a_sub_run_after_the_run(tmp_path: Path) -> None:
    run = _run(tmp_path / "spec", [1, 4])
    _write(run.server_metrics_file, [{"schema": 1, "t_s": 1.0, "values": {}}])
    before = run.records_file.read_bytes()
    sub = _run(run.refined(1).path, [2], tag="w")
    _write(sub.server_metrics_file, [{"schema": 1, "t_s": 2.0, "values": {}}])
    (sub.records_file.open("a", encoding="utf-8")).write('{"torn')  # a killed sub-run's last line
    assert run.merge(sub, "r1") == 1
    assert run.records_file.read_bytes().startswith(before)  # appended, the run's own lines untouched
    steps = run.steps()
    assert [(s["index"], s["target_c"], s.get("refined")) for s in steps] == [(0, 1, None), (1, 4, None), (2, 2, True)]
    data = run.read()
    added = data.records[-1]
    assert (added["request_id"], added["step"], added["conversation_id"]) == ("r1-w0-0", 2, "r1-s0-0")
    assert [a["request_id"] for a in data.answers] == ["0-0", "0-1", "r1-w0-0"]
    assert data.answers[-1]["step"] == 2
    assert len(data.server_samples) == 2
    lines = run.steps_file.read_text(encoding="utf-8").splitlines()
    assert lines[-1] == json.dumps({**_step(0, 2), "index": 2, "refined": True}, separators=(",", ":"))


def test_a_paired_merge_is_not_marked_refined_and_numbers_follow(tmp_path: Path) -> None:
    run = _run(tmp_path / "base", [1, 4])
    run.merge(_run(run.refined(1).path, [2], tag="a"), "r1")
    paired = _run(run.paired().path, [8, 16], tag="b")
    assert run.merge(paired, "p", refined=False) == 2
    steps = run.steps()
    assert [(s["index"], s["target_c"], s.get("refined", False)) for s in steps] == [
        (0, 1, False), (1, 4, False), (2, 2, True), (3, 8, False), (4, 16, False)]
    assert [r["step"] for r in run.read().records] == [0, 1, 2, 3, 4]


def test_merging_an_empty_sub_run_changes_nothing(tmp_path: Path) -> None:
    run = _run(tmp_path / "base", [1])
    before = {p.name: p.read_bytes() for p in run.path.iterdir()}
    run.remeasured().path.mkdir()
    assert run.merge(run.remeasured(), "m", refined=False) == 0
    assert {p.name: p.read_bytes() for p in run.path.iterdir() if p.is_file()} == before
    assert not run.server_metrics_file.exists()  # nothing to append: no file made


def test_append_and_clear(tmp_path: Path) -> None:
    run = RunDir(tmp_path)
    run.append_steps([_step(0, 3)])
    run.append_records([_record("0-0", 0, 3)])
    run.append_records([])
    assert [s["target_c"] for s in run.steps()] == [3] and len(read_run(tmp_path).records) == 1
    run.log_file.write_text("log", encoding="utf-8")
    run.meta_file.write_text(json.dumps({"settings": {"label": "spec"}, "partial": True}), encoding="utf-8")
    assert run.label() == "spec" and run.partial() and run.holds_a_run() and run.holds_only_ours()
    run.refined(1).path.mkdir(parents=True)
    assert run.holds_only_ours()
    (tmp_path / "notes.txt").write_text("mine", encoding="utf-8")
    assert not run.holds_only_ours()
    run.clear()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["locust.log", "notes.txt", "refined"]
    run.clear(log=True)
    assert not run.log_file.exists()

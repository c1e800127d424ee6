"""The field's standard prompt sets, read from the files their publishers distribute (never copied here).

``--prompts NAME`` reads the set from where docs/guides/comparable-results.md's one fetch command puts it
(``$SPECBENCH_DATA``, default ``~/.cache/specbench/datasets``); ``--prompts NAME=PATH`` reads the file at PATH.
Each set keeps its own categories and turns: a conversation's later turns are its ``recorded_turns``, asked as
turns 2, 3, ... with the server's own answers in between under ``--multi-turn``. The formats, as the
publishers distribute them:

* ``mt-bench``: FastChat's ``question.jsonl``: one object per line with ``question_id``, ``category`` and
  ``turns`` (a list of user turns; MT-Bench has two per question);
* ``spec-bench``: Spec-Bench's ``data/spec_bench/question.jsonl``, the same shape (MT-Bench's 80 questions and
  the translation, summarisation, question answering, maths and retrieval tasks, each its category);
* ``speed-bench:qualitative``, ``speed-bench:throughput-1k`` (``-2k``, ``-8k``, ``-16k``, ``-32k``): SPEED-Bench's
  Parquet files, one per configuration, with ``question_id``, ``category`` and ``turns`` (and ``sub_category``,
  ``source``, ``src_id``, ``difficulty``, ``multiturn``, not used); a throughput configuration's name keeps its
  target input length in the set's name;
* ``gsm8k``: GSM8K's ``test.jsonl``: ``question`` and ``answer`` per line (the question is the prompt);
* ``humaneval``: HumanEval's ``HumanEval.jsonl.gz`` (or the unpacked ``.jsonl``): ``task_id`` and ``prompt``.

A wrong or truncated file is one ``PromptError`` naming the file, the line (Parquet: the row) and the field.
Every format is read under the same caps (``contract.inputcaps``: decompressed bytes, lines or rows, one line),
counted as it is decoded, so a small compressed file standing for a huge one is refused, not held.
Importable without Locust.
"""

from __future__ import annotations

import difflib
import os
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from specbench.contract.inputcaps import gzip_lines, parquet_rows, plain_lines
from specbench.contract.jsonlines import json_objects
from specbench.locustfiles.hubsets import HUB_PREFIX, hub_rows, parse_hub_source
from specbench.locustfiles.promptset import Prompt, PromptError, PromptSet, content_sha256

__all__ = ["BENCH_SETS", "DATA_ENV", "BenchSet", "bench_set_names", "data_root", "find_bench_set", "load_bench_set"]

DATA_ENV = "SPECBENCH_DATA"
FASTCHAT_FIELDS = '"question_id", "category" and "turns"'
_SET_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9:._-]*$")  # what a set name can look like (not a path)
SPEED_SPLITS = ("qualitative", "throughput-1k", "throughput-2k", "throughput-8k", "throughput-16k", "throughput-32k")

FileRows = Callable[[Path, str], "Rows"]  # (file, display) -> its records, each with where it stands
RowReader = Callable[["Rows", str], list[Prompt]]  # (records, set name) -> prompts


@dataclass(frozen=True)
class BenchSet:
    name: str
    file_rows: FileRows  # the publisher's file format
    reader: RowReader  # its records as prompts (a file's, or a Hugging Face dataset's rows)
    default_file: str  # under the data root; a glob for sets published as many files
    origin: str  # where the publisher distributes it
    licence: str


def data_root() -> Path:
    """Where named sets are looked for: ``$SPECBENCH_DATA``, else ``~/.cache/specbench/datasets``."""
    env = os.environ.get(DATA_ENV, "").strip()
    return Path(env).expanduser() if env else Path.home() / ".cache" / "specbench" / "datasets"


def _text(obj: dict[str, Any], key: str, where: str) -> str:
    value = obj.get(key)
    if not isinstance(value, str) or not value.strip():
        raise PromptError(f"{where}: field {key!r}: expected a non-empty string, got {_shown(value)}")
    return value


def _turns(obj: dict[str, Any], where: str) -> list[str]:
    value = obj.get("turns")
    if isinstance(value, tuple) or (value is not None and type(value).__name__ == "ndarray"):
        value = list(value)
    if not isinstance(value, list) or not value or not all(isinstance(t, str) and t.strip() for t in value):
        raise PromptError(f"{where}: field 'turns': expected a non-empty list of non-empty strings (the user "
                          f"turns), got {_shown(value)}")
    return value


def _question_id(obj: dict[str, Any], where: str) -> str:
    value = obj.get("question_id")
    if isinstance(value, bool) or not isinstance(value, (int, str)) or str(value).strip() == "":
        raise PromptError(f"{where}: field 'question_id': expected a number or a string, got {_shown(value)}")
    return str(value)


def _shown(value: Any) -> str:
    text = "missing" if value is None else repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _conversation(obj: dict[str, Any], where: str, set_name: str, seen: dict[str, str]) -> Prompt:
    """A question in FastChat's shape (``question_id``, ``category``, ``turns``) as a prompt."""
    qid = _question_id(obj, where)
    pid = f"{set_name}-{qid}"
    if pid in seen:
        raise PromptError(f"{where}: field 'question_id': {qid!r} again (first at {seen[pid]})")
    seen[pid] = where
    turns = _turns(obj, where)
    return Prompt(id=pid, category=_text(obj, "category", where), text=turns[0], recorded_turns=tuple(turns[1:]))


def _jsonl_lines(path: Path, display: str) -> Iterator[str]:
    """The file's lines under the caps of ``contract.inputcaps``; a ``.gz`` file sized before any is kept."""
    if path.suffix == ".gz":
        return gzip_lines(path, display, PromptError)
    return plain_lines(path, display, PromptError)


Rows = Iterable[tuple[str, dict[str, Any]]]  # (where, the record as its publisher wrote it)


def _fastchat_rows(rows: Rows, set_name: str) -> list[Prompt]:
    seen: dict[str, str] = {}
    return [_conversation(obj, where, set_name, seen) for where, obj in rows]


def _gsm8k_rows(rows: Rows, set_name: str) -> list[Prompt]:
    out = []
    for number, (where, obj) in enumerate(rows, start=1):
        _text(obj, "answer", where)  # a record without its answer is not GSM8K's
        out.append(Prompt(id=f"{set_name}-{number}", category=set_name, text=_text(obj, "question", where)))
    return out


def _humaneval_rows(rows: Rows, set_name: str) -> list[Prompt]:
    out: list[Prompt] = []
    seen: dict[str, str] = {}
    for where, obj in rows:
        task = _text(obj, "task_id", where)
        if task in seen:
            raise PromptError(f"{where}: field 'task_id': {task!r} again (first at {seen[task]})")
        seen[task] = where
        out.append(Prompt(id=task, category=set_name, text=_text(obj, "prompt", where)))
    return out


def _jsonl_rows(expected: str) -> Callable[[Path, str], Rows]:
    def rows(path: Path, display: str) -> Rows:
        return ((where, obj) for _, where, obj in json_objects(_jsonl_lines(path, display), display, PromptError,
                                                               expected))
    return rows


def _speed_rows(path: Path, display: str) -> Rows:
    return parquet_rows(path, display, ("question_id", "category", "turns"), PromptError)


def _speed(split: str) -> BenchSet:
    config = split.replace("-", "_")
    return BenchSet(f"speed-bench:{split}", _speed_rows, _fastchat_rows, f"speed-bench/**/*{config}*/*.parquet",
                    "huggingface.co/datasets/nvidia/SPEED-Bench (configuration " + config + ")",
                    "NVIDIA Evaluation Dataset License")


BENCH_SETS: dict[str, BenchSet] = {s.name: s for s in (
    BenchSet("mt-bench", _jsonl_rows(FASTCHAT_FIELDS), _fastchat_rows, "mt-bench/question.jsonl",
             "github.com/lm-sys/FastChat, fastchat/llm_judge/data/mt_bench/question.jsonl", "Apache-2.0"),
    BenchSet("spec-bench", _jsonl_rows(FASTCHAT_FIELDS), _fastchat_rows, "spec-bench/question.jsonl",
             "github.com/hemingkx/Spec-Bench, data/spec_bench/question.jsonl", "Apache-2.0 (the repository's)"),
    *(_speed(split) for split in SPEED_SPLITS),
    BenchSet("gsm8k", _jsonl_rows('"question" and "answer"'), _gsm8k_rows, "gsm8k/test.jsonl",
             "github.com/openai/grade-school-math, grade_school_math/data/test.jsonl", "MIT"),
    BenchSet("humaneval", _jsonl_rows('"task_id" and "prompt"'), _humaneval_rows, "humaneval/HumanEval.jsonl*",
             "github.com/openai/human-eval, data/HumanEval.jsonl.gz", "MIT"),
)}


def bench_set_names() -> list[str]:
    return list(BENCH_SETS)


def find_bench_set(spec: str) -> tuple[BenchSet, str | None] | None:
    """``NAME``, ``NAME=PATH`` or ``NAME=hf:SOURCE[#SPLIT]`` of a standard set: (the set, what follows ``=`` or
    None); None when ``spec`` names none."""
    name, sep, source = spec.partition("=")
    bench = BENCH_SETS.get(name.strip())
    if bench is None:
        if sep and _SET_NAME.match(name.strip()) and not _exists(spec):
            near = difflib.get_close_matches(name.strip(), list(BENCH_SETS), n=1)
            hint = f"did you mean {near[0]}? " if near else ""
            raise PromptError(f"{name.strip()[:80]!r}: not a standard set name ({hint}known: "
                              f"{', '.join(BENCH_SETS)}); give NAME=PATH with one of them, or a prompt file alone")
        return None
    if sep and not source.strip():
        raise PromptError(f"{spec}: expected {name}=PATH (the file as its publisher distributes it) or "
                          f"{name}={HUB_PREFIX}DATASET")
    return bench, source.strip() if sep else None


def _exists(spec: str) -> bool:
    """Whether ``spec`` as a whole is a path (a user's file may have ``=`` in its name)."""
    try:
        return Path(spec).expanduser().exists()
    except (OSError, ValueError):  # a name the file system refuses: not a file
        return False


def _default_file(bench: BenchSet) -> Path:
    root = data_root()
    found = sorted(root.glob(bench.default_file))
    if not found:
        raise PromptError(f"{bench.name}: not found as {root / bench.default_file} ({DATA_ENV} sets the folder): "
                          f"fetch it from {bench.origin} (docs/guides/comparable-results.md has the command), or "
                          f"give its file: --prompts {bench.name}=PATH")
    return found[0]


def load_bench_set(bench: BenchSet, source: str | None) -> PromptSet:
    """The set read from ``source`` (a file, ``hf:...``, or None: its default place), as a PromptSet named after
    the set."""
    if source is not None and source.startswith(HUB_PREFIX):
        hub, split = parse_hub_source(source)
        if not hub:
            raise PromptError(f"{bench.name}={source[:80]}: expected {bench.name}={HUB_PREFIX}SOURCE[#SPLIT], SOURCE a "
                              f"dataset on the hub (nvidia/SPEED-Bench) or a local folder in its layout")
        config = bench.name.partition(":")[2].replace("-", "_") or None  # speed-bench:throughput-8k: throughput_8k
        display = f"{bench.name}={source}"
        prompts = bench.reader(hub_rows(hub, config, split, display), bench.name)
    else:
        file = Path(source).expanduser() if source is not None else _default_file(bench)
        display = str(file)
        if not file.is_file():
            raise PromptError(f"{display}: no such file ({bench.name}: {bench.origin})")
        try:
            prompts = bench.reader(bench.file_rows(file, display), bench.name)
        except OSError as e:
            raise PromptError(f"{display}: cannot read file ({e.strerror or e})") from None
    if not prompts:
        raise PromptError(f"{display}: no prompts found ({bench.name} expects its publisher's format)")
    return PromptSet(name=bench.name, sha256=content_sha256(prompts, [True] * len(prompts)), prompts=tuple(prompts),
                     source=f"{bench.name}={display}" if not display.startswith(bench.name + "=") else display)

"""The run directory: the one owner of its files' names, and of reading, appending and merging them (#54).

A run directory holds what the load side writes as a run goes (``RUN_FILES``: records, steps, meta, answers,
server and GPU samples), Locust's log (``LOG_FILE``, written by specbench commands) and, after a comparison,
the sub-runs that ``specbench.refine`` and ``specbench.topup`` measured into it and merged back
(``refined/round-K``, ``paired``, ``remeasured``) and the side runs kept beside them (``endcheck``,
``probe``). Every other module asks a ``RunDir`` for a file's path or its
contents; none names the files itself (``tests/test_rundir_owner.py`` holds that). The shapes of the lines are
``contract.schema``'s; this module knows where they lie.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from specbench.contract.gpu_metrics import read_gpu_metrics
from specbench.contract.schema import (
    RunData,
    RunFormatError,
    RunMeta,
    StepRecord,
    iter_jsonl,
    read_answers,
    read_meta,
    read_records,
    read_steps,
)
from specbench.contract.server_metrics import read_server_metrics

RECORDS_FILE = "records.jsonl"
STEPS_FILE = "steps.jsonl"
META_FILE = "meta.json"
META_TMP_FILE = META_FILE + ".tmp"  # meta.json's next version before its atomic rename
ANSWERS_FILE = "answers.jsonl"
SERVER_METRICS_FILE = "server_metrics.jsonl"  # contract.server_metrics: its lines
GPU_METRICS_FILE = "gpu_metrics.jsonl"  # contract.gpu_metrics: its lines
LOG_FILE = "locust.log"  # Locust's log and tables, written by specbench commands (--logfile); not read back
# Every file a run writes into its directory, the one list of them: --overwrite clears exactly these (Locust's log,
# already open for the new run when the directory is claimed, is cleared by specbench before it starts Locust).
RUN_FILES: tuple[str, ...] = (RECORDS_FILE, STEPS_FILE, META_FILE, META_TMP_FILE, ANSWERS_FILE,
                              SERVER_METRICS_FILE, GPU_METRICS_FILE)

REFINED_DIR = "refined"  # refinement rounds: refined/round-K
PAIRED_DIR = "paired"  # levels another server ran, measured to keep the comparison paired
REMEASURED_DIR = "remeasured"  # levels a ladder left short, measured again with the budget's rest
SUB_RUNS: tuple[str, ...] = (REFINED_DIR, PAIRED_DIR, REMEASURED_DIR)  # the sub-runs merged into a run
END_CHECK_DIR = "endcheck"  # the first level measured again after the ladder: compared with it, never merged
PROBE_DIR = "probe"  # the paired output-equivalence probe's run: compared with the other servers', never merged
SIDE_RUNS: tuple[str, ...] = (END_CHECK_DIR, PROBE_DIR)  # runs kept inside a run that are not merged into it
ROUND_PREFIX = "round-"
REPORT_DIR = "report"  # the web UI's Tokens tab: summary.txt/.json/.csv and the plots of the run it stopped
SERVER_LOGS = "servers"  # a sweep's output: each managed server's log, SERVER_LOGS/NAME.log beside the runs


def server_log(out: Path, name: str) -> Path:
    """A sweep's log of configuration ``name``'s server, in the job's output directory ``out``."""
    return out / SERVER_LOGS / f"{name}.log"


@dataclass(frozen=True)
class RunDir:
    """One run directory: where each of its files lies, what it holds, and its sub-runs."""

    path: Path

    @classmethod
    def of(cls, run_dir: str | Path | RunDir) -> RunDir:
        return run_dir if isinstance(run_dir, RunDir) else cls(Path(run_dir))

    # -- where each file lies --
    @property
    def records_file(self) -> Path:
        return self.path / RECORDS_FILE

    @property
    def steps_file(self) -> Path:
        return self.path / STEPS_FILE

    @property
    def meta_file(self) -> Path:
        return self.path / META_FILE

    @property
    def meta_tmp_file(self) -> Path:
        return self.path / META_TMP_FILE

    @property
    def answers_file(self) -> Path:
        return self.path / ANSWERS_FILE

    @property
    def server_metrics_file(self) -> Path:
        return self.path / SERVER_METRICS_FILE

    @property
    def gpu_metrics_file(self) -> Path:
        return self.path / GPU_METRICS_FILE

    @property
    def log_file(self) -> Path:
        return self.path / LOG_FILE

    @property
    def report_dir(self) -> Path:
        """The web UI's report of this run (``summarize``'s files), written when the run stops."""
        return self.path / REPORT_DIR

    def has_records(self) -> bool:
        """Whether a run was recorded here (records.jsonl exists): what makes a directory a run directory."""
        return self.records_file.exists()

    def has_meta(self) -> bool:
        return self.meta_file.exists()

    # -- sub-runs --
    def refined(self, round_no: int) -> RunDir:
        """Where refinement round ``round_no`` runs before it is merged into this run."""
        return RunDir(self.path / REFINED_DIR / f"{ROUND_PREFIX}{round_no}")

    def paired(self) -> RunDir:
        """Where the levels another server ran, and this one skipped, run before they are merged."""
        return RunDir(self.path / PAIRED_DIR)

    def remeasured(self) -> RunDir:
        """Where the levels the ladder left short run again before they are merged."""
        return RunDir(self.path / REMEASURED_DIR)

    def end_check(self) -> RunDir:
        """Where the ladder's first level is measured again at the end of the job (``specbench.endcheck``)."""
        return RunDir(self.path / END_CHECK_DIR)

    def probe(self) -> RunDir:
        """Where this server's part of the paired output-equivalence probe runs (``specbench.probe``)."""
        return RunDir(self.path / PROBE_DIR)

    def sub_run_roots(self) -> list[Path]:
        """The folders that hold this run's sub-runs (``refined`` holds one per round) and side runs (the end
        check), whether or not they exist."""
        return [self.path / name for name in (*SUB_RUNS, *SIDE_RUNS)]

    # -- reading --
    def read(self) -> RunData:
        """Every file of the run, finished or killed half-way. Missing optional files give empty values."""
        root = self.path
        if not root.is_dir():
            raise RunFormatError(f"{root}: not a run directory")
        if not self.has_records():
            raise RunFormatError(f"{root}: no {RECORDS_FILE} (is this a run directory?)")
        records, torn = read_records(self.records_file)
        steps = self.steps()
        meta = read_meta(self.meta_file) if self.has_meta() else RunMeta()
        samples, torn_samples = (read_server_metrics(self.server_metrics_file) if self.server_metrics_file.exists()
                                 else ([], 0))
        answers, torn_answers = read_answers(self.answers_file) if self.answers_file.exists() else ([], 0)
        gpu_samples, torn_gpu = read_gpu_metrics(self.gpu_metrics_file) if self.gpu_metrics_file.exists() else ([], 0)
        return RunData(path=root, meta=meta, records=records, steps=steps,
                       skipped_lines=torn + torn_samples + torn_answers + torn_gpu, server_samples=samples,
                       answers=answers, gpu_samples=gpu_samples)

    def steps(self) -> list[StepRecord]:
        """steps.jsonl read (``schema.read_steps``: a later line of the same index wins); none without the file."""
        return read_steps(self.steps_file) if self.steps_file.exists() else []

    def meta_json(self) -> dict[str, Any] | None:
        """meta.json as plain JSON, unchecked, or None when it cannot be read (absent, being written, not JSON):
        for a quick look (the label, ``partial``, a running ladder's plan), never for figures (``read``)."""
        try:
            data = json.loads(self.meta_file.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        return data if isinstance(data, dict) else None

    def label(self) -> str | None:
        """The run's label in meta.json, or None when there is none to read."""
        meta = self.meta_json()
        settings = meta.get("settings") if meta is not None else None
        label = settings.get("label") if isinstance(settings, dict) else None
        return label if isinstance(label, str) else None

    def partial(self) -> bool:
        """meta.json says partial: the run was stopped (False when it cannot be read)."""
        meta = self.meta_json()
        return bool(meta.get("partial")) if meta is not None else False

    def _objects(self, name: str) -> list[dict[str, Any]]:
        """The JSON objects of one of the run's JSONL files (torn lines left out); a file not written is empty."""
        return [obj for _, obj in iter_jsonl(self.path / name, missing_ok=True) if isinstance(obj, dict)]

    # -- appending and merging --
    def _append(self, name: str, objs: Sequence[dict[str, Any]]) -> None:
        if objs:
            with (self.path / name).open("a", encoding="utf-8") as fh:
                fh.write("".join(json.dumps(o, separators=(",", ":")) + "\n" for o in objs))

    def append_steps(self, steps: Sequence[dict[str, Any]]) -> None:
        """Append whole step lines to steps.jsonl (compact JSON, one per line)."""
        self._append(STEPS_FILE, steps)

    def append_records(self, records: Sequence[dict[str, Any]]) -> None:
        """Append whole record lines to records.jsonl (compact JSON, one per line)."""
        self._append(RECORDS_FILE, records)

    def merge(self, sub: RunDir, tag: str, *, refined: bool = True) -> int:
        """Append a sub-run's files (steps, records, answers, server samples) to this run; returns the steps added.

        Steps are renumbered after the run's last step and marked ``refined`` (a level topped up to keep the
        comparison paired is not); records and answers follow their step, and their request ids (and
        conversation ids) get ``tag`` so they stay unique in the run. GPU samples and the sub-run's meta stay in
        the sub-run."""
        offset = 1 + max((s["index"] for s in self.steps()), default=-1)
        new_steps = [{**s, "index": s["index"] + offset, **({"refined": True} if refined else {})}
                     for s in sub._objects(STEPS_FILE) if isinstance(s.get("index"), int)]

        def moved(obj: dict[str, Any]) -> dict[str, Any]:
            obj = {**obj, "request_id": f"{tag}-{obj.get('request_id')}"}
            if isinstance(obj.get("step"), int):
                obj["step"] += offset
            if isinstance(obj.get("conversation_id"), str):
                obj["conversation_id"] = f"{tag}-{obj['conversation_id']}"
            return obj

        self._append(RECORDS_FILE, [moved(r) for r in sub._objects(RECORDS_FILE)])
        self._append(ANSWERS_FILE, [moved(a) for a in sub._objects(ANSWERS_FILE)])
        self._append(SERVER_METRICS_FILE, sub._objects(SERVER_METRICS_FILE))
        self._append(STEPS_FILE, new_steps)
        return len(new_steps)

    # -- clearing --
    def holds_only_ours(self) -> bool:
        """Whether every entry is one a run of ours writes (its files, Locust's log, the sub-run folders)."""
        ours = frozenset((*RUN_FILES, LOG_FILE, *SUB_RUNS, *SIDE_RUNS))
        return all(p.name in ours for p in self.path.iterdir())

    def holds_a_run(self) -> bool:
        """Whether anything but Locust's log is in the directory (the log of the run starting is not a run)."""
        return any(p.name != LOG_FILE for p in self.path.iterdir())

    def clear(self, *, log: bool = False) -> None:
        """Remove the run's files (``RUN_FILES``; with ``log``, Locust's log too); anything else stays."""
        for name in (*RUN_FILES, LOG_FILE) if log else RUN_FILES:
            (self.path / name).unlink(missing_ok=True)


def read_run(run_dir: str | Path) -> RunData:
    """Read a run directory, finished or killed half-way. Missing steps/meta files give empty values."""
    return RunDir(Path(run_dir)).read()

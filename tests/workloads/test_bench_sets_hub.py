"""--prompts NAME=hf:SOURCE: the real Hugging Face datasets library loads a local folder in the hub's layout
(a README.md whose YAML header lists the configurations, Parquet or JSONL data files), offline; the rows go through
the publisher-format readers, so categories, turns and one-line errors are the same as from the files."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from specbench.locustfiles.prompts import load_prompts
from specbench.locustfiles.promptset import PromptError

REPO = Path(__file__).resolve().parents[2]
# Written for this test (no dataset text), in SPEED-Bench's fields.
ROWS = [{"question_id": "q1", "category": "coding", "turns": ["Write a loop that counts to ten.", "Now in C."]},
        {"question_id": "q2", "category": "math", "turns": ["What is seven times eight?"]}]
CARD = """---
configs:
- config_name: qualitative
  data_files:
  - split: test
    path: qualitative/*.parquet
- config_name: throughput_8k
  data_files:
  - split: test
    path: throughput_8k/*.parquet
---
# A local dataset in the hub's layout (written by the test)
"""


@pytest.fixture(autouse=True)
def _offline(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No network, and the library's cache in the test's own folder (not the user's home)."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setenv("HF_DATASETS_CACHE", str(tmp_path / "hf-cache"))


def _speed_bench_folder(root: Path, rows: list[dict] | None = None) -> Path:
    for config, extra in (("qualitative", []), ("throughput_8k", [{**ROWS[0], "question_id": "long"}])):
        (root / config).mkdir(parents=True)
        pq.write_table(pa.Table.from_pylist([*(rows or ROWS), *extra]), root / config / "test-00000-of-00001.parquet")
    (root / "README.md").write_text(CARD)
    return root


def test_a_hub_layout_folder_reads_as_the_publishers_file_does(tmp_path: Path) -> None:
    folder = _speed_bench_folder(tmp_path / "SPEED-Bench")
    quality = load_prompts(f"speed-bench:qualitative=hf:{folder}")
    assert [(p.id, p.category, p.text, p.recorded_turns) for p in quality.prompts] == [
        ("speed-bench:qualitative-q1", "coding", "Write a loop that counts to ten.", ("Now in C.",)),
        ("speed-bench:qualitative-q2", "math", "What is seven times eight?", ())]
    throughput = load_prompts(f"speed-bench:throughput-8k=hf:{folder}#test")  # its own configuration
    assert throughput.name == "speed-bench:throughput-8k" and len(throughput) == 3
    mt = tmp_path / "mt"
    (mt / "data").mkdir(parents=True)
    (mt / "data" / "test.jsonl").write_text("".join(json.dumps(r) + "\n" for r in ROWS))
    assert load_prompts(f"mt-bench=hf:{mt}").categories() == ["coding", "math"]


def test_wrong_rows_and_sources_are_one_line_naming_the_row_or_what_exists(tmp_path: Path) -> None:
    folder = _speed_bench_folder(tmp_path / "bad", [ROWS[0], {**ROWS[1], "turns": []}])
    with pytest.raises(PromptError, match=r"hf:.*bad row 2: field 'turns': expected a non-empty list"):
        load_prompts(f"speed-bench:qualitative=hf:{folder}")
    with pytest.raises(PromptError, match=r"no split 'validation'; it has test: add #SPLIT"):
        load_prompts(f"speed-bench:qualitative=hf:{folder}#validation")
    with pytest.raises(PromptError, match=r"could not load it \(\w+Error: .*throughput_16k"):
        load_prompts(f"speed-bench:throughput-16k=hf:{folder}")  # a configuration the folder lacks
    with pytest.raises(PromptError, match="nowhere: no such folder, and not a dataset name on the hub"):
        load_prompts(f"mt-bench=hf:{tmp_path / 'nowhere'}")


def test_without_the_library_the_message_names_the_extra(tmp_path: Path) -> None:
    """A Python where ``import datasets`` fails (as without the extra): one line, no traceback."""
    folder = _speed_bench_folder(tmp_path / "SPEED-Bench")
    code = ("import sys; sys.modules['datasets'] = None\n"
            "from specbench.locustfiles.prompts import load_prompts\n"
            "from specbench.locustfiles.promptset import PromptError\n"
            f"try:\n    load_prompts('speed-bench:qualitative=hf:{folder}')\n"
            "except PromptError as e:\n    print(e)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=60)
    assert "needs the datasets library: pip install 'locust-specbench[hf]'" in out.stdout, out.stderr

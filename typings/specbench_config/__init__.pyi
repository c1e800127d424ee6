# specbench_config is the checkout's config/ folder installed under another name (pyproject's package-dir);
# mypy checks config/__init__.py as "config" and reads this stub for the installed name. Keep in step.
from pathlib import Path

__all__ = ["data_path"]

def data_path(*parts: str) -> Path: ...

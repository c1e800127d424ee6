"""The suite's data (prompt sets, emulator profiles, suite profiles), imported as ``specbench.config``.

``specbench/config`` links to this ``config/`` folder, so the folder stays the one editable copy in a checkout
while a wheel carries the same files. Code finds them through
``importlib.resources`` here, never by a path relative to its own module, so both layouts work.
"""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path

__all__ = ["data_path"]


def data_path(*parts: str) -> Path:
    """A shipped file or folder, e.g. ``data_path("emulator", "baseline.yaml")``, as a real path.

    Real paths because Locust and the emulator take file paths; pip always installs a wheel unpacked.
    """
    root = files(__name__)
    if not isinstance(root, Path):
        raise RuntimeError(f"specbench's data must be installed as files, not inside an archive: {root}")
    return root.joinpath(*parts)

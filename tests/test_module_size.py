"""Every product module is at most ``MAX_LINES`` lines (issue #54): a module that grows past it is split along its
responsibilities (as ``contract/settings.py`` into the declaration, ``optionvalues.py`` and ``optionchecks.py``, and
``locustfiles/hooks.py`` into one module per process role), not trimmed by packing lines.

The product is the installed packages' folders (``PRODUCT_FOLDERS``), walked without following links: ``specbench/``
holds a link to each other folder, and each module is counted once, in its real folder.
"""

from __future__ import annotations

import os
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MAX_LINES = 600
PRODUCT_FOLDERS = ("analysis", "config", "contract", "emulator", "locustfiles", "shapes", "specbench")


def product_files(root: Path) -> list[Path]:
    """Every real ``.py`` file under the product folders of ``root``; links (to a folder or a file) are skipped."""
    found: list[Path] = []
    for folder in PRODUCT_FOLDERS:
        for where, _dirs, files in os.walk(root / folder):  # followlinks=False: a linked folder is not entered
            found += [Path(where) / name for name in files
                      if name.endswith(".py") and not (Path(where) / name).is_symlink()]
    return sorted(found)


def oversized(root: Path, limit: int = MAX_LINES) -> list[str]:
    """One line per module above ``limit`` lines, naming it and its length, longest first."""
    sizes = [(len(path.read_text(encoding="utf-8").splitlines()), path.relative_to(root).as_posix())
             for path in product_files(root)]
    return [f"{name}: {lines} lines (at most {limit})" for lines, name in sorted(sizes, key=lambda s: (-s[0], s[1]))
            if lines > limit]


def test_every_product_module_is_at_most_600_lines() -> None:
    files = product_files(ROOT)
    assert len(files) > 100 and ROOT / "contract" / "settings.py" in files  # the walk sees the product
    assert not any(path.relative_to(ROOT).parts[:2] == ("specbench", "contract") for path in files)  # links: once
    offenders = oversized(ROOT)
    assert not offenders, "split these along their responsibilities:\n" + "\n".join(offenders)


def test_an_oversized_module_is_named_and_links_are_not_counted(tmp_path: Path) -> None:
    (tmp_path / "contract").mkdir()
    (tmp_path / "contract" / "big.py").write_text("x = 1\n" * 601, encoding="utf-8")
    (tmp_path / "contract" / "fits.py").write_text("x = 1\n" * 600, encoding="utf-8")
    (tmp_path / "analysis" / "stats").mkdir(parents=True)
    (tmp_path / "analysis" / "stats" / "long.py").write_text("x = 1\n" * 700, encoding="utf-8")
    (tmp_path / "analysis" / "notes.txt").write_text("x\n" * 900, encoding="utf-8")
    (tmp_path / "specbench").mkdir()
    (tmp_path / "specbench" / "contract").symlink_to(tmp_path / "contract")  # as in the checkout
    (tmp_path / "specbench" / "alias.py").symlink_to(tmp_path / "contract" / "big.py")
    assert oversized(tmp_path) == ["analysis/stats/long.py: 700 lines (at most 600)",
                                   "contract/big.py: 601 lines (at most 600)"]

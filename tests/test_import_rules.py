"""The layering the README promises, checked on the source: which package may import which.

settings and the record contract (``contract``) depend on nothing of ours; the analysis reads records and
never the code that made them; the shapes decide steps without knowing how requests are sent; the load side
never carries its own test target inside it. Read with ``ast``, so a lazy import inside a function counts too.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
OURS = {"analysis", "contract", "emulator", "locustfiles", "shapes", "specbench"}

FORBIDDEN: dict[str, set[str]] = {
    "contract": OURS - {"contract"},
    "analysis": {"locustfiles", "shapes", "specbench", "emulator", "locust", "gevent"},
    "shapes": {"locustfiles", "specbench", "emulator"},
    "locustfiles": {"specbench", "emulator"},  # the default target runs as its own program (locustfiles.target)
}
#: modules a package may import although their package is forbidden to it: the shape on the master speaks the
#: load side's messages (their names are declared once, on the load side)
ALLOWED: dict[str, set[str]] = {"shapes": {"locustfiles.messages"}}


def imported_modules(path: Path) -> set[str]:
    """Every module a module imports (absolute imports; ours use no relative ones across)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add(node.module)
    return found


def imported_packages(path: Path, allowed: frozenset[str] | set[str] = frozenset()) -> set[str]:
    """Top-level package of every import in a module, but for the modules in ``allowed``."""
    return {name.split(".")[0] for name in imported_modules(path) - allowed}


@pytest.mark.parametrize("package", sorted(FORBIDDEN))
def test_package_imports_only_what_its_layer_allows(package: str) -> None:
    offences = []
    for module in sorted((ROOT / package).rglob("*.py")):
        bad = imported_packages(module, ALLOWED.get(package, set())) & FORBIDDEN[package]
        if bad:
            offences.append(f"{module.relative_to(ROOT)} imports {', '.join(sorted(bad))}")
    assert not offences, "\n".join(offences)


def test_the_rule_sees_an_import_inside_a_function(tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    module.write_text("def f():\n    from emulator import start\n    import shapes.ladder\n", encoding="utf-8")
    assert imported_packages(module) == {"emulator", "shapes"}


def test_an_allowed_module_is_only_that_module(tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    module.write_text("from locustfiles.messages import STEP_MESSAGE\nimport locustfiles.user\n", encoding="utf-8")
    assert imported_packages(module, {"locustfiles.messages"}) == {"locustfiles"}
    module.write_text("from locustfiles.messages import STEP_MESSAGE\n", encoding="utf-8")
    assert imported_packages(module, {"locustfiles.messages"}) == set()

"""The layering the README promises, checked on the source: which package may import which.

settings and the record contract (``contract``) depend on nothing of ours; the analysis reads records and
never the code that made them; the shapes decide steps without knowing how requests are sent; the load side
never carries its own test target inside it. Inside ``analysis`` the subpackages are layers (analysis/README.md):
statistics under one run's figures under the verdicts under the text outputs under the charts, each importing
only its own layer and those below, and matplotlib only in the charts. Read with ``ast``, so a lazy import inside
a function counts too.
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


# analysis's layers, lowest first: a module may import its own layer and those before it, never one after.
ANALYSIS_LAYERS = ("stats", "records", "verdicts", "reporting", "charts")
# analysis.table (cell formats and table layout) imports nothing of analysis and serves every layer: the verdicts'
# sentences print a ratio exactly as the tables do. The entry points (the package's lazy API, the CLI, --out's
# files) sit above every layer.
ANALYSIS_SHARED = {"analysis.table"}
ANALYSIS_TOP = {"analysis", "analysis.__main__", "analysis.cli", "analysis.outputs"}
# Text outputs and the web UI's Tokens tab (analysis.reporting.live, imported by the load side) stay light.
MATPLOTLIB_ONLY_IN = "charts"


def imported_packages(path: Path) -> set[str]:
    """Top-level package of every import in a module (absolute imports; ours use no relative ones across)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add(node.module.split(".")[0])
    return found


def imported_modules(path: Path) -> set[str]:
    """Dotted name of every import in a module, ``from a.b import c`` giving ``a.b.c``; relative ones as ``.``."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = "." * node.level + (node.module or "")
            found.update(f"{base}.{alias.name}" if node.level == 0 else base for alias in node.names)
    return found


def analysis_layer(module: str) -> str:
    """The layer of an analysis module (``analysis.stats.bootstrap`` -> ``stats``), ``top`` or ``shared``."""
    if module in ANALYSIS_SHARED:
        return "shared"
    if module in ANALYSIS_TOP:
        return "top"
    parts = module.split(".")
    return parts[1] if len(parts) >= 2 and parts[1] in ANALYSIS_LAYERS else "unplaced"


def module_of(name: str) -> str:
    """The module an imported name lives in: ``analysis.table.fmt_ratio`` -> ``analysis.table``, and
    ``analysis.compare_runs`` (the lazy API) -> ``analysis``."""
    parts = name.split(".")
    for end in range(len(parts), 0, -1):
        where = ROOT.joinpath(*parts[:end])
        if where.with_suffix(".py").is_file() or (where / "__init__.py").is_file():
            return ".".join(parts[:end])
    return name


def layer_offences(module: str, imports: set[str]) -> list[str]:
    """What ``module`` (an analysis module) imports against the layering."""
    layer = analysis_layer(module)
    if layer == "unplaced":
        return [f"{module} is in no layer: put it in one of analysis/{{{','.join(ANALYSIS_LAYERS)}}}/"]
    bad = []
    for name in sorted(imports):
        if name.startswith("."):
            bad.append(f"{module} imports relatively ({name}): use absolute imports, which this rule reads")
        elif name.split(".")[0] == "matplotlib" and layer != MATPLOTLIB_ONLY_IN:
            bad.append(f"{module} imports {name}: matplotlib belongs in analysis/{MATPLOTLIB_ONLY_IN}/")
        elif name.split(".")[0] == "analysis" and layer != "top":
            target = analysis_layer(module_of(name))
            allowed = (target == "shared" and layer != "shared") or (
                target in ANALYSIS_LAYERS and layer in ANALYSIS_LAYERS
                and ANALYSIS_LAYERS.index(target) <= ANALYSIS_LAYERS.index(layer))
            if not allowed:
                bad.append(f"{module} ({layer}) imports {name} ({target})")
    return bad


def analysis_modules() -> list[tuple[str, Path]]:
    out = []
    for path in sorted((ROOT / "analysis").rglob("*.py")):
        parts = path.relative_to(ROOT).with_suffix("").parts
        out.append((".".join(parts[:-1] if parts[-1] == "__init__" else parts), path))
    return out


def forbidden_imports(path: Path, package: str) -> set[str]:
    """The packages forbidden to ``package`` that the module at ``path`` imports."""
    names = {name for name in imported_modules(path) if not name.startswith(".")}
    return {name.split(".")[0] for name in names} & FORBIDDEN[package]


@pytest.mark.parametrize("package", sorted(FORBIDDEN))
def test_package_imports_only_what_its_layer_allows(package: str) -> None:
    offences = []
    for module in sorted((ROOT / package).rglob("*.py")):
        bad = forbidden_imports(module, package)
        if bad:
            offences.append(f"{module.relative_to(ROOT)} imports {', '.join(sorted(bad))}")
    assert not offences, "\n".join(offences)


def test_the_rule_sees_an_import_inside_a_function(tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    module.write_text("def f():\n    from emulator import start\n    import shapes.ladder\n", encoding="utf-8")
    assert imported_packages(module) == {"emulator", "shapes"}


def test_analysis_layers_import_only_downwards() -> None:
    modules = analysis_modules()
    offences = [o for name, path in modules for o in layer_offences(name, imported_modules(path))]
    assert not offences, "\n".join(offences)
    assert {analysis_layer(name) for name, _ in modules} == {*ANALYSIS_LAYERS, "shared", "top"}


def test_the_layer_rule_catches_upward_imports_matplotlib_and_unplaced_modules(tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    module.write_text("from analysis.records.summary import StepRow\n\n\ndef f():\n"
                      "    from analysis.reporting.render import render_comparison\n    import matplotlib.pyplot\n"
                      "    from analysis.table import fmt_ratio\n    from . import sibling\n", encoding="utf-8")
    imports = imported_modules(module)
    assert "analysis.reporting.render.render_comparison" in imports and "." in imports
    said = layer_offences("analysis.stats.m", imports)
    assert len(said) == 4, said  # records and reporting above stats, matplotlib, the relative import
    assert layer_offences("analysis.reporting.m", {"analysis.records.summary.StepRow", "analysis.table.fmt_num"}) == []
    assert layer_offences("analysis.table", {"analysis.stats.bootstrap.MIN_BATCHES"}) != []
    assert layer_offences("analysis.verdicts.m", {"analysis.compare_runs"}) != []  # the lazy API is the top's
    assert layer_offences("analysis.newflat", set()) != []
    assert layer_offences("analysis.cli", {"analysis.charts.plots.summary_plots"}) == []

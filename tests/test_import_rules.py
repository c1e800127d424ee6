"""The layering the README promises, checked on the source: which package may import which, and no circles.

The packages are layers, lowest first (``LAYERS``): the data (``specbench_config``, the ``config/`` folder); the
settings and the record contract (``contract``), which depend on nothing else of ours; the analysis, which reads
records and never the code that made them; the shapes, which decide steps without knowing how requests are sent;
the load side (``locustfiles``); the command line (``specbench``) on top. A package imports its own modules and
the layers below it, never one above. The emulator, the built-in test target, stands apart (``APART``): it runs
as its own program (``locustfiles.target`` starts it as a child process), so it imports only the data and no
package of ours imports it, and its truth owes nothing to the client it judges. Inside ``analysis`` the
subpackages are layers too (analysis/README.md): statistics under one run's figures under the verdicts under the
text outputs under the charts, and matplotlib only in the charts.

No module takes part in an import circle, of any length: each module can then be read, tested and changed with
only what sits below it. The graph is read with ``ast`` (tests/importgraph.py), so an import inside a function,
under ``if TYPE_CHECKING:`` or relative counts like any other.
"""

from __future__ import annotations

import ast
from collections.abc import Mapping
from pathlib import Path

import pytest

from tests.importgraph import folder_name, import_circles, import_graph, package_of, product_modules

ROOT = Path(__file__).resolve().parent.parent

# The product's packages as layers, lowest first: each may import the layers before it, never one after.
LAYERS: tuple[str, ...] = ("specbench_config", "contract", "analysis", "shapes", "locustfiles", "specbench")
# Packages beside the layers, with the only packages of ours each may import; no package of ours imports them.
APART: dict[str, frozenset[str]] = {"emulator": frozenset({"specbench_config"})}
# What each package may import of ours: derived from the two declarations above, the one source of the rule.
MAY_IMPORT: dict[str, frozenset[str]] = {
    **{package: frozenset(LAYERS[:position]) for position, package in enumerate(LAYERS)},
    **APART,
}
OURS = frozenset(MAY_IMPORT)
# A package's folder under the root: its import name but where pyproject.toml's package-dir says otherwise.
FOLDERS: dict[str, str] = {package: {"specbench_config": "config"}.get(package, package) for package in OURS}
NOT_PRODUCT = {"tests"}  # packages at the root that are not installed

# Libraries a package never imports: what reads records runs anywhere, without the load side's event loop (a run
# killed half-way is analysed on any machine; the web UI's Tokens tab imports the analysis and stays light).
LOAD_LIBRARIES = frozenset({"locust", "gevent"})
NEVER: dict[str, frozenset[str]] = {"contract": LOAD_LIBRARIES, "analysis": LOAD_LIBRARIES}

# analysis's layers, lowest first: a module may import its own layer and those before it, never one after.
ANALYSIS_LAYERS = ("stats", "records", "verdicts", "reporting", "charts")
# analysis.table (cell formats and table layout) imports nothing of analysis and serves every layer: the verdicts'
# sentences print a ratio exactly as the tables do. The entry points (the package's lazy API, the CLI, --out's
# files) sit above every layer.
ANALYSIS_SHARED = {"analysis.table"}
ANALYSIS_TOP = {"analysis", "analysis.__main__", "analysis.cli", "analysis.outputs"}
# Text outputs and the web UI's Tokens tab (analysis.reporting.live, imported by the load side) stay light.
MATPLOTLIB_ONLY_IN = "charts"


# -- the packages' layers and circles -------------------------------------------------------------------------


def imports_against_layers(graph: Mapping[str, set[str]]) -> list[str]:
    """Each import of a package that the importer's place does not allow: a layer above its own, or a package
    apart (or, from a package apart, anything it is not given)."""
    bad = []
    for module in sorted(graph):
        package = package_of(module)
        allowed = MAY_IMPORT[package]
        for target in sorted(graph[module]):
            if package_of(target) != package and package_of(target) not in allowed:
                below = ", ".join(sorted(allowed)) or "nothing of ours"
                bad.append(f"{module} imports {target}: {package} may import only {below}")
    return bad


def library_offences(root: Path, package: str) -> list[str]:
    """Each module of ``package`` under ``root`` that imports a library ``NEVER`` keeps from it."""
    never = NEVER.get(package, frozenset())
    bad = []
    for module, path in product_modules(root, {package: FOLDERS[package]}).items():
        found = imported_packages(path) & never
        if found:
            bad.append(f"{module} imports {', '.join(sorted(found))}")
    return bad


def package_offences(root: Path) -> list[str]:
    """Everything in the tree at ``root`` against the packages' layers: imports of ours and of libraries."""
    offences = imports_against_layers(import_graph(root, FOLDERS))
    return offences + [o for package in sorted(OURS) for o in library_offences(root, package)]


def circles_text(circles: list[list[str]]) -> str:
    """One line per circle, naming its modules."""
    return "\n".join(f"import circle of {len(c)} modules: {', '.join(c)}" for c in circles)


def imported_packages(path: Path) -> set[str]:
    """Top-level package of every absolute import in a module, lazy ones included."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add(node.module.split(".")[0])
    return found


# -- analysis's own layers ------------------------------------------------------------------------------------


def imported_modules(path: Path) -> set[str]:
    """Dotted name of every import in a module, ``from a.b import c`` giving ``a.b.c``; relative ones as ``.``."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if isinstance(node, ast.Import):
            found.update(folder_name(alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = "." * node.level + folder_name(node.module or "")
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


def module_of(name: str, root: Path = ROOT) -> str:
    """The module an imported name lives in: ``analysis.table.fmt_ratio`` -> ``analysis.table``, and
    ``analysis.compare_runs`` (the lazy API) -> ``analysis``."""
    parts = name.split(".")
    for end in range(len(parts), 0, -1):
        where = root.joinpath(*parts[:end])
        if where.with_suffix(".py").is_file() or (where / "__init__.py").is_file():
            return ".".join(parts[:end])
    return name


def layer_offences(module: str, imports: set[str], root: Path = ROOT) -> list[str]:
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
            target = analysis_layer(module_of(name, root))
            allowed = (target == "shared" and layer != "shared") or (
                target in ANALYSIS_LAYERS and layer in ANALYSIS_LAYERS
                and ANALYSIS_LAYERS.index(target) <= ANALYSIS_LAYERS.index(layer))
            if not allowed:
                bad.append(f"{module} ({layer}) imports {name} ({target})")
    return bad


# -- the rules on this tree -----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def graph() -> dict[str, set[str]]:
    return import_graph(ROOT, FOLDERS)


@pytest.mark.parametrize("package", sorted(OURS))
def test_package_imports_only_what_its_layer_allows(package: str, graph: dict[str, set[str]]) -> None:
    own = {module: targets for module, targets in graph.items() if package_of(module) == package}
    assert own, f"{package} is declared but has no module under {FOLDERS[package]}/"
    offences = imports_against_layers(own) + library_offences(ROOT, package)
    assert not offences, "\n".join(offences)


def test_no_import_circles(graph: dict[str, set[str]]) -> None:
    circles = import_circles(graph)
    assert not circles, circles_text(circles)


def test_every_package_has_a_place() -> None:
    """A new package at the root is declared in LAYERS or APART, or the rules would not see it."""
    packages = {path.name for path in ROOT.iterdir() if (path / "__init__.py").is_file()} - NOT_PRODUCT
    assert packages == set(FOLDERS.values())
    assert len(set(LAYERS)) == len(LAYERS) and not set(LAYERS) & set(APART)


def test_analysis_layers_import_only_downwards() -> None:
    modules = product_modules(ROOT, {"analysis": "analysis"})
    offences = [o for name, path in modules.items() for o in layer_offences(name, imported_modules(path))]
    assert not offences, "\n".join(offences)
    assert {analysis_layer(name) for name in modules} == {*ANALYSIS_LAYERS, "shared", "top"}


# -- the rules on made-up trees: each breach is seen, a clean tree passes --------------------------------------


def write_tree(root: Path, files: dict[str, str]) -> Path:
    """The files (``"contract/a.py": source``) under ``root``, each folder a package (an empty ``__init__.py``
    unless given)."""
    for name, source in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(source, encoding="utf-8")
    for name in files:
        for folder in Path(name).parents[:-1]:
            init = root / folder / "__init__.py"
            if not init.exists():
                init.write_text("", encoding="utf-8")
    return root


def circles_in(root: Path) -> list[list[str]]:
    return import_circles(import_graph(root, FOLDERS))


def test_a_two_module_circle_is_reported(tmp_path: Path) -> None:
    root = write_tree(tmp_path, {
        "contract/a.py": "from contract import b\n",  # the submodule form: an edge to contract.b, not contract
        "contract/b.py": "import contract.a\n",
    })
    circles = circles_in(root)
    assert circles == [["contract.a", "contract.b"]]
    assert "contract.a, contract.b" in circles_text(circles)


def test_a_three_module_circle_through_a_lazy_import_is_reported(tmp_path: Path) -> None:
    root = write_tree(tmp_path, {
        "shapes/a.py": "from shapes.b import B\n",
        "shapes/b.py": "from shapes.c import C\n\nB = 1\n",
        "shapes/c.py": "C = 2\n\n\ndef later():\n    from shapes.a import something\n    return something\n",
    })
    assert circles_in(root) == [["shapes.a", "shapes.b", "shapes.c"]]


def test_a_relative_import_circle_under_type_checking_is_reported(tmp_path: Path) -> None:
    root = write_tree(tmp_path, {
        "emulator/server.py": "from .parts import routes\n",  # from a package import its submodule
        "emulator/parts/routes.py": ("from typing import TYPE_CHECKING\n\nif TYPE_CHECKING:\n"
                                     "    from ..server import Server\n"),
    })
    assert circles_in(root) == [["emulator.parts.routes", "emulator.server"]]


def test_an_import_against_the_layers_is_reported(tmp_path: Path) -> None:
    root = write_tree(tmp_path, {
        "contract/rows.py": "def f():\n    from specbench.shapes.ladder import Ladder\n    return Ladder\n",
        "shapes/ladder.py": "from specbench.contract.rows import f\n\nLadder = f\n",
        "locustfiles/target.py": "import specbench.emulator.server\n",
        "emulator/server.py": "from specbench.contract import rows\n",
        "analysis/m.py": "import gevent\n",
    })
    said = package_offences(root)
    assert said == [
        "contract.rows imports shapes.ladder: contract may import only specbench_config",
        "emulator.server imports contract.rows: emulator may import only specbench_config",
        "locustfiles.target imports emulator.server: locustfiles may import only analysis, contract, shapes, "
        "specbench_config",
        "analysis.m imports gevent",
    ], said


def test_a_clean_tree_says_nothing(tmp_path: Path) -> None:
    root = write_tree(tmp_path, {
        "config/__init__.py": "def data_path():\n    return None\n",
        "contract/schema.py": "from specbench.config import data_path\n",
        "analysis/read.py": "import contract.schema\nimport numpy\n",
        "shapes/ladder.py": "from analysis import read\n\n\ndef f():\n    from contract.schema import data_path\n",
        "locustfiles/user.py": "from . import streams\nfrom shapes.ladder import f\nimport gevent\n",
        "locustfiles/streams.py": ("from typing import TYPE_CHECKING\n\nif TYPE_CHECKING:\n"
                                   "    from .dialects import D\n"),
        "locustfiles/dialects.py": "D = 1\n",
        "specbench/cli.py": "import locustfiles.user\nfrom analysis.read import x\n",
        "emulator/server.py": "from .routes import r\nfrom specbench_config import data_path\n",
        "emulator/routes.py": "r = 1\n",
    })
    assert circles_in(root) == []
    assert package_offences(root) == []
    assert len(import_graph(root, FOLDERS)) == 16  # every module seen, the packages' __init__ files among them


def test_the_rule_sees_an_import_inside_a_function(tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    module.write_text("def f():\n    from emulator import start\n    import shapes.ladder\n", encoding="utf-8")
    assert imported_packages(module) == {"emulator", "shapes"}


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

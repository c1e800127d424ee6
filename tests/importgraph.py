"""The import graph of a source tree, read with ``ast``, and its circles: what tests/test_import_rules.py judges.

Every import counts, wherever it stands: inside a function, under ``if TYPE_CHECKING:``, relative. Each ties two
modules together all the same (the lazy one only later, the annotation one for every reader and type checker).
An edge goes to the module an imported name lives in: ``from a import b`` to ``a.b`` when that is a module, else
to ``a``; ``import a.b.c`` to ``a.b.c`` (not to ``a`` and ``a.b``, whose ``__init__`` files Python also runs,
or every package would be in a circle with the modules its ``__init__`` imports). Strings handed to
``importlib`` at run time are not imports here.
"""

from __future__ import annotations

import ast
from collections.abc import Collection, Iterable, Iterator, Mapping
from pathlib import Path

__all__ = ["import_circles", "import_graph", "imports_of", "package_of", "product_modules", "reachable", "resolve"]


def product_modules(root: Path, folders: Mapping[str, str]) -> dict[str, Path]:
    """Dotted name -> file of every module of the packages ``folders`` names (import name -> its folder under
    ``root``); a package is its ``__init__``. A folder that is not there adds nothing."""
    found: dict[str, Path] = {}
    for package, folder_name in sorted(folders.items()):
        folder = root / folder_name
        for path in sorted(folder.rglob("*.py")):
            parts = (package, *path.relative_to(folder).with_suffix("").parts)
            found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def package_of(module: str) -> str:
    """The top-level package of a dotted name."""
    return module.split(".")[0]


def resolve(name: str, modules: Collection[str]) -> str | None:
    """The module an imported dotted name lives in, its longest prefix that is one of ``modules``; None when no
    prefix is (a library, or the standard library)."""
    parts = name.split(".")
    for end in range(len(parts), 0, -1):
        candidate = ".".join(parts[:end])
        if candidate in modules:
            return candidate
    return None


def _from_base(node: ast.ImportFrom, module: str, is_package: bool) -> str:
    """The absolute name ``from X import ...`` reads from: ``X``, or the package ``node.level`` dots point at."""
    if node.level == 0:
        return node.module or ""
    package = module.split(".") if is_package else module.split(".")[:-1]
    base = package[:len(package) - (node.level - 1)]
    return ".".join([*base, node.module] if node.module else base)


def _imported_names(tree: ast.AST, module: str, is_package: bool) -> Iterator[str]:
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = _from_base(node, module, is_package)
            yield from (f"{base}.{alias.name}" for alias in node.names)


# The installed namespace: ``specbench.analysis`` is the ``analysis/`` folder, ``specbench.config`` the ``config/``
# folder (named ``specbench_config`` here, as the layers call it). The graph names each module by its folder.
NAMESPACE = "specbench"
NAMESPACED = {"analysis", "contract", "emulator", "locustfiles", "shapes"}


def folder_name(name: str) -> str:
    """An imported dotted name as the graph names it: ``specbench.analysis.x`` -> ``analysis.x``,
    ``specbench.config`` -> ``specbench_config``; any other name as it is."""
    parts = name.split(".")
    if len(parts) > 1 and parts[0] == NAMESPACE and parts[1] in NAMESPACED:
        return ".".join(parts[1:])
    if len(parts) > 1 and parts[0] == NAMESPACE and parts[1] == "config":
        return ".".join(["specbench_config", *parts[2:]])
    return name


def imports_of(module: str, path: Path, modules: Collection[str]) -> set[str]:
    """The modules among ``modules`` that ``module`` (the file at ``path``) imports, itself left out."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    found = {resolve(folder_name(name), modules)
             for name in _imported_names(tree, module, path.name == "__init__.py")}
    return {target for target in found if target is not None and target != module}


def import_graph(root: Path, folders: Mapping[str, str]) -> dict[str, set[str]]:
    """Each module of the packages ``folders`` names -> the modules of those packages it imports."""
    modules = product_modules(root, folders)
    return {module: imports_of(module, path, modules) for module, path in modules.items()}


def reachable(graph: Mapping[str, Iterable[str]], start: str) -> set[str]:
    """Every module ``start`` imports, directly or through others (itself only when it is on a circle)."""
    seen: set[str] = set()
    todo = [start]
    while todo:
        for target in graph.get(todo.pop(), ()):
            if target not in seen:
                seen.add(target)
                todo.append(target)
    return seen


def import_circles(graph: Mapping[str, Iterable[str]]) -> list[list[str]]:
    """Every import circle, of any length: each strongly connected component of more than one module (the modules
    that reach one another), sorted. One walk per module: a few hundred modules take milliseconds."""
    reach = {module: reachable(graph, module) for module in graph}
    circles = {frozenset({module} | {other for other in reach[module] if module in reach.get(other, ())})
               for module in graph}
    return sorted(sorted(circle) for circle in circles if len(circle) > 1)

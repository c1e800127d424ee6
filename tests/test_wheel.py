"""The suite as a user installs it: a wheel built from the checkout, in a fresh venv, run outside the checkout.

Catches what an editable install hides: data (prompt sets, emulator and suite profiles) left out of the wheel,
code that finds it by a path into the checkout, a locustfile path that points into the checkout. Kept fast and
offline: the wheel is built from a copy of the sources with this venv's setuptools (no build isolation, nothing
downloaded) and installed with ``--no-deps`` into a bare venv; the dependencies then come from this venv's
site-packages through one ``.pth`` line (the ``.pth`` hooks there, the editable install's among them, are not
run, so nothing of the checkout is importable in the fresh venv).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import venv
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
#: What the wheel is built from: the installed packages, the data and the project file, nothing else.
SOURCES = ("pyproject.toml", "README.md", "analysis", "contract", "emulator", "locustfiles", "shapes", "specbench",
           "config")
# Steps end on their minimums (--step-ci 0): this checks that the installed wheel runs, not the figures' precision.
# With so short steps on a busy machine the two curves can seem to cross between C=1 and C=4, and the demo would
# then add a refined level there (seen once with a neighbour on one core); crossover refinement has its own
# tests (tests/test_refine_runs.py), so the wheel's demo runs without it and its levels stay the ladder's.
SHORT_DEMO = ("--speed", "50", "--ladder", "1,4", "--max-tokens", "32", "--min-requests", "10",
              "--min-step-time", "1", "--max-step-time", "30", "--step-ci", "0", "--no-refine")


def _run(cmd: list[str], cwd: Path, timeout: float, env: dict[str, str] | None = None
         ) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=timeout, env=env, check=False)
    said = proc.stdout[-3000:] + proc.stderr[-3000:]
    assert proc.returncode == 0, f"{' '.join(cmd)} exited {proc.returncode}:\n{said}"
    return proc


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh venv holding the wheel of this checkout; returns its bin directory."""
    work = tmp_path_factory.mktemp("wheel")
    src = work / "src"
    src.mkdir()
    for name in SOURCES:
        if (REPO / name).is_dir():
            shutil.copytree(REPO / name, src / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        else:
            shutil.copy2(REPO / name, src / name)
    _run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index", "-q",
          "-w", str(work / "dist"), str(src)], cwd=work, timeout=120)
    wheel = next((work / "dist").glob("locust_specbench-*.whl"))
    env_dir = work / "venv"
    venv.create(env_dir, with_pip=False, symlinks=os.name != "nt")
    bindir = env_dir / ("Scripts" if os.name == "nt" else "bin")
    python = bindir / ("python.exe" if os.name == "nt" else "python")
    _run([sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps", "--no-index", "-q",
          str(wheel)], cwd=work, timeout=120)
    # Only after the install, so pip never sees this venv's (editable) specbench as installed there.
    purelib = Path(_run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                        cwd=work, timeout=30).stdout.strip())
    deps = {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}
    (purelib / "specbench_test_deps.pth").write_text("\n".join(sorted(deps)) + "\n", encoding="utf-8")
    return bindir


def _outside_env(run_dir: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env["HOME"] = str(run_dir)
    return env


def test_the_wheel_carries_code_data_and_locustfile_and_nothing_of_the_checkout(installed: Path,
                                                                              tmp_path: Path) -> None:
    code = ("import json; from specbench import locustfiles, emulator, config as specbench_config;"
            "from specbench.emulator import available_profiles;"
            "from specbench.locustfiles.prompts import available_sets;"
            "from specbench.loadrun import LOCUSTFILE;"
            "print(json.dumps({'files': [locustfiles.__file__, emulator.__file__, specbench_config.__file__,"
            " str(LOCUSTFILE)], 'profiles': available_profiles(), 'prompts': available_sets(),"
            " 'demo': specbench_config.data_path('suite', 'demo.yaml').is_file()}))")
    python = installed / ("python.exe" if os.name == "nt" else "python")
    found = json.loads(_run([str(python), "-c", code], cwd=tmp_path, timeout=60, env=_outside_env(tmp_path)).stdout)
    venv_root = installed.parent.resolve()
    for path in found["files"]:
        assert Path(path).resolve().is_relative_to(venv_root), f"{path} is not from the installed wheel"
    assert Path(found["files"][3]).is_file(), "the locustfile passed to locust -f is in the wheel"
    assert {"baseline", "eagle3"} <= set(found["profiles"])
    assert "diverse" in found["prompts"]
    assert found["demo"]


def test_the_installed_version_is_the_suite_version_and_packages_are_typed(installed: Path, tmp_path: Path) -> None:
    """One version (contract.version): the wheel's metadata, ``specbench --version`` and meta.json agree; each
    package carries py.typed, so a user's type checker reads the suite's hints."""
    from contract.version import SUITE_VERSION

    python = installed / ("python.exe" if os.name == "nt" else "python")
    code = ("import importlib.metadata as m, pathlib, specbench;"
            "from specbench import analysis, contract, emulator, locustfiles, shapes;"
            "print(m.version('locust-specbench'));"
            "print(all((pathlib.Path(p.__file__).parent / 'py.typed').is_file()"
            " for p in (analysis, contract, emulator, locustfiles, shapes, specbench)))")
    env = _outside_env(tmp_path)
    assert _run([str(python), "-c", code], cwd=tmp_path, timeout=60, env=env).stdout.split() == [SUITE_VERSION,
                                                                                                  "True"]
    said = _run([str(installed / "specbench"), "--version"], cwd=tmp_path, timeout=60, env=env).stdout
    assert said.strip() == f"specbench {SUITE_VERSION}"


def test_the_wheel_carries_every_package_of_the_checkout(installed: Path, tmp_path: Path) -> None:
    """pyproject lists packages by name: a subpackage left off the list (analysis.stats, ...) is not installed."""
    packages = sorted(".".join(("specbench", *init.parent.relative_to(REPO).parts) if top != "specbench"
                               else init.parent.relative_to(REPO).parts)
                      for top in ("analysis", "contract", "emulator", "locustfiles", "shapes", "specbench")
                      for init in (REPO / top).rglob("__init__.py"))
    assert "specbench.analysis.stats" in packages
    code = ("import importlib, json, sys; print(json.dumps({name: importlib.import_module(name).__file__"
            " for name in sys.argv[1:]}))")
    python = installed / ("python.exe" if os.name == "nt" else "python")
    found = json.loads(_run([str(python), "-c", code, *packages], cwd=tmp_path, timeout=60,
                            env=_outside_env(tmp_path)).stdout)
    venv_root = installed.parent.resolve()
    assert sorted(found) == packages
    for name, path in found.items():
        assert Path(path).resolve().is_relative_to(venv_root), f"{name} is not from the installed wheel"


def test_the_wheel_installs_one_namespace_and_no_generic_top_level_name(installed: Path, tmp_path: Path) -> None:
    """Installed into a venv shared with other packages (vLLM, SGLang, anything with an ``analysis`` or
    ``config`` module), the suite adds one top-level name, ``specbench``: the checkout's folders are its
    subpackages, never modules of their own."""
    python = installed / ("python.exe" if os.name == "nt" else "python")
    code = ("import importlib.util, json, sys;"
            "print(json.dumps({name: importlib.util.find_spec(name) is not None for name in sys.argv[1:]}))")
    generic = ["analysis", "contract", "emulator", "locustfiles", "shapes", "config", "specbench_config"]
    found = json.loads(_run([str(python), "-c", code, *generic, "specbench"], cwd=tmp_path, timeout=60,
                            env=_outside_env(tmp_path)).stdout)
    assert found == {**dict.fromkeys(generic, False), "specbench": True}
    purelib = Path(_run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                        cwd=tmp_path, timeout=30).stdout.strip())
    ours = sorted(path.name for path in purelib.iterdir()
                  if not path.name.endswith((".dist-info", ".pth")) and path.name != "__pycache__")
    assert ours == ["specbench"], ours
    said = subprocess.run([str(python), "-c", "import analysis"], cwd=tmp_path, capture_output=True, text=True,
                          timeout=60, env=_outside_env(tmp_path), check=False)
    assert said.returncode != 0 and "No module named 'analysis'" in said.stderr


def test_specbench_demo_runs_from_the_installed_wheel_outside_the_checkout(installed: Path, tmp_path: Path) -> None:
    specbench = installed / ("specbench.exe" if os.name == "nt" else "specbench")
    proc = _run([str(specbench), "demo", "--out", "report", *SHORT_DEMO], cwd=tmp_path, timeout=180,
                env=_outside_env(tmp_path))
    out = tmp_path / "report"
    assert "report: " in proc.stdout
    for name in ("report.md", "comparison.json", "baseline/records.jsonl", "spec/records.jsonl"):
        assert (out / name).is_file(), name
    levels = json.loads((out / "comparison.json").read_text())["levels"]
    assert [lv["target_c"] for lv in levels] == [1, 4]
    assert all(lv["ratio"] is not None for lv in levels)

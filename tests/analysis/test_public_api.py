"""The API the specbench CLI wraps is importable from the package and keeps its signatures."""

from __future__ import annotations

import inspect

from specbench import analysis


def test_public_names_resolve_from_the_package() -> None:
    for name in analysis.__all__:
        assert getattr(analysis, name) is not None


def test_signatures_the_cli_layer_relies_on() -> None:
    params = inspect.signature(analysis.compare_runs).parameters
    assert list(params) == ["base", "spec", "seed", "n_boot", "max_error_rate", "slo", "prices"]  # keyword-only, None
    assert params["seed"].default == 0 and params["n_boot"].default == 2000
    assert params["seed"].kind is inspect.Parameter.KEYWORD_ONLY
    assert next(iter(inspect.signature(analysis.summarize_run).parameters)) == "run"
    assert list(inspect.signature(analysis.write_comparison_outputs).parameters) == ["comparison", "out_dir"]
    assert list(inspect.signature(analysis.main).parameters) == ["argv"]
    assert analysis.main(["summarize", "/nonexistent/run"]) == 2

"""Issue #22: random values for every suite option, from its type and its neighbours (0, -1, huge, NaN, empty,
unicode), are either accepted or refused with one InputError line; never another exception (a traceback)."""

from __future__ import annotations

import random

import pytest

from contract.settings import OPTIONS
from specbench.inputs import InputError, check_load_options

NEIGHBOURS = ("0", "-1", "1", "1e308", "99999999999999999999", "nan", "inf", "-inf", "", " ", "²", "٣", "é",
              "1,2", "1,,2", "0.5", "-0.0", "1e-9", "\x00", "true", "10s", "1h30m", "fixed:4", "uniform:9-1",
              "normal:5,-1", "4:10", "ttft=2s", "a" * 300)
# Options whose value is a path or name, where a random string only means "not found" (already one line).
SKIP = {"suite_config", "out", "label", "model", "api_key_env"}


def _value(rng: random.Random, default: object) -> str:
    if isinstance(default, bool):
        return ""
    if isinstance(default, int | float) and rng.random() < 0.4:
        return str(type(default)(rng.choice([0, 1, 2, 7, 1000, 10**6])) * rng.choice([1, -1]))
    return rng.choice(NEIGHBOURS)


@pytest.mark.parametrize("seed", range(6))
def test_random_option_values_never_give_a_traceback(seed):
    rng = random.Random(2200 + seed)
    options = [o for o in OPTIONS if o.dest not in SKIP]
    accepted = 0
    for _ in range(60):
        args: list[str] = []
        for opt in rng.sample(options, rng.randint(1, 4)):
            if isinstance(opt.default, bool):
                args.append(f"--{'' if rng.random() < 0.5 else 'no-'}{opt.name}")
            else:
                args += [f"--{opt.name}={_value(rng, opt.default)}"]
        try:
            check_load_options(args)
            accepted += 1
        except InputError as exc:
            line = str(exc)
            assert "\n" not in line.strip() and line, args
            assert "--" in line or "option" in line, (args, line)  # names the flag
    assert accepted < 60  # the neighbours do find refusals

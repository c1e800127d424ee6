"""The tune file: a baseline and a speculative launch template, and the depths (K) to try.

It is a sweep file in disguise: the speculative template is expanded into one configuration per depth (``k1``,
``k2``, ...) with three extra placeholders, ``{k}`` (the depth), ``{draft_tokens}`` (K + 1: SGLang's
``--speculative-num-draft-tokens`` for a chain) and ``{speculative_config}`` (vLLM's
``--speculative-config`` JSON at that depth, built from the file's ``speculative_config`` mapping), and the
whole is checked by the sweep file's own rules, so every mistake is one line naming the tune file's key.
Format and examples: docs/guides/tuning.md and config/tune/emulator.yaml.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from specbench.config.yamlload import YamlInputError, load_yaml
from specbench.contract.kschedule import Schedule, echo, speculative_config
from specbench.sweepfile import Sweep, SweepFileError, parse_sweep

TOP_KEYS = {"params", "ready_timeout_s", "stop_timeout_s", "depths", "speculative_config", "max_batch", "baseline",
            "speculative"}
DEFAULT_DEPTHS = (1, 2, 3, 4, 5)
MAX_DEPTH = 64
DEFAULT_MAX_BATCH = 256  # vLLM's default max_num_seqs on a GPU: the schedule's last range ends here
TUNED_NAME = "tuned"
# OUT/tuned/ (the setting) and OUT/validate/ (the validation runs) sit beside the runs, OUT/NAME: no run takes them
RESERVED_NAMES = frozenset({"tuned", "validate"})
DEPTH_FIELDS = ("k", "draft_tokens", "speculative_config")


@dataclass(frozen=True)
class TuneFile:
    source: str
    sweep: Sweep  # the baseline, then one configuration per depth
    depths: Mapping[str, int]  # configuration name -> depth
    base_config: Mapping[str, Any]  # vLLM speculative config without the depth
    max_batch: int
    raw: Mapping[str, Any]  # the file as read, to build the validation sweep from

    @property
    def takes_config(self) -> bool:
        """True when the speculative command reads ``{speculative_config}``, so a schedule can be launched."""
        spec = self.raw.get("speculative")
        return isinstance(spec, dict) and "{speculative_config}" in json.dumps(spec.get("command"))

    def name_of(self, depth: int) -> str:
        return next(name for name, k in self.depths.items() if k == depth)

    def validation_sweep(self, fixed: int, schedule: Schedule) -> Sweep:
        """The baseline, the best fixed depth and the tuned schedule, as one sweep (``--validate``)."""
        spec = dict(self.raw["speculative"])
        deepest = max(self.depths.values())
        tuned = speculative_config(self.base_config, deepest, schedule)
        entries = [self._baseline(),
                   self._depth_entry(spec, self.name_of(fixed), fixed, speculative_config(self.base_config, fixed)),
                   self._depth_entry(spec, TUNED_NAME, deepest, tuned)]
        return _parse({**self._top(), "configurations": entries}, self.source, {0: "baseline"}, "speculative")

    def _baseline(self) -> dict[str, Any]:
        return {**self.raw["baseline"], "name": "baseline", "baseline": True}

    def _top(self) -> dict[str, Any]:
        return {key: self.raw[key] for key in ("params", "ready_timeout_s", "stop_timeout_s") if key in self.raw}

    @staticmethod
    def _depth_entry(spec: Mapping[str, Any], name: str, depth: int, config: Mapping[str, Any]) -> dict[str, Any]:
        params = dict(spec.get("params") or {})
        params.update({"k": str(depth), "draft_tokens": str(depth + 1),
                       "speculative_config": json.dumps(config, separators=(",", ":"))})
        entry = {key: value for key, value in spec.items() if key != "depth"}
        return {**entry, "name": name, "params": params}


def load_tune(path: str | Path, depths: tuple[int, ...] | None = None) -> TuneFile:
    """Read and check a tune file; ``depths`` (``--depths``) replaces the file's. Raises ``SweepFileError``."""
    source = str(path)
    try:
        raw = load_yaml(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise SweepFileError(source, "", f"cannot read the file ({exc.strerror})") from None
    except UnicodeDecodeError:
        raise SweepFileError(source, "", "cannot read the file (not UTF-8 text)") from None
    except YamlInputError as exc:
        raise SweepFileError(source, "", str(exc)) from None
    return parse_tune(raw, source, depths)


def parse_tune(raw: Any, source: str = "<tune>", depths: tuple[int, ...] | None = None) -> TuneFile:
    if not isinstance(raw, dict):
        raise SweepFileError(source, "", "the top level must be a mapping with 'baseline' and 'speculative'")
    extra = sorted(set(map(str, raw)) - TOP_KEYS)
    if extra:
        raise SweepFileError(source, extra[0], f"unknown key (expected one of: {', '.join(sorted(TOP_KEYS))})")
    for key in ("baseline", "speculative"):
        if key not in raw:
            raise SweepFileError(source, key, "is required")
    if not isinstance(raw["baseline"], dict):
        raise SweepFileError(source, "baseline", "expected a mapping (url or command, ready, ...)")
    base_config, max_batch = _settings(raw, source)
    spec = raw["speculative"]
    top = {key: raw[key] for key in ("params", "ready_timeout_s", "stop_timeout_s") if key in raw}
    baseline = {**raw["baseline"], "name": "baseline", "baseline": True}
    if isinstance(spec, list):
        if depths is not None:
            raise SweepFileError(source, "speculative", "is a list, each entry with its own depth, so --depths has "
                                 "nothing to choose from: give the depths in the list (or drop --depths)")
        if "depths" in raw:
            raise SweepFileError(source, "depths", "applies to a speculative template; 'speculative' is a list, "
                                 "each entry with its own depth (drop 'depths')")
        entries, names, depth_of = _listed(spec, source)
    elif isinstance(spec, dict):
        chosen = depths or _depths(raw.get("depths", list(DEFAULT_DEPTHS)), source)
        entries, names, depth_of = _templated(spec, chosen, base_config, source)
    else:
        raise SweepFileError(source, "speculative", "expected a mapping (a launch template with {k} or "
                             "{speculative_config}) or a list of configurations, each with its depth")
    sweep = _parse({**top, "configurations": [baseline, *entries]}, source, {0: "baseline", **names}, "speculative")
    return TuneFile(source, sweep, depth_of, base_config, max_batch, raw)


def _settings(raw: dict[str, Any], source: str) -> tuple[dict[str, Any], int]:
    """(speculative_config, max_batch) checked, and the baseline's own keys."""
    base_config = raw.get("speculative_config") or {}
    if not isinstance(base_config, dict):
        raise SweepFileError(source, "speculative_config", "expected a mapping (vLLM's speculative config without "
                             "num_speculative_tokens, e.g. {method: eagle3, model: PATH})")
    max_batch = raw.get("max_batch", DEFAULT_MAX_BATCH)
    if isinstance(max_batch, bool) or not isinstance(max_batch, int) or max_batch < 1:
        raise SweepFileError(source, "max_batch", f"expected a whole number >= 1 (the server's cap on running "
                             f"requests), got {echo(max_batch)}")
    for key in ("name", "baseline"):
        if key in raw["baseline"]:
            raise SweepFileError(source, f"baseline.{key}", "is set by the tune (the baseline is 'baseline')")
    return dict(base_config), max_batch


def parse_depths(text: str, flag: str = "--depths") -> tuple[int, ...]:
    """``--depths 1,2,3``: whole numbers >= 1, each once; raises ValueError naming the flag."""
    try:
        values = [int(part) for part in text.split(",") if part.strip() and part.strip().isascii()]
        if len(values) != len([part for part in text.split(",") if part.strip()]):
            raise ValueError
    except ValueError:
        raise ValueError(f"{flag} {echo(text)}: expected whole numbers separated by commas, e.g. 1,2,3,4,5") from None
    return _checked_depths(values, flag)


def _depths(value: Any, source: str) -> tuple[int, ...]:
    if not isinstance(value, list) or not all(isinstance(v, int) and not isinstance(v, bool) for v in value):
        raise SweepFileError(source, "depths", f"expected a list of whole numbers, e.g. [1, 2, 3, 4, 5], got "
                             f"{echo(value)}")
    try:
        return _checked_depths(value, "depths")
    except ValueError as exc:
        raise SweepFileError(source, "depths", str(exc).removeprefix("depths ")) from None


def _checked_depths(values: list[int], flag: str) -> tuple[int, ...]:
    if not values:
        raise ValueError(f"{flag} {values}: expected at least one depth")
    if any(v < 1 or v > MAX_DEPTH for v in values) or len(set(values)) != len(values):
        raise ValueError(f"{flag} {echo(values)}: each depth once, from 1 to {MAX_DEPTH} (0, speculation off, is the "
                         "baseline)")
    return tuple(sorted(values))


def _templated(spec: dict[str, Any], depths: tuple[int, ...], base: Mapping[str, Any],
               source: str) -> tuple[list[dict[str, Any]], dict[int, str], dict[str, int]]:
    for key in ("name", "baseline", "depth"):
        if key in spec:
            raise SweepFileError(source, f"speculative.{key}", "is set by the tune for each depth (k1, k2, ...)")
    command = spec.get("command")
    if command is None:
        raise SweepFileError(source, "speculative.command", "a tune starts the server once per depth: give a "
                             "command with {k} or {speculative_config}")
    if not any(f"{{{name}}}" in json.dumps(command) for name in DEPTH_FIELDS):
        raise SweepFileError(source, "speculative.command", "must use {k} or {speculative_config}, or every depth "
                             "would launch the same server")
    entries: list[dict[str, Any]] = []
    names: dict[int, str] = {}
    depth_of: dict[str, int] = {}
    for i, depth in enumerate(depths, start=1):
        name = f"k{depth}"
        entries.append(TuneFile._depth_entry(spec, name, depth, speculative_config(base, depth)))
        names[i] = "speculative"  # one template for every depth: its keys are the file's
        depth_of[name] = depth
    return entries, names, depth_of


def _listed(items: list[Any], source: str) -> tuple[list[dict[str, Any]], dict[int, str], dict[str, int]]:
    """``speculative`` as a list: each configuration as the sweep file writes one, with its ``depth``."""
    if not items:
        raise SweepFileError(source, "speculative", "expected at least one configuration")
    entries: list[dict[str, Any]] = []
    names: dict[int, str] = {}
    depth_of: dict[str, int] = {}
    for i, item in enumerate(items):
        where = f"speculative[{i}]"
        if not isinstance(item, dict):
            raise SweepFileError(source, where, "expected a mapping (name, depth, command or url, ...)")
        depth = item.get("depth")
        if isinstance(depth, bool) or not isinstance(depth, int) or not 1 <= depth <= MAX_DEPTH:
            raise SweepFileError(source, f"{where}.depth", f"expected a whole number from 1 to {MAX_DEPTH} (draft "
                                 f"tokens per step), got {echo(depth)}")
        if depth in depth_of.values():
            raise SweepFileError(source, f"{where}.depth", f"depth {depth} is given twice")
        entry = {key: value for key, value in item.items() if key != "depth"}
        entry.setdefault("name", f"k{depth}")
        if isinstance(entry["name"], str) and entry["name"] in RESERVED_NAMES:
            raise SweepFileError(source, f"{where}.name", f"{entry['name']!r} is the tune's own folder (OUT/tuned/: "
                                 "the setting, OUT/validate/: the validation runs); choose another name")
        entries.append(entry)
        names[i + 1] = where
        depth_of[str(entry["name"])] = depth
    return entries, names, depth_of


def _parse(raw: dict[str, Any], source: str, names: Mapping[int, str], rest: str) -> Sweep:
    """parse_sweep, with its ``configurations[i]`` keys named as the tune file names them."""
    try:
        return parse_sweep(raw, source)
    except SweepFileError as exc:
        text = re.sub(r"configurations\[(\d+)\]", lambda m: names.get(int(m.group(1)), rest), str(exc))
        raise SweepFileError(source, "", text.removeprefix(f"{source}: ")) from None


__all__ = ["DEFAULT_DEPTHS", "RESERVED_NAMES", "TUNED_NAME", "TuneFile", "load_tune", "parse_depths", "parse_tune"]

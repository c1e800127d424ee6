"""The one YAML loader for every YAML file the suite reads: sweep files, suite profiles, emulator profiles.

It lives beside the data because it is the one place every reader may import (the emulator stands apart and
imports only the data). On top of PyYAML's safe loader it refuses, each as one ``YamlInputError`` naming the
line (and the key, where there is one):

- every alias (``*name``) and merge key (``<<``): an alias bomb (a few lines whose aliases expand to billions
  of nodes) would hang the reader or an error message that prints the value; no file of the suite needs one,
  so there is no budget to tune, the first alias is refused before anything is expanded;
- a key given twice in one mapping: PyYAML keeps the last silently, so the first one a user edited would do
  nothing;
- a non-finite number (``.inf``, ``.nan``, ``1e999``): every number the suite reads is a finite quantity
  (a timeout, a rate, a cost), and NaN passes every ``<=`` check the wrong way;
- nesting beyond PyYAML's recursion (``[[[[...``), which would otherwise end in a RecursionError.
"""

from __future__ import annotations

import math
from typing import Any

import yaml
from yaml.events import AliasEvent
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

__all__ = ["YamlInputError", "load_yaml"]

_FLOAT = "tag:yaml.org,2002:float"
_INT = "tag:yaml.org,2002:int"
_MERGE = "tag:yaml.org,2002:merge"
_MAX_NUMBER_CHARS = 100  # no setting needs more digits; Python's int() refuses beyond 4300 with a ValueError


class YamlInputError(ValueError):
    """The text cannot be used; ``line`` (1-based, or None), ``key`` (a dotted path, or "") and ``problem``."""

    def __init__(self, line: int | None, key: str, problem: str) -> None:
        self.line, self.key, self.problem = line, key, problem
        where = " ".join(part for part in (f"line {line}:" if line else "", f"key '{key}':" if key else "") if part)
        super().__init__(f"{where} {problem}" if where else problem)


class _Loader(yaml.SafeLoader):
    """PyYAML's safe loader that stops at the first alias, before anything is expanded."""

    def compose_node(self, parent: Node | None, index: Any) -> Node | None:
        if self.check_event(AliasEvent):
            mark = self.peek_event().start_mark
            raise YamlInputError(mark.line + 1, "", "aliases (*name) are not accepted: write the value out "
                                 "(an alias can expand a few lines into billions of values)")
        return super().compose_node(parent, index)


def load_yaml(text: str) -> Any:
    """``text`` parsed like ``yaml.safe_load``, or ``YamlInputError`` (also for YAML that does not parse)."""
    loader = _Loader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        _check(loader, node, "")
        return loader.construct_document(node)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        problem = getattr(exc, "problem", None)
        raise YamlInputError(mark.line + 1 if mark is not None else None, "",
                             f"invalid YAML ({problem})" if problem else "invalid YAML") from None
    except RecursionError:
        raise YamlInputError(None, "", "invalid YAML (nested too deeply)") from None
    finally:
        loader.dispose()


def _check(loader: _Loader, node: Node, path: str) -> None:
    """Refuse merge keys, duplicate keys and non-finite numbers anywhere under ``node``."""
    if isinstance(node, MappingNode):
        seen: dict[Any, int] = {}
        for key_node, value_node in node.value:
            line = key_node.start_mark.line + 1
            if key_node.tag == _MERGE:
                raise YamlInputError(line, path, "merge keys (<<) are not accepted: write the keys out")
            if isinstance(key_node, ScalarNode):
                key = _scalar(loader, key_node, path)
                child = f"{path}.{key}" if path else str(key)
                if key in seen:
                    raise YamlInputError(line, child, f"given twice (first at line {seen[key]}); give each key once")
                seen[key] = line
            else:  # a collection as a key: PyYAML refuses it when constructing, naming its line
                child = path
            _check(loader, value_node, child)
    elif isinstance(node, SequenceNode):
        for i, item in enumerate(node.value):
            _check(loader, item, f"{path}[{i}]")
    elif isinstance(node, ScalarNode):
        _scalar(loader, node, path)


def _scalar(loader: _Loader, node: ScalarNode, path: str) -> Any:
    """The scalar's value, refusing a number that is not finite or too long to be one anyone means."""
    line = node.start_mark.line + 1
    if node.tag in (_INT, _FLOAT) and len(node.value) > _MAX_NUMBER_CHARS:
        raise YamlInputError(line, path, f"a number of {len(node.value)} characters (at most "
                             f"{_MAX_NUMBER_CHARS}): expected a finite number")
    value = loader.construct_object(node)
    if node.tag == _FLOAT and isinstance(value, float) and not math.isfinite(value):
        raise YamlInputError(line, path, f"{node.value[:20]} is not a finite number (NaN and infinities "
                             "are refused: expected a finite number)")
    return value

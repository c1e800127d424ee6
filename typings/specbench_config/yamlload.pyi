# The stub of config/yamlload.py under its installed name (see __init__.pyi). Keep in step.
from typing import Any

__all__ = ["YamlInputError", "load_yaml"]

class YamlInputError(ValueError):
    line: int | None
    key: str
    problem: str
    def __init__(self, line: int | None, key: str, problem: str) -> None: ...

def load_yaml(text: str) -> Any: ...

"""The sweep file: named server configurations, one of them the baseline, read and checked before any load.

Every mistake is one ``SweepFileError`` line naming the file and the key (``configurations[2].command``), so
the CLI prints it and exits 2 instead of failing half-way through an hour of runs. The format is documented
in docs/guides/sweeps.md and shown in ``config/sweep/example.yaml``.
"""

from __future__ import annotations

import math
import re
import string
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from specbench.config.yamlload import YamlInputError, load_yaml
from specbench.contract.gpu_metrics import parse_exporter_urls
from specbench.contract.urls import UrlError, check_url

NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+-]{0,63}$")
RESERVED = {"pairs", "servers"}  # directories of the report itself
TOP_KEYS = {"params", "ready_timeout_s", "stop_timeout_s", "configurations"}
ENTRY_KEYS = {"name", "baseline", "url", "command", "params", "ready", "stop_timeout_s", "env", "gpu_metrics"}
READY_KEYS = {"url", "timeout_s", "interval_s"}
BUILTIN_PARAMS = ("name", "port")
LOOPBACK_NAMES = {"localhost", "::1"}  # and 127.0.0.0/8


class SweepFileError(ValueError):
    """The sweep file cannot be used; the message is one line naming the file and the key."""

    def __init__(self, source: str, key: str, problem: str) -> None:
        super().__init__(f"{source}: key '{key}': {problem}" if key else f"{source}: {problem}")


@dataclass(frozen=True)
class Ready:
    url: str  # template, filled like the command
    timeout_s: float
    interval_s: float = 0.5


@dataclass(frozen=True)
class Entry:
    """One server configuration: an existing ``url``, or a ``command`` that starts it (templates)."""

    name: str
    baseline: bool
    url: str
    command: str | tuple[str, ...] | None
    params: Mapping[str, str]
    ready: Ready
    stop_timeout_s: float
    env: Mapping[str, str] = field(default_factory=dict)
    gpu_metrics: str | None = None  # this server's DCGM exporters, URL[,URL...] (template), as --gpu-metrics (#40)

    @property
    def managed(self) -> bool:
        """True when the sweep starts and stops this server itself."""
        return self.command is not None

    @property
    def needs_port(self) -> bool:
        """True when a template uses ``{port}`` and the entry does not fix it."""
        texts = [self.url, self.ready.url, *(self.command if isinstance(self.command, tuple) else
                                             [self.command or ""])]
        return "port" not in self.params and any("port" in _fields(t) for t in texts)

    def fill(self, template: str, port: int | None) -> str:
        values = {"name": self.name, **self.params}
        if port is not None and "port" not in self.params:
            values["port"] = str(port)
        return template.format_map(values)

    def server_url(self, port: int | None, flag: str) -> str:
        """``url`` filled and checked as ``--host`` is (``check_filled_url``); raises UrlError naming ``flag``."""
        return check_filled_url(self.fill(self.url, port), flag, own_port=self.needs_port and "port" in
                                _fields(self.url))

    def ready_url(self, port: int | None, flag: str) -> str:
        """``ready.url`` filled and checked: any path, but the scheme, host and port of a server URL."""
        return check_filled_url(self.fill(self.ready.url, port), flag, own_port=self.needs_port and "port" in
                                _fields(self.ready.url), base=False)

    def command_line(self, port: int | None) -> str | list[str] | None:
        if self.command is None:
            return None
        if isinstance(self.command, str):
            return self.fill(self.command, port)
        return [self.fill(part, port) for part in self.command]


@dataclass(frozen=True)
class Sweep:
    source: str
    entries: tuple[Entry, ...]  # the baseline first, then the others in file order

    @property
    def baseline(self) -> Entry:
        return self.entries[0]


def check_filled_url(url: str, flag: str, *, own_port: bool, base: bool = True) -> str:
    """A URL filled from the sweep's params, checked like ``--host`` before any use (a param can hold anything):
    http(s), a host, a port, no query, no /v1 suffix (``base``; a readiness URL keeps its path). ``own_port``:
    the URL uses the ``{port}`` the sweep picked free on 127.0.0.1, so its host must be this machine's loopback,
    or the load would go to whatever listens on that number elsewhere."""
    try:
        parts = urlsplit(url.strip())
    except ValueError:  # a broken [IPv6] host: check_url says so in its words
        parts = None
    checked = check_url(url if base or parts is None else urlunsplit(parts._replace(path="")), flag)
    assert parts is not None  # check_url refused what urlsplit cannot split
    host = (parts.hostname or "").lower()
    if own_port and host not in LOOPBACK_NAMES and not host.startswith("127."):
        raise UrlError(f"{flag}: {{port}} is a free port on this machine's loopback, so the URL must name "
                       f"127.0.0.1, localhost or ::1, got host {host[:100]!r}")
    return checked if base else url.strip()


def _fields(template: str) -> set[str]:
    return {f for _, f, _, _ in string.Formatter().parse(template) if f is not None}


def _scalar_map(value: Any, source: str, key: str) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise SweepFileError(source, key, f"expected a mapping of names to values, got {type(value).__name__}")
    out = {}
    for k, v in value.items():
        if not isinstance(k, str) or not re.match(r"^[A-Za-z_][A-Za-z0-9_]*$", k):
            raise SweepFileError(source, f"{key}.{k}", "parameter names are letters, digits and _")
        if isinstance(v, (dict, list)) or v is None:
            raise SweepFileError(source, f"{key}.{k}", f"expected a string or number, got {v!r}")
        out[k] = str(v).lower() if isinstance(v, bool) else str(v)
    return out


def _number(raw: dict[str, Any], key: str, default: float, source: str, where: str) -> float:
    value = raw.get(key, default)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
        raise SweepFileError(source, f"{where}{key}", f"expected a positive, finite number of seconds, got {value!r}")
    return float(value)


def _unknown(raw: dict[str, Any], allowed: set[str], source: str, where: str) -> None:
    extra = sorted(set(map(str, raw)) - allowed)
    if extra:
        expected = ", ".join(sorted(allowed))
        raise SweepFileError(source, f"{where}{extra[0]}", f"unknown key (expected one of: {expected})")


def _template(value: Any, source: str, key: str, known: set[str]) -> str:
    if not isinstance(value, str) or not value.strip():
        raise SweepFileError(source, key, f"expected a non-empty string, got {value!r}")
    try:
        names = _fields(value)
    except ValueError as exc:
        raise SweepFileError(source, key, f"bad {{placeholder}} ({exc})") from None
    for name in sorted(names):
        if name not in known:
            raise SweepFileError(source, key, f"unknown parameter {{{name}}} (known: {', '.join(sorted(known))})")
    for _, field_name, spec, conversion in string.Formatter().parse(value):
        if spec or conversion:  # {name:>300000000} would fill a 300 MB command line; a value is used as it is
            shown = ("!" + conversion if conversion else "") + (":" + spec if spec else "")
            raise SweepFileError(source, key, f"placeholder {{{field_name}}} has a format spec or conversion "
                                 f"({shown[:40]!r}): write {{{field_name}}} alone, with any padding in the value")
    return value


def load_sweep(path: str | Path) -> Sweep:
    """Read and check a sweep file; raises ``SweepFileError`` with one line naming the key."""
    source = str(path)
    try:
        raw = load_yaml(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise SweepFileError(source, "", f"cannot read the file ({exc.strerror})") from None
    except UnicodeDecodeError:
        raise SweepFileError(source, "", "cannot read the file (not UTF-8 text)") from None
    except YamlInputError as exc:
        raise SweepFileError(source, "", str(exc)) from None
    return parse_sweep(raw, source)


def parse_sweep(raw: Any, source: str = "<sweep>") -> Sweep:
    """Check a parsed sweep mapping (see ``load_sweep``)."""
    if not isinstance(raw, dict):
        raise SweepFileError(source, "", "the top level must be a mapping with a 'configurations' list")
    _unknown(raw, TOP_KEYS, source, "")
    shared = _scalar_map(raw.get("params"), source, "params")
    ready_default = _number(raw, "ready_timeout_s", 600.0, source, "")
    stop_default = _number(raw, "stop_timeout_s", 30.0, source, "")
    items = raw.get("configurations")
    if not isinstance(items, list) or len(items) < 2:
        raise SweepFileError(source, "configurations", "expected a list of at least two configurations "
                             "(a baseline and one to compare)")
    entries = [_entry(item, i, source, shared, ready_default, stop_default) for i, item in enumerate(items)]
    names = [e.name for e in entries]
    for i, name in enumerate(names):
        if name in names[:i]:
            raise SweepFileError(source, f"configurations[{i}].name", f"'{name}' is used twice; names must be unique")
    baselines = [i for i, e in enumerate(entries) if e.baseline]
    if len(baselines) != 1:
        where = f"configurations[{baselines[1]}].baseline" if baselines else "configurations"
        raise SweepFileError(source, where, "exactly one configuration must be marked 'baseline: true'")
    base = entries[baselines[0]]
    return Sweep(source, (base, *(e for e in entries if not e.baseline)))


def _entry(item: Any, i: int, source: str, shared: dict[str, str], ready_default: float,
           stop_default: float) -> Entry:
    where = f"configurations[{i}]."
    if not isinstance(item, dict):
        raise SweepFileError(source, f"configurations[{i}]", "expected a mapping (name, url or command, ...)")
    _unknown(item, ENTRY_KEYS, source, where)
    name = _name(item.get("name"), source, where)
    baseline = item.get("baseline", False)
    if not isinstance(baseline, bool):
        raise SweepFileError(source, where + "baseline", f"expected true or false, got {baseline!r}")
    params = {**shared, **_scalar_map(item.get("params"), source, where + "params")}
    known = set(params) | set(BUILTIN_PARAMS)
    if item.get("command") is None and item.get("url") is None:
        raise SweepFileError(source, where + "url", "give the server's url, or a command that starts it")
    command = _command(item.get("command"), source, where, known)
    url = _template(item.get("url", "http://127.0.0.1:{port}"), source, where + "url", known)
    if not re.match(r"^https?://", url):
        raise SweepFileError(source, where + "url", f"expected an http:// or https:// URL, got {url!r}")
    ready = _ready(item.get("ready") or {}, url, source, where, known, ready_default)
    env = _scalar_map(item.get("env"), source, where + "env")
    gpu_metrics = _exporters(item.get("gpu_metrics"), source, where + "gpu_metrics", known,
                             {"name": name, "port": "1", **params})
    entry = Entry(name, baseline, url, command, params, ready,
                  _number(item, "stop_timeout_s", stop_default, source, where), env, gpu_metrics)
    probe_port = 1 if entry.needs_port else None  # a stand-in: the real one is any free port, checked again
    for key, check in ((where + "url", entry.server_url), (where + "ready.url", entry.ready_url)):
        try:
            check(probe_port, key)
        except UrlError as exc:
            raise SweepFileError(source, key, str(exc).removeprefix(key + ": ")) from None
    return entry


def _exporters(value: Any, source: str, key: str, known: set[str], probe: dict[str, str]) -> str | None:
    """The entry's exporter URLs (a template, or a list of them joined by commas), checked as --gpu-metrics
    checks its value once the placeholders are filled (``probe``: stand-in values)."""
    if value is None:
        return None
    if isinstance(value, list) and value and all(isinstance(v, str) for v in value):
        value = ",".join(value)
    template = _template(value, source, key, known)
    try:
        urls = parse_exporter_urls(template.format_map(probe), key)
    except UrlError as exc:
        raise SweepFileError(source, key, str(exc).removeprefix(key + ": ")) from None
    if not urls:
        raise SweepFileError(source, key, f"expected URL[,URL...] of DCGM exporters, got {value!r}")
    return template


def _name(name: Any, source: str, where: str) -> str:
    if isinstance(name, bool):
        raise SweepFileError(source, where + "name", f"got {name!r}: YAML reads off/on/no/yes as booleans, so "
                             "quote the name ('off')")
    if isinstance(name, (int, float)):
        name = str(name)
    if not isinstance(name, str) or not NAME_RE.match(name) or name in RESERVED:
        raise SweepFileError(source, where + "name", f"expected a name of letters, digits and . _ + - "
                             f"(at most 64, not {' or '.join(sorted(RESERVED))}), got {name!r}")
    return name


def _command(command: Any, source: str, where: str, known: set[str]) -> str | tuple[str, ...] | None:
    if command is None:
        return None
    if not isinstance(command, list):
        return _template(command, source, where + "command", known)
    if not command:
        raise SweepFileError(source, where + "command", "expected a non-empty list or string")
    return tuple(_template(str(p) if isinstance(p, (int, float)) else p, source, f"{where}command[{j}]", known)
                 for j, p in enumerate(command))


def _ready(raw: Any, url: str, source: str, where: str, known: set[str], default_timeout: float) -> Ready:
    if not isinstance(raw, dict):
        raise SweepFileError(source, where + "ready", "expected a mapping (url, timeout_s, interval_s)")
    _unknown(raw, READY_KEYS, source, where + "ready.")
    ready_url = _template(raw.get("url", url.rstrip("/") + "/health"), source, where + "ready.url", known)
    return Ready(ready_url, _number(raw, "timeout_s", default_timeout, source, where + "ready."),
                 _number(raw, "interval_s", 0.5, source, where + "ready."))

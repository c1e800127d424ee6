"""Every option of a ``specbench`` command checked before preflight and before any directory is made.

The Locust child checks them again (it also runs alone); checking here first means a typo costs no server
round trip and leaves no empty run directory behind.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from contract.redact import redact, register_key_env
from contract.settings import SettingsError, SuiteSettings, add_arguments, apply_profile, check_api_key_env
from contract.urls import UrlError, check_url


class InputError(Exception):
    """A bad command line or profile; the message is one line naming the flag, file or key."""


class _Parser(argparse.ArgumentParser):
    def add_argument(self, *args: Any, include_in_web_ui: bool = True, **kwargs: Any) -> Any:  # Locust's extra
        return super().add_argument(*args, **kwargs)

    def error(self, message: str) -> Any:  # one line, no usage block
        raise InputError(message)


def check_load_options(options: list[str], suite_config: str | None, api_key_env: str) -> None:
    """Parse the options a Locust child would get and validate them as it would (profile errors name the file)."""
    register_key_env(api_key_env)
    try:
        check_api_key_env(api_key_env)
        parser = _Parser(add_help=False)
        add_arguments(parser)
        args = [*options, *(["--suite-config", suite_config] if suite_config else [])]
        parsed, _unknown = parser.parse_known_args(args)
        apply_profile(parsed, args)
        SuiteSettings.from_options(parsed)
    except SettingsError as exc:
        raise InputError(str(exc)) from None


def check_host(url: str, flag: str) -> str:
    try:
        return check_url(url, flag)
    except UrlError as exc:
        raise InputError(str(exc)) from None


def check_fresh_dir(path: Path, flag: str, overwrite: bool, marker: str | None = None) -> None:
    """Refuse to write into a non-empty directory (or over ``marker`` in it) unless ``overwrite``."""
    if overwrite or not path.exists():
        return
    if not path.is_dir():
        raise InputError(f"{flag}: {redact(str(path))} exists and is not a directory")
    taken = (path / marker).exists() if marker else any(path.iterdir())
    if taken:
        what = f"already holds {marker}" if marker else "is not empty (it holds an earlier run?)"
        raise InputError(f"{flag}: {redact(str(path))} {what}; choose a new directory or give --overwrite")

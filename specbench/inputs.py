"""Every option of a ``specbench`` command checked before preflight and before any directory is made.

The Locust child checks them again (it also runs alone); checking here first means a typo costs no server
round trip and leaves no empty run directory behind.
"""

from __future__ import annotations

import argparse
import json
import os
import stat
import subprocess
import sys
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from specbench.contract.limits import LimitError, check_limit, check_processes
from specbench.contract.redact import redact
from specbench.contract.settings import SettingsError, SuiteSettings, add_arguments, apply_profile
from specbench.contract.urls import UrlError, check_url, has_credentials
from specbench.terminal import did_you_mean


class InputError(Exception):
    """A bad command line or profile; the message is one line naming the flag, file or key."""


class _Parser(argparse.ArgumentParser):
    def add_argument(self, *args: Any, include_in_web_ui: bool = True, **kwargs: Any) -> Any:  # Locust's extra
        return super().add_argument(*args, **kwargs)

    def error(self, message: str) -> Any:  # one line, no usage block
        raise InputError(message)


_LOCUST_CHECK = """import json, sys
from locust.argument_parser import get_empty_argument_parser, setup_parser_arguments
parser = get_empty_argument_parser(add_help=False)
setup_parser_arguments(parser)
print(json.dumps([parser.parse_known_args(json.loads(sys.argv[1]))[1], list(parser._option_string_actions)]))
"""


def check_locust_flags(args: list[str], known: Iterable[str] = ()) -> None:
    """Flags the suite does not define must be Locust's own, with values Locust accepts; a mistyped one is named
    with the closest of Locust's flags and ``known`` (the suite's and the command's), as plain Locust does.

    Asked of Locust in a short child process: importing Locust here would monkey-patch this process with gevent.
    Only paid when such flags are given.
    """
    proc = subprocess.run([sys.executable, "-c", _LOCUST_CHECK, json.dumps(args)], capture_output=True,
                          text=True, timeout=60, stdin=subprocess.DEVNULL)
    if proc.returncode != 0:
        lines = [ln.replace("-c: error: ", "") for ln in proc.stderr.splitlines() if ln.strip()]
        raise InputError(f"Locust option: {lines[-1] if lines else f'exit code {proc.returncode}'}")
    unknown, locust_flags = json.loads(proc.stdout.strip().splitlines()[-1])
    if unknown:
        hint = did_you_mean(unknown[0], [*locust_flags, *known])
        raise InputError(f"unknown option {unknown[0]!r}{': ' + hint if hint else ''} (not a specbench or Locust "
                         "option; see specbench options)")


def check_load_options(options: list[str], processes: int = 0, own_flags: Iterable[str] = ()) -> SuiteSettings:
    """Parse the options a Locust child would get and validate them as it would (profile errors name the file).

    Unknown flags, limits, the key's variable, the prompt set and the prompt id are all checked here, once per
    command, before any network or file action, so a typo costs no server round trip and leaves no run
    directory behind. The settings returned are the child's: read the key from them. ``own_flags``: the
    command's own flags, offered with the suite's and Locust's for a mistyped one.
    """
    try:
        check_processes(processes)
        parser = _Parser(add_help=False)
        add_arguments(parser)
        parsed, unknown = parser.parse_known_args(options)
        if unknown:
            check_locust_flags(unknown, [*parser._option_string_actions, *own_flags])
        if processes:
            parsed.processes, parsed.master, parsed.expect_workers = processes, True, processes
        apply_profile(parsed, options)
        settings = SuiteSettings.from_options(parsed)
    except (SettingsError, LimitError) as exc:
        raise InputError(str(exc)) from None
    check_prompts(settings)
    return settings


def check_prompts(settings: SuiteSettings) -> None:
    """The prompt set loads and the fixed prompt id is in it (what the Locust child would find out later)."""
    from specbench.locustfiles.prompts import PromptError, PromptOrder, load_prompts

    try:
        prompt_set = load_prompts(settings.prompts)
    except PromptError as exc:
        raise InputError(f"--prompts: {exc}") from None
    try:
        PromptOrder(prompt_set, seed=settings.seed,
                    mode=settings.prompt_mode,  # type: ignore[arg-type]  # a str, held to --prompt-mode's choices
                    fixed_id=settings.prompt_id or None)
    except PromptError as exc:
        raise InputError(f"--prompt-id: {exc}") from None


def check_speed(speed: float, flag: str = "--speed") -> None:
    """The built-in emulator's time scale: positive and finite (see contract.limits)."""
    try:
        check_limit("emulator_speed", speed, flag)
    except LimitError as exc:
        raise InputError(str(exc)) from None


def check_key_and_url(url: str, flag: str, api_key_env: str) -> None:
    """A URL with user:password@ and an API key together: the client would send Basic auth, not the key."""
    if api_key_env and has_credentials(url):
        raise InputError(f"{flag}: the URL carries credentials (user:pass@) and an API key is set "
                         "(--api-key-env); requests would send the URL's Basic auth instead of the key: "
                         "give one of the two")


def check_host(url: str, flag: str) -> str:
    try:
        return check_url(url, flag)
    except UrlError as exc:
        raise InputError(str(exc)) from None


def check_creatable(path: Path, flag: str) -> None:
    """Refuse, before any server is asked, a directory that cannot be made: a symbolic link loop, a path under a
    file, a file system that takes no directories (/proc, /sys) or no permission. The nearest existing
    ancestor is tried for real (a directory made and removed there), so what the kernel refuses is found now."""
    shown = redact(str(path))
    if path.is_symlink() and _dangling(path):  # mkdir would meet the link itself: "File exists"
        raise InputError(f"{flag}: {shown} is a symbolic link to {redact(os.readlink(path))}, which does not exist")
    probe = path
    while True:
        try:
            st = os.stat(probe)
        except FileNotFoundError:
            if probe.parent == probe:
                return
            probe = probe.parent
            continue
        except OSError as exc:  # ELOOP, ENAMETOOLONG, EACCES on a parent
            raise InputError(f"{flag}: {shown}: {exc.strerror or exc}") from None
        break
    if not stat.S_ISDIR(st.st_mode):
        where = "" if probe == path else f" ({redact(str(probe))} is a file)"
        raise InputError(f"{flag}: {shown} cannot be a directory{where}")
    try:  # in an existing directory too: check_fresh_dir judges its content, this whether it takes files
        tempfile.TemporaryDirectory(dir=probe, prefix=".specbench-probe-").cleanup()
    except OSError as exc:
        if probe == path:
            raise InputError(f"{flag}: {shown} is not writable ({exc.strerror or exc})") from None
        raise InputError(f"{flag}: cannot create {shown} in {redact(str(probe))}: {exc.strerror or exc}") from None


def _dangling(link: Path) -> bool:
    """The link's target is missing (a loop or a refused parent is named by the caller's own check)."""
    try:
        os.stat(link)
    except FileNotFoundError:
        return True
    except OSError:
        return False
    return False


def check_fresh_dir(path: Path, flag: str, overwrite: bool, marker: str | None = None) -> None:
    """Refuse a directory that cannot be made (``check_creatable``), and one that holds something (or
    ``marker``) unless ``overwrite``."""
    check_creatable(path, flag)
    if overwrite or not path.exists():
        return
    if not path.is_dir():
        raise InputError(f"{flag}: {redact(str(path))} exists and is not a directory")
    taken = (path / marker).exists() if marker else any(path.iterdir())
    if taken:
        what = f"already holds {marker}" if marker else "is not empty (it holds an earlier run?)"
        raise InputError(f"{flag}: {redact(str(path))} {what}; choose a new directory or give --overwrite")

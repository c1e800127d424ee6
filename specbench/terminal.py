"""What ``specbench`` does with its own terminal: one-line usage errors, a closed pipe, stdout kept for JSON.

Why a module: argparse's own ``error`` prints the whole usage block (11 lines for ``--api grpc``) where every
other mistake is one line; ``specbench report --json RUN | head -1`` closed the pipe under a print and Python
printed two BrokenPipeError tracebacks; ``--json`` puts one document on stdout, so everything else (the
preflight lines, the Locust children's step lines) must go to stderr.
"""

from __future__ import annotations

import argparse
import contextlib
import difflib
import os
import sys
from collections.abc import Iterable, Iterator
from typing import NoReturn

#: the exit status of a command whose reader closed its stdout (128 + SIGPIPE, as a shell reports it)
EXIT_BROKEN_PIPE = 141


class OneLineParser(argparse.ArgumentParser):
    """An argparse parser whose errors are one line naming the command, as every other specbench mistake is."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def did_you_mean(flag: str, known: Iterable[str]) -> str:
    """``did you mean --ladder?`` for a mistyped ``--lader`` (``--lader=1,2`` too), or '' when none is close."""
    name = flag.split("=", 1)[0]
    close = difflib.get_close_matches(name, sorted({k for k in known if k.startswith("--")}), n=1, cutoff=0.75)
    return f"did you mean {close[0]}?" if close else ""


def closed_pipe() -> int:
    """After a BrokenPipeError: stdout goes nowhere from now on, so the interpreter's own flush at exit cannot
    raise a second one, and the command ends quietly (as ``cat`` does under ``head``)."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    with contextlib.suppress(OSError):
        os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)
    return EXIT_BROKEN_PIPE


@contextlib.contextmanager
def stdout_on_stderr(active: bool = True) -> Iterator[None]:
    """While active, whatever this process and its children write to stdout (file descriptor 1) goes to stderr,
    so that stdout can carry one JSON document written after the block."""
    if not active:
        yield
        return
    sys.stdout.flush()
    saved = os.dup(1)
    os.dup2(2, 1)
    try:
        yield
    finally:
        sys.stdout.flush()
        os.dup2(saved, 1)
        os.close(saved)

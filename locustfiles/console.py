"""What a run prints on the terminal, set up once Locust has configured its logging (``--console``).

``locust``: Locust's own output, untouched (the default of plain ``locust -f``). ``progress``: the suite's own
lines (one per step, the plan, warnings) and errors only; Locust's log lines and statistics tables go to
``--logfile`` alone (``specbench`` commands pass ``RUN_DIR/locust.log``). ``all``: everything on the terminal,
as Locust prints it, and in ``--logfile`` too (``specbench --verbose``). In every mode Locust's warning about
spawn rates above 100 is explained once and then silenced: the ladder starts a level's new users at once on
purpose, so the warning would repeat at every high step and mean nothing.
"""

from __future__ import annotations

import logging
import sys

from specbench.contract.redact import RedactingFilter

SUITE_LOGGER = "specbench"
STATS_LOGGER = "locust.stats_logger"  # Locust's tables (plain text, no prefix)
LOCUST_FORMAT = "[%(asctime)s] %(name)s/%(levelname)s: %(message)s"
SPAWN_WARNING = "Your selected spawn rate is very high"
SPAWN_EXPLAINED = ("Locust's warning about spawn rates above 100 is silenced for this run: the ladder starts "
                   "each level's new users at once on purpose (rate = users added), which is what it measures")
_MARK = "_specbench_console"  # set on handlers this module added, so a second install adds none


class SpawnRateFilter(logging.Filter):
    """Turns Locust's first spawn-rate warning into one explanation at INFO, and drops the later ones."""

    def __init__(self) -> None:
        super().__init__()
        self.explained = False

    def filter(self, record: logging.LogRecord) -> bool:
        if not str(record.msg).startswith(SPAWN_WARNING):
            return True
        if self.explained:
            return False
        self.explained = True
        record.msg, record.args = SPAWN_EXPLAINED, None
        record.levelno, record.levelname = logging.INFO, "INFO"
        return True


def silence_spawn_warning() -> None:
    """Attach the filter to the logger Locust's runners warn on (once per process)."""
    runners = logging.getLogger("locust.runners")
    if not any(isinstance(f, SpawnRateFilter) for f in runners.filters):
        runners.addFilter(SpawnRateFilter())


def quiet_logging_errors() -> None:
    """A log line a handler cannot write (the log file's disk full: ENOSPC) is dropped without a word.

    Why: Python's default prints "--- Logging error ---" and a traceback on stderr for every such line; a run on
    a full disk printed five of them (Locust's closing tables) around the one line that names the disk
    (``recorder``'s write error, which stops the run and sets its exit code). That line says all a user needs;
    the log file on the same disk cannot be written anyway."""
    logging.raiseExceptions = False


def _handler(handler: logging.Handler, fmt: str, level: int = logging.NOTSET) -> logging.Handler:
    handler.setFormatter(logging.Formatter(fmt))
    handler.setLevel(level)
    handler.addFilter(RedactingFilter())
    setattr(handler, _MARK, True)
    return handler


def _is_terminal(handler: logging.Handler) -> bool:
    """A handler writing to stderr or stdout (a FileHandler is a StreamHandler too, but not the terminal)."""
    return isinstance(handler, logging.StreamHandler) and not isinstance(handler, logging.FileHandler)


def _ours(logger: logging.Logger) -> bool:
    return any(getattr(h, _MARK, False) for h in logger.handlers)


def install_console(mode: str, logfile: str | None) -> None:
    """Route Locust's and the suite's output for ``mode`` (see the module docstring); ``locust`` changes nothing
    but the two process-wide settings below."""
    silence_spawn_warning()
    quiet_logging_errors()
    if mode == "locust":
        return
    root, locust_log, stats = logging.getLogger(), logging.getLogger("locust"), logging.getLogger(STATS_LOGGER)
    suite = logging.getLogger(SUITE_LOGGER)
    if _ours(stats) or _ours(suite) or _ours(root):
        return
    if logfile:  # Locust sends its tables to the terminal even with --logfile: keep them in the file too
        stats.addHandler(_handler(logging.FileHandler(logfile, encoding="utf-8"), "%(message)s"))
    if mode == "progress":
        for logger in (root, locust_log, stats):
            for handler in [h for h in logger.handlers if _is_terminal(h)]:
                logger.removeHandler(handler)
        # errors still reach the terminal (a crash must not hide in the log file); the suite's lines all do
        for logger in (root, locust_log):
            logger.addHandler(_handler(logging.StreamHandler(sys.stderr), LOCUST_FORMAT, logging.ERROR))
        console = _handler(logging.StreamHandler(sys.stderr), "%(message)s", logging.INFO)
        console.addFilter(_ConsoleLines())
        suite.addHandler(console)
        return
    for logger in (root, locust_log):  # all: with --logfile Locust writes only the file; the terminal too
        if not any(_is_terminal(h) for h in logger.handlers):
            logger.addHandler(_handler(logging.StreamHandler(sys.stderr), LOCUST_FORMAT))


class _ConsoleLines(logging.Filter):
    """The suite's terminal lines: INFO and WARNING, less those logged with ``shapes.live.LOG_ONLY``.

    The suite's errors also reach root's error handler; this one skips them so they are printed once.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        return record.levelno < logging.ERROR and getattr(record, "console", True)


"""Guards around a run: where an API key may go, which run directory may be written, when a run failed.

Small checks the hooks call at start and end; each refusal is one line naming the flag to change.
"""

from __future__ import annotations

import copy
import os
from pathlib import Path
from typing import Any

from specbench.contract.redact import redact
from specbench.contract.rundir import RunDir
from specbench.contract.settings import OPTIONS, SettingsError, SuiteSettings
from specbench.locustfiles.webguard import install_origin_guard, unshown_fields

EXIT_TOO_MANY_ERRORS = 3
HOST_CHANGE_REFUSED = ("the host differs from the one given at start while an API key is in use; the key "
                       "is sent only to the host named on the command line (restart with that --host, or "
                       "give --allow-host-change)")
FIELDS_REFUSED = ("the start form has field(s) the web UI does not show: {}; give them on the command line "
                  "(the form takes only what the UI shows)")
SUITE_DESTS = frozenset(opt.dest for opt in OPTIONS)


def _same_host(a: str, b: str) -> bool:
    return a.strip().rstrip("/") == b.strip().rstrip("/")


def _key_in_use(options: Any) -> bool:
    name = str(getattr(options, "api_key_env", "") or "")
    return bool(name and os.environ.get(name))


def host_allowed(start_host: str, host: str, options: Any) -> bool:
    """May a request carrying the API key go to ``host``?"""
    return _same_host(start_host, host) or bool(getattr(options, "allow_host_change", False))


def guard_web_ui(web_ui: Any, start_host: str, options: Any) -> None:
    """Every guard of the web UI: only its own page (``webguard``), the key's host, the Start form's values."""
    install_origin_guard(web_ui, str(getattr(options, "web_base_path", "") or "").rstrip("/"))
    guard_host_change(web_ui.app, start_host, options)
    guard_start_form(web_ui.app, options)


def guard_host_change(app: Any, start_host: str, options: Any) -> None:
    """Refuse, in the web UI's start form, a new host while an API key is in use (HTTP 403, nothing started).

    The key in use is the form's: a form naming a key variable the command line did not was let through, and
    the run stopped only at its start, after the UI had answered success."""
    from flask import jsonify, request

    @app.before_request
    def _refuse_new_host() -> Any:
        if request.method != "POST" or not request.path.rstrip("/").endswith("/swarm"):
            return None
        host = request.form.get("host", "")
        if not host or host_allowed(start_host, host, options):
            return None
        try:
            key = _key_in_use(trial_options(options, request.form))
        except ValueError:  # a bad value in the form: the key is the command line's, the value guard_start_form's
            key = _key_in_use(options)
        if key:
            return jsonify({"success": False, "message": HOST_CHANGE_REFUSED, "host": start_host}), 403
        return None


def trial_options(options: Any, form: Any) -> Any:
    """A copy of ``options`` with the start form's values applied as Locust would apply them."""
    trial = copy.copy(options)
    values = vars(trial)
    for key, value in form.items():
        if key == "user_count":
            trial.num_users = int(value)
        elif key in SUITE_DESTS and key in values:
            current = values[key]
            values[key] = (value == "true") if isinstance(current, bool) else type(current)(value)
    return trial


def check_start_form(options: Any, form: Any) -> str | None:
    """Why a Start with this form would fail (one line), or None: checked before Locust takes the values."""
    from specbench.locustfiles.prompts import PromptError, PromptOrder, load_prompts

    try:
        settings = SuiteSettings.from_options(trial_options(options, form))
        PromptOrder(load_prompts(settings.prompts), seed=settings.seed,
                    mode=settings.prompt_mode,  # type: ignore[arg-type]  # a str, held to --prompt-mode's choices
                    fixed_id=settings.prompt_id or None)
    except ValueError as exc:  # SettingsError, PromptError and a form value of the wrong type
        return redact(str(exc) if isinstance(exc, SettingsError | PromptError) else f"bad form value ({exc})")
    return None


def guard_start_form(app: Any, options: Any) -> None:
    """Refuse a Start whose form would fail the run, or has a field the UI does not show (HTTP 400, nothing
    started, the UI stays up): Locust applies any field named as an option (``out``, ``overwrite``,
    ``json_file``), which only a page other than the UI's would send."""
    from flask import jsonify, request

    @app.before_request
    def _refuse_bad_form() -> Any:
        if request.method != "POST" or not request.path.rstrip("/").endswith("/swarm"):
            return None
        unshown = unshown_fields(request.form)
        why = (FIELDS_REFUSED.format(", ".join(unshown)) if unshown else check_start_form(options, request.form))
        if why is None:
            return None
        return jsonify({"success": False, "message": why, "host": getattr(options, "host", None)}), 400


def claim_run_dir(run_dir: Path, overwrite: bool) -> None:
    """A run directory must be new or empty, so two runs are never mixed; ``overwrite`` clears our files."""
    if run_dir.exists() and not run_dir.is_dir():
        raise SettingsError(f"--out: {run_dir} exists and is not a directory")
    # the log Locust is already writing there (--logfile RUN_DIR/locust.log, as specbench passes) is not a run
    try:  # before any load: a disk that refuses the run's files is found now, not after the first request
        run_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise SettingsError(f"--out: cannot create {run_dir}: {exc.strerror or exc}") from None
    if not os.access(run_dir, os.W_OK):
        raise SettingsError(f"--out: {run_dir} is not writable (a read-only disk or no permission)")
    if not RunDir(run_dir).holds_a_run():
        return
    if not overwrite:
        raise SettingsError(f"--out: {run_dir} is not empty (it holds an earlier run?); choose a new directory "
                            "or give --overwrite")
    RunDir(run_dir).clear()


def error_rate_line(step: dict[str, Any], limit: float) -> str | None:
    """One line naming a step whose failed share is above ``limit``, or whose every request was refused (it measured
    nothing, whatever ``limit``: refusals are left out of the error rate); None when the step is within it."""
    total = int(step.get("requests_total") or 0)
    failed = int(step.get("requests_failed") or 0)
    refused = int(step.get("requests_refused") or 0)
    if not total and refused:
        return (f"step {int(step['index']) + 1} C={step['target_c']}: all {refused} requests were refused (HTTP "
                "429/503: a full queue or a rate limit); it measured nothing")
    if not total or failed / total <= limit:
        return None
    return (f"step {int(step['index']) + 1} C={step['target_c']}: {failed} of {total} requests failed "
            f"({failed / total:.0%}), above --max-error-rate {limit:.0%}")

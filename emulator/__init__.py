"""Emulated SGLang server: the load tester's target when there is no GPU, with a known truth.

Public API::

    start_emulator(profile="baseline", *, speed=None, host="127.0.0.1", port=0, overrides=None)
        -> EmulatorHandle  (.url, .port, .profile, .ledger, .stop())

Endpoints: ``POST /generate`` (also PUT), ``POST /v1/completions``, ``POST /v1/chat/completions``,
``GET /ready``, ``/health``, ``/health_generate``, ``/v1/models[/{id}]``, ``/model_info``,
``/server_info``, ``/get_server_info``, ``/metrics``, ``POST|GET /flush_cache``, ``POST /tokenize`` (vLLM and
llama.cpp vintages), and for tests
``GET /_emulator/requests[?clear=1]`` (the ledger), ``/_emulator/stats`` (step timing),
``/_emulator/gauges`` (each gauge refresh: time, running, waiting), ``/_emulator/profile``.

Profiles live in ``config/emulator/`` (keys in its README); the closed-form cost model is in
``emulator.costmodel``. Standalone: ``python -m specbench.emulator --profile eagle3 --port 30001``.
"""

from .hosting import EmulatorHandle, start_emulator
from .ledger import Ledger
from .profile import Profile, ProfileError, available_profiles, load_profile

__all__ = [
    "EmulatorHandle",
    "Ledger",
    "Profile",
    "ProfileError",
    "available_profiles",
    "load_profile",
    "start_emulator",
]

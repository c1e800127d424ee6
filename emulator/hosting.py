"""Start an emulator in-process, for tests that read its ledger in memory (in a gevent-patched or plain process).

The suite itself never runs the emulator in its own process: the locustfile, ``specbench demo`` and the
benchmarks start ``python -m specbench.emulator`` through the one launcher, ``locustfiles.target``.

Choice: if ``socket`` is monkey-patched, the caller's own I/O is cooperative, so the server runs as
greenlets in the caller's hub and needs no thread. Otherwise the server gets a daemon thread with its
own gevent hub; the caller's blocking I/O releases the GIL, and the ledger is shared memory either way.
In thread mode, CPU-bound work in the caller can hold the GIL for up to ``sys.getswitchinterval()``
(5 ms) and delay a step by as much: keep modelled steps well above that, or use ``python -m specbench.emulator``
in its own process when timing matters.
"""

from __future__ import annotations

import threading
from typing import Any

import gevent
import gevent.event
from gevent import monkey

from .ledger import Ledger
from .profile import Profile, load_profile
from .server import Emulator

__all__ = ["EmulatorHandle", "start_emulator"]

START_TIMEOUT_S = 30.0


class EmulatorHandle:
    """A running emulator: ``url``, ``port``, ``profile``, ``ledger``; ``stop()`` is idempotent."""

    def __init__(self, emulator: Emulator, thread: threading.Thread | None = None,
                 hub: Any = None, stop_event: gevent.event.Event | None = None) -> None:
        self._emulator, self._thread, self._hub, self._stop_event = emulator, thread, hub, stop_event
        self.url: str = emulator.url
        self.port: int = emulator.port
        self.profile: Profile = emulator.profile
        self.ledger: Ledger = emulator.ledger
        self.in_thread = thread is not None
        self._stopped = False

    def stop(self, timeout_s: float = 10.0) -> None:
        if self._stopped:
            return
        self._stopped = True
        if self._thread is None:
            self._emulator.stop()
            return
        assert self._stop_event is not None  # start_emulator gives a threaded handle its hub and stop event
        self._hub.loop.run_callback_threadsafe(self._stop_event.set)
        self._thread.join(timeout_s)

    def __enter__(self) -> EmulatorHandle:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.stop()

    def __repr__(self) -> str:
        return f"EmulatorHandle(url={self.url!r}, profile={self.profile.name!r}, speed={self.profile.speed:g})"


def start_emulator(
    profile: str | dict[str, Any] = "baseline",
    *,
    speed: float | None = None,
    host: str = "127.0.0.1",
    port: int = 0,
    overrides: dict[str, Any] | None = None,
) -> EmulatorHandle:
    """Start an emulated SGLang server and return once it accepts connections.

    ``profile`` is a built-in name, a YAML path or a dict; ``overrides`` is merged over it (dotted keys
    allowed) and ``speed`` wins over both. Raises ``ProfileError`` for a bad profile.
    """
    resolved = load_profile(profile, speed=speed, overrides=overrides)
    if monkey.is_module_patched("socket"):
        emulator = Emulator(resolved, host, port)
        emulator.start()
        return EmulatorHandle(emulator)
    return _start_in_thread(resolved, host, port)


def _start_in_thread(profile: Profile, host: str, port: int) -> EmulatorHandle:
    started = threading.Event()
    box: dict[str, Any] = {}

    def main() -> None:
        hub = gevent.get_hub()
        try:
            emulator = Emulator(profile, host, port)
            emulator.start()
        except BaseException as exc:
            box["error"] = exc
            started.set()
            return
        stop_event = gevent.event.Event()
        box.update(emulator=emulator, hub=hub, stop_event=stop_event)
        started.set()
        stop_event.wait()
        emulator.stop()
        hub.destroy(destroy_loop=True)

    thread = threading.Thread(target=main, name=f"sglang-emulator-{profile.name}", daemon=True)
    thread.start()
    if not started.wait(START_TIMEOUT_S):
        raise RuntimeError("emulator thread did not start in time")
    if "error" in box:
        raise box["error"]
    return EmulatorHandle(box["emulator"], thread, box["hub"], box["stop_event"])

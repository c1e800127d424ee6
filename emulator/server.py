"""The emulated SGLang server: wires profile, scheduler, ledger, metrics and routes onto the HTTP server.

``Emulator`` runs in the gevent hub of the thread that starts it; ``hosting.start_emulator`` chooses
that thread. Generation requests are numbered in arrival order (after their body parsed) for fault
selection; anything that reaches a generation route leaves a ledger record, errors included.
"""

from __future__ import annotations

import itertools
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .dcgm import GpuTelemetry
from .errors import ApiError, flat_error
from .faults import FaultPicker
from .httpserver import HttpRequest, HttpServer, Responder
from .ledger import Ledger
from .metrics import Metrics
from .parsing import GenRequest, parse_chat, parse_completions, parse_generate, parse_json_body
from .profile import Profile
from .routes_info import info_routes
from .scheduler import Scheduler
from .session import PrefixCache, Session, SessionContext, send_json

__all__ = ["Emulator"]

Parser = Callable[[dict[str, Any], Profile], GenRequest]
_GENERATION: dict[str, Parser] = {
    "/generate": parse_generate,
    "/v1/completions": parse_completions,
    "/v1/chat/completions": parse_chat,
}


class Emulator:
    """One emulated server bound to (host, port); ``start``/``stop`` must run in its own gevent hub."""

    def __init__(self, profile: Profile, host: str = "127.0.0.1", port: int = 0,
                 ledger_file: Path | None = None, telemetry: GpuTelemetry | None = None) -> None:
        self.profile, self.host = profile, host
        self.scheduler = Scheduler(profile)
        self.ledger = Ledger(path=ledger_file)
        self.metrics = Metrics(profile, self.scheduler)
        self.cache = PrefixCache(profile.prefix_cache, chars_per_token=profile.chars_per_token)
        self._faults = FaultPicker(profile.faults)
        self._numbers = itertools.count()
        self._ctx = SessionContext(profile, self.scheduler, self.cache, self._record)
        self._http = HttpServer(host, port, self._dispatch, self._internal_error)
        self.started_wall = time.time()
        self._ready_at = float("inf")
        self._info_routes = info_routes(profile.wire.server)
        self.telemetry = telemetry  # --gpu-telemetry: the emulated GPUs' power meter and exporter (emulator.dcgm)
        if telemetry is not None:
            self.scheduler.meter = telemetry.meter

    # ------------------------------------------------------------ lifecycle

    def start(self) -> None:
        self.scheduler.start()
        self._http.start()
        self.started_wall = time.time()
        self._ready_at = time.monotonic() + self.profile.startup_delay_s * self.profile.scale

    def stop(self) -> None:
        """Abort running work first, so open streams end (cut) before the server closes connections."""
        self.scheduler.stop()
        self._http.stop(timeout_s=1.0)
        self.ledger.close()

    @property
    def port(self) -> int:
        return self._http.port

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    def is_ready(self) -> bool:
        return time.monotonic() >= self._ready_at

    # ------------------------------------------------------------ routing

    def _record(self, record: dict[str, Any]) -> None:
        self.ledger.append(record)
        self.metrics.observe(record)

    def _internal_error(self, resp: Responder) -> None:
        send_json(resp, 500, flat_error(500, "Internal server error.", "InternalServerError"))

    def _dispatch(self, req: HttpRequest, resp: Responder) -> None:
        path = req.path.rstrip("/") or "/"
        method = "POST" if (req.method == "PUT" and path == "/generate") else req.method
        if path in _GENERATION and path in self.profile.wire.routes:
            if method != "POST":
                send_json(resp, 405, {"detail": "Method Not Allowed"})
            else:
                self._generate(_GENERATION[path], path, req, resp)
            return
        if self.telemetry is not None and self.telemetry.serve(method, path, req, resp):
            return
        if method == "GET" and path.startswith("/v1/models/"):
            path = "/v1/models"
        routes = self._info_routes
        handler = routes.get((method, path))
        if handler is not None:
            handler(self, req, resp)
        elif any(p == path for _, p in routes):
            send_json(resp, 405, {"detail": "Method Not Allowed"})
        else:
            send_json(resp, 404, {"detail": "Not Found"})

    def _generate(self, parse: Parser, route: str, req: HttpRequest, resp: Responder) -> None:
        arrival_s = time.time()
        try:
            gen = parse(parse_json_body(req.body), self.profile)
        except ApiError as exc:
            stub = GenRequest(route, uuid.uuid4().hex, "", 0, 0, False, False, self.profile.served_model_name)
            Session(self._ctx, stub, resp, arrival_s, None).reject(exc.status, exc.body)
            return
        if not self.is_ready():
            body = flat_error(503, "The server is not ready yet (starting up).", "503")
            Session(self._ctx, gen, resp, arrival_s, None).reject(503, body)
            return
        fault = self._faults.pick(next(self._numbers), stream=gen.stream)
        Session(self._ctx, gen, resp, arrival_s, fault).run()

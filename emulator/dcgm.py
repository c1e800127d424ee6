"""GPU telemetry as NVIDIA's dcgm-exporter shows it, for the emulated GPUs of ``--gpu-telemetry N``.

Routes (on the emulator's own port; a real dcgm-exporter serves ``/metrics`` on its own port, 9400 by default):

* ``GET /_emulator/dcgm/metrics``: Prometheus text with, per GPU (labels ``gpu="0"``..., ``UUID``, ``device``,
  ``modelName``, ``Hostname``, as dcgm-exporter labels them), the fields of its default collectors that the
  energy figures use: ``DCGM_FI_DEV_POWER_USAGE`` (gauge, W), ``DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION`` (counter,
  mJ, a whole number, from a large per-GPU offset: NVML counts since the driver loaded) and
  ``DCGM_FI_DEV_GPU_UTIL`` (gauge, %, a whole number). ``--gpu-telemetry-fields`` exports a subset (a collectors
  file without the energy counter, say).
* ``GET /_emulator/energy``: the truth (``PowerMeter.truth``): the model, each GPU's joules since the start, and
  with ``?at=T1,T2,...`` (wall times) the total joules at each of those instants, exact.
* ``POST /_emulator/dcgm/stop``: the exporter goes away: from then on the metrics route closes every connection
  without an answer, as a crashed exporter does (the truth route still answers).
"""

from __future__ import annotations

import json
import time
from typing import Any

from .httpserver import HttpRequest, Responder
from .power import PASS_J_PER_MS, PowerMeter, PowerModel, parse_power
from .profile import Profile

__all__ = ["DCGM_FIELDS", "GpuTelemetry", "build_telemetry"]

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
METRICS_PATH = "/_emulator/dcgm/metrics"
STOP_PATH = "/_emulator/dcgm/stop"
TRUTH_PATH = "/_emulator/energy"
# Short name (--gpu-telemetry-fields) -> (DCGM field, Prometheus type, help as dcgm-exporter's default collectors).
DCGM_FIELDS: dict[str, tuple[str, str, str]] = {
    "power": ("DCGM_FI_DEV_POWER_USAGE", "gauge", "Power draw (in W)."),
    "energy": ("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", "counter", "Total energy consumption since boot (in mJ)."),
    "util": ("DCGM_FI_DEV_GPU_UTIL", "gauge", "GPU utilization (in %)."),
}
_OFFSET_MJ = 4_000_000_000  # where each GPU's counter starts (plus 1e9 mJ per GPU index)


def parse_fields(text: str) -> tuple[str, ...]:
    """``power,energy,util`` (any subset, at least one); raises ValueError."""
    names = tuple(dict.fromkeys(p.strip() for p in text.split(",") if p.strip()))
    bad = [n for n in names if n not in DCGM_FIELDS]
    if bad or not names:
        raise ValueError(f"--gpu-telemetry-fields: expected some of {', '.join(DCGM_FIELDS)}, got {text!r}")
    return names


class GpuTelemetry:
    """The exporter of one emulator's power meter; ``serve`` answers its routes and returns True, else False."""

    def __init__(self, meter: PowerMeter, exported: tuple[str, ...] = tuple(DCGM_FIELDS), host: str = "emulator"
                 ) -> None:
        self.meter, self.exported, self.host = meter, exported, host
        self.stopped = False

    def render(self, now: float | None = None) -> str:
        energy, power, util = self.meter.gauges(now)
        values = {"power": [f"{w:.3f}" for w in power],
                  "energy": [str(_OFFSET_MJ + 1_000_000_000 * i + int(j * 1000.0)) for i, j in enumerate(energy)],
                  "util": [str(round(u)) for u in util]}
        lines: list[str] = []
        for short in self.exported:
            name, kind, helptext = DCGM_FIELDS[short]
            lines += [f"# HELP {name} {helptext}", f"# TYPE {name} {kind}"]
            lines += [f"{name}{{{self._labels(i)}}} {v}" for i, v in enumerate(values[short])]
        return "\n".join(lines) + "\n"

    def _labels(self, gpu: int) -> str:
        uuid = f"GPU-00000000-0000-4000-8000-{gpu:012d}"
        return (f'gpu="{gpu}",UUID="{uuid}",device="nvidia{gpu}",modelName="Emulated GPU",'
                f'Hostname="{self.host}"')

    def serve(self, method: str, path: str, req: HttpRequest, resp: Responder) -> bool:
        if path == METRICS_PATH and method == "GET":
            if self.stopped:
                resp.cut()
            else:
                resp.send(200, self.render().encode(), CONTENT_TYPE)
            return True
        if path == STOP_PATH and method == "POST":
            self.stopped = True
            resp.send(200, b'{"stopped":true}')
            return True
        if path == TRUTH_PATH and method == "GET":
            try:
                body = self._truth(req)
            except ValueError:
                resp.send(400, b'{"error":"at: expected comma-separated wall times in seconds"}')
                return True
            resp.send(200, json.dumps(body, separators=(",", ":")).encode())
            return True
        return False

    def _truth(self, req: HttpRequest) -> dict[str, Any]:
        raw = req.query.get("at", "")
        at = [float(t) for t in raw.split(",") if t.strip()] if raw else []
        return {**self.meter.truth(at, time.time()), "exported": list(self.exported), "stopped": self.stopped}


def build_telemetry(profile: Profile, gpus: int, power: str = "", exported: str = "power,energy,util"
                    ) -> GpuTelemetry:
    """The telemetry of ``--gpu-telemetry GPUS [--power K=V,...] [--gpu-telemetry-fields ...]`` for a profile.

    ``pass_j`` defaults to ``PASS_J_PER_MS`` times the profile's per-request step cost (the speculative one under
    speculation) and the jitter's seed to the profile's seed. Raises ValueError on a bad value.
    """
    if gpus < 1:
        raise ValueError(f"--gpu-telemetry: expected a number of GPUs >= 1, got {gpus}")
    model = parse_power(power, PowerModel(gpus=gpus, seed=profile.seed))
    spec = profile.speculative
    pass_j = model.pass_j if model.pass_j is not None else PASS_J_PER_MS * (spec.step_b_ms if spec else
                                                                           profile.step_b_ms)
    meter = PowerMeter(model, pass_j=pass_j, speed=profile.speed)
    return GpuTelemetry(meter, parse_fields(exported))

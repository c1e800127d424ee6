"""gpu_metrics.jsonl: GPU telemetry read during a run, from DCGM exporters (``--gpu-metrics URL[,URL...]``) or
through NVML on the load machine (``--gpu-metrics nvml``, ``contract.nvml``; same lines, ``source`` 0).

NVIDIA's dcgm-exporter serves each GPU's DCGM fields as Prometheus text at ``/metrics`` (port 9400 by default),
one series per GPU labelled ``gpu="0"``, ``gpu="1"``... ``parse_dcgm`` keeps the three fields the energy figures
need, per GPU:

* ``DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION``: counter, mJ since the driver loaded -> ``energy_mj``;
* ``DCGM_FI_DEV_POWER_USAGE``: gauge, W -> ``power_w``;
* ``DCGM_FI_DEV_GPU_UTIL``: gauge, % of the last sample period a kernel ran -> ``util_pct``;

and two that say what the GPUs were doing, for the reader (the figures do not use them): ``DCGM_FI_DEV_FB_USED``
(MiB) -> ``mem_used_mib``, ``DCGM_FI_DEV_SM_CLOCK`` (MHz) -> ``sm_clock_mhz``. Any field may be absent.

A GPU's key is its ``gpu`` label (with the ``GPU_I_ID`` of a MIG instance after a slash; under NVML its index);
where one answer carries series of more than one host (a ``Hostname`` label, else Prometheus' ``instance``: an
aggregating proxy, a federation), each key also names its host after an ``@`` (``0@node-a``), so two hosts' GPU 0
stay two GPUs. An exporter that exports none of the fields gives a sample with no GPUs.

Telemetry is evidence, not truth (``reading_problem``): a value that is not a finite number, a negative one, a
utilisation outside 0-100% or a power above ``MAX_GPU_POWER_W`` is not written as a reading; its field's name goes
into the GPU's ``rejected`` list instead, so the report can say the exporter answered with nothing usable rather
than that it missed the step. One line of the file
(``GpuMetricsSample``) is one successful read of one exporter; a read that fails writes nothing, so an exporter
that goes away leaves a gap.
Same versioning rule as the records: bump ``GPU_METRICS_SCHEMA`` on an incompatible change and keep reading the
older versions.
"""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any, NotRequired, TypedDict, cast
from urllib.parse import urlsplit

from prometheus_client.parser import text_string_to_metric_families

from specbench.contract.runformat import RunFormatError, read_versioned_lines
from specbench.contract.urls import UrlError, check_url

GPU_METRICS_SCHEMA = 1
DEFAULT_PATH = "/metrics"  # dcgm-exporter's; an URL given without a path gets it

# DCGM field -> the key of a GPU's reading in a sample.
DCGM_FIELDS: dict[str, str] = {
    "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION": "energy_mj",
    "DCGM_FI_DEV_POWER_USAGE": "power_w",
    "DCGM_FI_DEV_GPU_UTIL": "util_pct",
    "DCGM_FI_DEV_FB_USED": "mem_used_mib",
    "DCGM_FI_DEV_SM_CLOCK": "sm_clock_mhz",
}
NVML = "nvml"  # --gpu-metrics nvml[:I,...]: this machine's GPUs through NVML (contract.nvml)
_NVML_SPEC = re.compile(r"nvml(?::(\d+(?:,\d+)*))?")
GPU_LABEL = "gpu"
MIG_LABEL = "GPU_I_ID"
HOST_LABELS = ("Hostname", "instance")  # dcgm-exporter's own host label, else the one Prometheus adds
# The most power one GPU can draw, in W: a whole rack of 72 of the largest GPUs sold (GB200 NVL72) draws about
# 120 kW, so one GPU above 100 kW is a unit or parsing error (300 W read in mW is 300 kW), never a GPU; summed in, it
# would make J/token and cost fiction. The bound is that loose, not the ~1.4 kW of the largest GPU itself, because the
# built-in emulator's time runs --speed times faster and its GPUs draw that many times the watts (~8 kW at speed 20).
MAX_GPU_POWER_W = 100_000.0
REJECTED = "rejected"  # a reading's list of the fields its exporter sent with a value that cannot be true


class GpuReading(TypedDict, total=False):
    """One GPU's fields in one read; a field the exporter does not export (NVML: does not support) is absent."""

    energy_mj: float
    power_w: float
    util_pct: float
    mem_used_mib: float
    sm_clock_mhz: float
    rejected: list[str]  # fields sent with a value that cannot be true (``reading_problem``), left out above


class GpuMetricsSample(TypedDict):
    """One line of gpu_metrics.jsonl: one read of one exporter."""

    schema: int
    t_s: float  # wall clock (epoch seconds), midway between sending the GET and reading the whole answer
    read_s: NotRequired[float]  # sending the GET to reading the whole answer
    source: int  # the exporter's place in --gpu-metrics, 0 first (0 for nvml)
    gpus: dict[str, GpuReading]  # GPU key -> its readings


class GpuMetricsParseError(ValueError):
    """The text is not the Prometheus exposition format."""


def exporter_url(url: str, flag: str = "--gpu-metrics") -> str:
    """A checked exporter URL, with dcgm-exporter's ``/metrics`` when it names no path; raises UrlError."""
    try:
        parts = urlsplit(url.strip())
    except ValueError:
        parts = None
    if parts is None or parts.scheme not in ("http", "https"):
        check_url(url, flag)  # raises, naming the URL as given
        raise UrlError(f"{flag}: expected http://HOST[:PORT][/PATH], got {url!r}")  # pragma: no cover
    path = parts.path.rstrip("/")
    base = check_url(parts._replace(path="").geturl(), flag)
    return base + (path or DEFAULT_PATH)


def parse_nvml(text: str, flag: str) -> str:
    """``nvml`` (every local GPU) or ``nvml:I[,I...]`` (those indices) in its canonical form; raises ValueError."""
    spec = re.sub(r"\s+", "", text).lower()
    found = _NVML_SPEC.fullmatch(spec)
    if found is None:
        raise ValueError(f"{flag}: expected nvml or nvml:INDEX[,INDEX...] (local GPUs through NVML), got {text!r}")
    indices = [int(i) for i in (found.group(1) or "").split(",") if i]
    if len(set(indices)) != len(indices):
        raise ValueError(f"{flag}: a GPU index is given twice in {text!r}")
    return f"{NVML}:{','.join(map(str, indices))}" if indices else NVML


def is_nvml(entry: str) -> bool:
    return entry == NVML or entry.startswith(NVML + ":")


def parse_exporter_urls(text: str, flag: str = "--gpu-metrics") -> list[str]:
    """``URL[,URL...]`` -> checked exporter URLs, each once ('' -> none); ``nvml[:I,...]`` -> that one entry
    (``contract.nvml``; not mixed with URLs: its indices are comma-separated too); raises UrlError."""
    if str(text or "").strip().lower().startswith(NVML):
        try:
            return [parse_nvml(str(text), flag)]
        except ValueError as exc:
            raise UrlError(str(exc)) from None
    urls: list[str] = []
    for part in (p.strip() for p in str(text or "").split(",")):
        if not part:
            continue
        if part.lower().startswith(NVML):
            raise UrlError(f"{flag}: nvml reads this machine's GPUs and is given alone (nvml or "
                           f"nvml:INDEX[,INDEX...]), not among exporter URLs; got {text!r}")
        url = exporter_url(part, flag)
        if url in urls:
            raise UrlError(f"{flag}: {url} is given twice")
        urls.append(url)
    return urls


def gpu_key(labels: dict[str, str], *, with_host: bool = False) -> str | None:
    """The GPU's key in a sample (module docstring); None for a series without a ``gpu`` label."""
    gpu = labels.get(GPU_LABEL)
    if gpu is None:
        return None
    mig = labels.get(MIG_LABEL)
    key = f"{gpu}/{mig}" if mig else gpu
    host = host_of(labels)
    return f"{key}@{host}" if with_host and host else key


def host_of(labels: dict[str, str]) -> str | None:
    return next((labels[k] for k in HOST_LABELS if labels.get(k)), None)


def reading_problem(name: str, value: object) -> str | None:
    """Why a GPU reading cannot be true, or None: not a finite number, negative, a utilisation above 100%, or a
    power above ``MAX_GPU_POWER_W``. The one rule, for what an exporter sends and for a file read back."""
    if not isinstance(value, int | float) or isinstance(value, bool) or not math.isfinite(value):
        return "not a finite number"
    if value < 0:
        return "negative"
    if name == "power_w" and value > MAX_GPU_POWER_W:
        return f"above {MAX_GPU_POWER_W:.0f} W"
    if name == "util_pct" and value > 100:
        return "above 100%"
    return None


def parse_dcgm(text: str, t_s: float, source: int) -> GpuMetricsSample:
    """One sample from a dcgm-exporter answer: ``DCGM_FIELDS`` per GPU; everything else is left out, and a value
    that cannot be true (``reading_problem``) is named in the GPU's ``rejected`` list instead of kept."""
    found: list[tuple[dict[str, str], str, float]] = []
    try:
        for family in text_string_to_metric_families(text):
            key = DCGM_FIELDS.get(family.name) or DCGM_FIELDS.get(family.name.removesuffix("_total"))
            if key is None:
                continue
            found.extend((dict(sample.labels), key, float(sample.value)) for sample in family.samples)
    except (ValueError, TypeError) as exc:
        raise GpuMetricsParseError(f"not Prometheus text format ({exc})") from None
    with_host = len({host_of(labels) for labels, _, _ in found}) > 1
    gpus: dict[str, dict[str, Any]] = {}
    for labels, key, value in found:
        gpu = gpu_key(labels, with_host=with_host)
        if gpu is None:
            continue
        reading = gpus.setdefault(gpu, {})
        if reading_problem(key, value) is None:
            reading[key] = value
        elif key not in reading.setdefault(REJECTED, []):
            reading[REJECTED].append(key)
    # A reading's keys are DCGM_FIELDS' values and REJECTED only, which are GpuReading's keys; mypy sees a dict.
    readings = {k: GpuReading(**v) for k, v in sorted(gpus.items())}  # type: ignore[typeddict-item]  # see above
    return new_sample(readings, t_s, source)


def new_sample(gpus: dict[str, GpuReading], t_s: float, source: int) -> GpuMetricsSample:
    """One line of the file, whichever way the readings came (an exporter's text, NVML)."""
    return GpuMetricsSample(schema=GPU_METRICS_SCHEMA, t_s=t_s, source=source, gpus=gpus)


def read_gpu_metrics(path: Path) -> tuple[list[GpuMetricsSample], int]:
    """Samples in time order and the count of torn lines (a killed run); a newer schema is an error."""
    samples: list[GpuMetricsSample] = []
    lines, torn = read_versioned_lines(path, GPU_METRICS_SCHEMA, "GPU metrics")
    for where, obj in lines:
        if not isinstance(obj.get("t_s"), int | float) or not isinstance(obj.get("gpus"), dict):
            raise RunFormatError(f"{where}: sample lacks a numeric 't_s' and a 'gpus' object")
        if not all(isinstance(v, dict) for v in obj["gpus"].values()):
            raise RunFormatError(f"{where}: each GPU's readings should be an object")
        obj.setdefault("source", 0)
        samples.append(cast(GpuMetricsSample, obj))  # checked above: schema, t_s, gpus
    samples.sort(key=lambda s: s["t_s"])
    return samples, torn

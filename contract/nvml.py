"""Local GPU telemetry through NVML (``--gpu-metrics nvml`` or ``nvml:0,1``), for a server on the load machine.

No exporter to run: the coordinating process reads each GPU through ``pynvml`` (the optional extra
``locust-specbench[nvml]``, package nvidia-ml-py, a ctypes binding of the driver's libnvidia-ml.so.1) into the same
readings a dcgm-exporter gives (``contract.gpu_metrics.GpuReading``), so the analysis reads either unchanged. A
field the GPU does not support (``NVMLError_NotSupported``, ``NoPermission``) is left out, never written as zero:
without the energy counter the analysis integrates power, as for an exporter without it.

``check_nvml`` runs with the options' validation, before any request, so a machine without the package or the
driver costs one line naming which is missing.
"""

from __future__ import annotations

import contextlib
from typing import Any, cast

from specbench.contract.gpu_metrics import GpuReading

_MIB = 1024 * 1024


class NvmlError(Exception):
    """NVML cannot be used (package, driver or GPU index), or a read failed; the message is one line."""


def _pynvml(flag: str) -> Any:
    try:
        import pynvml  # the optional extra; typed Any (no stubs)
    except ImportError:
        raise NvmlError(f"{flag} nvml: the package nvidia-ml-py is not installed; "
                        "pip install 'locust-specbench[nvml]' (or nvidia-ml-py)") from None
    return pynvml


class NvmlGpus:
    """The GPUs an ``nvml`` entry names, NVML initialised while open; ``read`` gives their readings."""

    def __init__(self, entry: str, flag: str = "--gpu-metrics") -> None:
        self.nvml = _pynvml(flag)
        try:
            self.nvml.nvmlInit()
        except self.nvml.NVMLError as exc:
            if exc.value in (self.nvml.NVML_ERROR_LIBRARY_NOT_FOUND, self.nvml.NVML_ERROR_DRIVER_NOT_LOADED):
                raise NvmlError(f"{flag} nvml: no NVIDIA driver found ({exc}); use it on the machine "
                                "whose GPUs run the server, or give dcgm-exporter URLs") from None
            raise NvmlError(f"{flag} nvml: NVML did not start ({exc})") from None
        try:
            count = self.nvml.nvmlDeviceGetCount()
            wanted = [int(i) for i in entry.partition(":")[2].split(",") if i] or list(range(count))
            bad = [i for i in wanted if i >= count]
            if bad or not wanted:
                raise NvmlError(f"{flag} {entry}: NVML sees {count} GPU(s) (indices 0-{count - 1}); "
                                f"no GPU {', '.join(map(str, bad))}" if bad else f"{flag} {entry}: NVML sees no GPU")
            self.handles = {str(i): self.nvml.nvmlDeviceGetHandleByIndex(i) for i in wanted}
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        with contextlib.suppress(self.nvml.NVMLError):  # already shut down: nothing to give back
            self.nvml.nvmlShutdown()

    def read(self) -> dict[str, GpuReading]:
        """Each GPU's readings (``GpuReading``'s units); raises NvmlError when a GPU fails (not NotSupported)."""
        return {key: self._reading(handle) for key, handle in self.handles.items()}

    def _reading(self, handle: Any) -> GpuReading:
        nv = self.nvml
        getters = {
            "energy_mj": lambda: float(nv.nvmlDeviceGetTotalEnergyConsumption(handle)),
            "power_w": lambda: nv.nvmlDeviceGetPowerUsage(handle) / 1000.0,
            "util_pct": lambda: float(nv.nvmlDeviceGetUtilizationRates(handle).gpu),
            "mem_used_mib": lambda: nv.nvmlDeviceGetMemoryInfo(handle).used / _MIB,
            "sm_clock_mhz": lambda: float(nv.nvmlDeviceGetClockInfo(handle, nv.NVML_CLOCK_SM)),
        }
        reading: dict[str, float] = {}
        for key, get in getters.items():
            try:
                reading[key] = get()
            except nv.NVMLError as exc:
                if exc.value not in (nv.NVML_ERROR_NOT_SUPPORTED, nv.NVML_ERROR_NO_PERMISSION):
                    raise NvmlError(f"NVML {key}: {exc}") from None
        return cast(GpuReading, reading)  # the getters' keys are GpuReading's


def check_nvml(entry: str, flag: str = "--gpu-metrics") -> None:
    """Open and close the GPUs ``entry`` names: NVML works here and sees them; raises NvmlError (one line)."""
    NvmlGpus(entry, flag).close()

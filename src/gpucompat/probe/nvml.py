"""NVML (libnvidia-ml.so.1) through ctypes: a snapshot of the clocks, power, temperature and throttle
reasons around every bench figure, and the telemetry thread that samples the GPU at 10 Hz while the
bench runs.
"""

import ctypes
import os
import time

THROTTLE_REASONS = ((0x1, "gpu_idle"), (0x2, "applications_clocks"), (0x4, "sw_power_cap"), (0x8, "hw_slowdown"),
                    (0x10, "sync_boost"), (0x20, "sw_thermal"), (0x40, "hw_thermal"), (0x80, "hw_power_brake"),
                    (0x100, "display_clocks"))


class Nvml:
    """The GPU's clocks, power, temperature and throttle reasons, through libnvidia-ml.so.1 (NVML's C API)."""

    def __init__(self):
        self.lib, self.handle, self.error = None, None, None
        try:
            lib = ctypes.CDLL("libnvidia-ml.so.1")
            self._check(lib.nvmlInit_v2(), "nvmlInit_v2")
            handle = ctypes.c_void_p()
            visible = os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",")[0].strip()
            if visible.startswith(("GPU-", "MIG-")):  # the local executor pins a probe to one GPU by UUID
                self._check(lib.nvmlDeviceGetHandleByUUID(visible.encode(), ctypes.byref(handle)), "nvmlDeviceGetHandleByUUID")
            else:
                index = int(visible) if visible.isdigit() else 0
                self._check(lib.nvmlDeviceGetHandleByIndex_v2(index, ctypes.byref(handle)), "nvmlDeviceGetHandleByIndex_v2")
            self.lib, self.handle = lib, handle
        except (OSError, AttributeError, RuntimeError) as exc:
            self.error = str(exc)

    @staticmethod
    def _check(code, call):
        if code:
            raise RuntimeError("%s returned NVML error %d" % (call, code))

    def _uint(self, call, *args):
        value = ctypes.c_uint(0)
        code = getattr(self.lib, call)(self.handle, *(args + (ctypes.byref(value),)))
        return value.value if code == 0 else None

    def snapshot(self):
        if self.lib is None:
            return {"error": self.error}
        reasons = ctypes.c_ulonglong(0)
        query = getattr(self.lib, "nvmlDeviceGetCurrentClocksEventReasons", None) or self.lib.nvmlDeviceGetCurrentClocksThrottleReasons
        throttle = None
        if query(self.handle, ctypes.byref(reasons)) == 0:
            throttle = [name for bit, name in THROTTLE_REASONS if reasons.value & bit]
        power, limit = self._uint("nvmlDeviceGetPowerUsage"), self._uint("nvmlDeviceGetEnforcedPowerLimit")
        return {"sm_mhz": self._uint("nvmlDeviceGetClockInfo", 1), "mem_mhz": self._uint("nvmlDeviceGetClockInfo", 2),
                "max_sm_mhz": self._uint("nvmlDeviceGetMaxClockInfo", 1), "temp_c": self._uint("nvmlDeviceGetTemperature", 0),
                "power_w": power / 1000.0 if power is not None else None,
                "power_limit_w": limit / 1000.0 if limit is not None else None, "throttle": throttle}


class NvmlUtilization(ctypes.Structure):
    _fields_ = [("gpu", ctypes.c_uint), ("memory", ctypes.c_uint)]


class NvmlMemory(ctypes.Structure):
    _fields_ = [("total", ctypes.c_ulonglong), ("free", ctypes.c_ulonglong), ("used", ctypes.c_ulonglong)]


TELEMETRY_PERIOD_S = 0.1
TELEMETRY_MAX = 12000  # 20 minutes at 10 Hz: the record stays bounded however long the bench runs
TELEMETRY_COLUMNS = ["t_s", "util_pct", "memory_used_mib", "power_w", "sm_mhz", "temp_c"]


class Telemetry:
    """NVML samples every TELEMETRY_PERIOD_S in a daemon thread while the bench runs:
    facts["telemetry"] = {"columns": TELEMETRY_COLUMNS, "samples": [[...], ...]} (t_s from its start)."""

    def __init__(self, nvml, facts):
        import threading

        self.nvml, self.samples, self.stop = nvml, [], threading.Event()
        facts["telemetry"] = {"columns": TELEMETRY_COLUMNS, "period_s": TELEMETRY_PERIOD_S, "samples": self.samples}
        self.thread = threading.Thread(target=self._run, name="gpucompat-telemetry", daemon=True)

    def _run(self):
        began = time.perf_counter()
        lib, handle = self.nvml.lib, self.nvml.handle
        util, memory, value = NvmlUtilization(), NvmlMemory(), ctypes.c_uint(0)
        while not self.stop.wait(TELEMETRY_PERIOD_S) and len(self.samples) < TELEMETRY_MAX:
            row = [round(time.perf_counter() - began, 3)]
            row.append(util.gpu if lib.nvmlDeviceGetUtilizationRates(handle, ctypes.byref(util)) == 0 else None)
            row.append(memory.used >> 20 if lib.nvmlDeviceGetMemoryInfo(handle, ctypes.byref(memory)) == 0 else None)
            row.append(value.value / 1000.0 if lib.nvmlDeviceGetPowerUsage(handle, ctypes.byref(value)) == 0 else None)
            row.append(value.value if lib.nvmlDeviceGetClockInfo(handle, 1, ctypes.byref(value)) == 0 else None)
            row.append(value.value if lib.nvmlDeviceGetTemperature(handle, 0, ctypes.byref(value)) == 0 else None)
            self.samples.append(row)

    def __enter__(self):
        # GPUCOMPAT_TELEMETRY=0 turns the sampling off: benchmarks/bench_rung.py measures what it costs
        if self.nvml.lib is not None and os.environ.get("GPUCOMPAT_TELEMETRY") != "0":
            self.thread.start()
        return self

    def __exit__(self, *_exc):
        self.stop.set()
        if self.thread.is_alive():
            self.thread.join(timeout=2)

"""The GPU's own state around a probe, through NVML: recorded before the device stage and after the
last stage, with the critical events NVML delivers in between, so that a verdict can tell a busy
or broken GPU from a broken stack. The probe reports; gpucompat.gpu_state decides.

    result["gpu_state"] = {"before": SNAPSHOT, "after": SNAPSHOT, "events": [EVENT, ...],
                           "events_error": None, or why NVML could not watch,
                           "gpus": every GPU NVML lists, whatever CUDA_VISIBLE_DEVICES says: [{"index", "name", "uuid"}]}
    SNAPSHOT = {"uuid", "pci_bus_id", "name", "memory": {"total_mib", "free_mib", "used_mib"},
                "compute_mode": "default" | "exclusive_thread" | "prohibited" | "exclusive_process",
                "mig_mode", "persistence_mode": "enabled" | "disabled",
                "ecc": {"enabled", "volatile_uncorrected", "aggregate_uncorrected"},
                "retired_pages_pending": bool, "remapped_rows": {"correctable", "uncorrectable", "pending", "failure"},
                "throttle": [...], "processes": [{"pid", "name", "used_mib", "self"}], "lost": bool,
                "errors": {call: NVML error code}}   (a value NVML cannot give is None)
    EVENT = {"type": "xid" | "double_bit_ecc" | ..., "xid": 79 (for "xid"), "t_s": seconds since the watch began}

Layouts and constants are NVML's (nvml.h, as nvidia-ml-py's pynvml.py binds them): nvmlProcessInfo_v2_t
{pid, usedGpuMemory, gpuInstanceId, computeInstanceId} for the _v3 process calls, nvmlPciInfo_t,
nvmlEventData_t {device, eventType, eventData, gpuInstanceId, computeInstanceId}.
"""

import ctypes
import os
import threading
import time

from .nvml import THROTTLE_REASONS, Nvml, NvmlMemory, own_pids

SUCCESS, NOT_SUPPORTED, INSUFFICIENT_SIZE, TIMEOUT, GPU_IS_LOST = 0, 3, 7, 10, 15
NOT_AVAILABLE = 0xFFFFFFFFFFFFFFFF  # NVML_VALUE_NOT_AVAILABLE for usedGpuMemory (no permission, or WDDM)
COMPUTE_MODES = {0: "default", 1: "exclusive_thread", 2: "prohibited", 3: "exclusive_process"}
# nvmlEventType* bits: the ones that say the GPU itself went wrong
EVENTS = ((0x2, "double_bit_ecc"), (0x8, "xid"), (0x800, "dram_retirement_failure"), (0x2000, "fatal_poison"),
          (0x4000, "gpu_unavailable"))
WATCH_PERIOD_MS = 50  # how long end() may wait for the watching thread to notice
EVENTS_MAX = 100


class ProcessInfo(ctypes.Structure):
    _fields_ = [("pid", ctypes.c_uint), ("usedGpuMemory", ctypes.c_ulonglong), ("gpuInstanceId", ctypes.c_uint),
                ("computeInstanceId", ctypes.c_uint)]


class PciInfo(ctypes.Structure):
    _fields_ = [("busIdLegacy", ctypes.c_char * 16), ("domain", ctypes.c_uint), ("bus", ctypes.c_uint), ("device", ctypes.c_uint),
                ("pciDeviceId", ctypes.c_uint), ("pciSubSystemId", ctypes.c_uint), ("busId", ctypes.c_char * 32)]


class EventData(ctypes.Structure):
    _fields_ = [("device", ctypes.c_void_p), ("eventType", ctypes.c_ulonglong), ("eventData", ctypes.c_ulonglong),
                ("gpuInstanceId", ctypes.c_uint), ("computeInstanceId", ctypes.c_uint)]


class Reader:
    """One NVML query after another on one handle; each failure is kept by call, never raised."""

    def __init__(self, nvml):
        self.lib, self.handle, self.errors, self.lost = nvml.lib, nvml.handle, {}, False

    def call(self, name, *args):
        function = getattr(self.lib, name, None)
        if function is None:
            self.errors[name] = "missing"
            return False
        code = function(self.handle, *args)
        if code == GPU_IS_LOST:
            self.lost = True
        if code != SUCCESS:
            self.errors[name] = code
        return code == SUCCESS

    def uint(self, name, *args):
        value = ctypes.c_uint(0)
        return value.value if self.call(name, *(args + (ctypes.byref(value),))) else None

    def ulonglong(self, name, *args):
        value = ctypes.c_ulonglong(0)
        return value.value if self.call(name, *(args + (ctypes.byref(value),))) else None

    def text(self, name, size=96):
        buffer = ctypes.create_string_buffer(size)
        return buffer.value.decode(errors="replace") if self.call(name, buffer, ctypes.c_uint(size)) else None

    def pair(self, name):
        current, pending = ctypes.c_uint(0), ctypes.c_uint(0)
        return (current.value, pending.value) if self.call(name, ctypes.byref(current), ctypes.byref(pending)) else None


def _enabled(value):
    return None if value is None else ("enabled" if value else "disabled")


def process_stride(lib):
    """Bytes per entry of the _v3 process calls: nvmlProcessInfo_v2_t's 24, except on the early R535
    drivers that wrote a 32-byte entry (with usedGpuCcProtectedMemory); 535.104.05 went back to 24.
    Told apart as nvitop does (nvitop/api/libnvml.py, fixes #79 and #94): those drivers have
    nvmlDeviceGetConfComputeMemSizeInfo but not yet nvmlDeviceGetRunningProcessDetailList."""
    early_r535 = hasattr(lib, "nvmlDeviceGetConfComputeMemSizeInfo") and not hasattr(lib, "nvmlDeviceGetRunningProcessDetailList")
    return 32 if early_r535 else ctypes.sizeof(ProcessInfo)


def processes(reader, mine):
    """The compute processes on this GPU: NVML's _v3 call (first with no room, to learn the count)."""
    name = "nvmlDeviceGetComputeRunningProcesses_v3"
    function = getattr(reader.lib, name, None)
    if function is None:
        reader.errors[name] = "missing"
        return None
    count = ctypes.c_uint(0)
    code = function(reader.handle, ctypes.byref(count), None)
    if code == SUCCESS:
        return []
    if code != INSUFFICIENT_SIZE:
        reader.errors[name] = code
        reader.lost = reader.lost or code == GPU_IS_LOST
        return None
    count.value = count.value * 2 + 4  # room for processes that start meanwhile
    stride = process_stride(reader.lib)
    buffer = (ctypes.c_ubyte * (count.value * 32))()  # room for the larger entry whichever the driver writes
    code = function(reader.handle, ctypes.byref(count), buffer)
    if code != SUCCESS:
        reader.errors[name] = code
        return None
    found, mine = [], own_pids() if mine is None else mine  # walked only when another process is there
    for index in range(count.value):
        info = ProcessInfo.from_buffer(buffer, index * stride)
        process_name = ctypes.create_string_buffer(256)
        named = getattr(reader.lib, "nvmlSystemGetProcessName", None)
        visible = named is not None and named(ctypes.c_uint(info.pid), process_name, ctypes.c_uint(256)) == SUCCESS
        used = None if info.usedGpuMemory == NOT_AVAILABLE else info.usedGpuMemory >> 20
        found.append({"pid": info.pid, "name": process_name.value.decode(errors="replace") if visible else None,
                      "used_mib": used, "self": info.pid in mine})
    return found


def snapshot(nvml, mine=None):
    """What NVML says of the probe's GPU now (see the module's docstring); {"error": ...} without NVML."""
    if nvml.lib is None:
        return {"error": nvml.error}
    reader = Reader(nvml)
    shot = {"uuid": reader.text("nvmlDeviceGetUUID"), "name": reader.text("nvmlDeviceGetName")}
    pci = PciInfo()
    shot["pci_bus_id"] = pci.busId.decode(errors="replace") if reader.call("nvmlDeviceGetPciInfo_v3", ctypes.byref(pci)) else None
    memory = NvmlMemory()
    shot["memory"] = ({"total_mib": memory.total >> 20, "free_mib": memory.free >> 20, "used_mib": memory.used >> 20}
                      if reader.call("nvmlDeviceGetMemoryInfo", ctypes.byref(memory)) else None)
    mode = reader.uint("nvmlDeviceGetComputeMode")
    shot["compute_mode"] = COMPUTE_MODES.get(mode, mode)
    mig = reader.pair("nvmlDeviceGetMigMode")
    shot["mig_mode"] = _enabled(mig[0]) if mig else None
    shot["persistence_mode"] = _enabled(reader.uint("nvmlDeviceGetPersistenceMode"))
    ecc = reader.pair("nvmlDeviceGetEccMode")
    shot["ecc"] = {"enabled": bool(ecc[0]) if ecc else None,
                   # errorType 1 = uncorrected; counterType 0 = volatile (since the driver loaded), 1 = aggregate (lifetime)
                   "volatile_uncorrected": reader.ulonglong("nvmlDeviceGetTotalEccErrors", ctypes.c_uint(1), ctypes.c_uint(0)) if ecc and ecc[0] else None,
                   "aggregate_uncorrected": reader.ulonglong("nvmlDeviceGetTotalEccErrors", ctypes.c_uint(1), ctypes.c_uint(1)) if ecc and ecc[0] else None}
    pending = reader.uint("nvmlDeviceGetRetiredPagesPendingStatus")
    shot["retired_pages_pending"] = None if pending is None else bool(pending)
    rows = [ctypes.c_uint(0) for _ in range(4)]
    shot["remapped_rows"] = ({"correctable": rows[0].value, "uncorrectable": rows[1].value, "pending": bool(rows[2].value),
                              "failure": bool(rows[3].value)}
                             if reader.call("nvmlDeviceGetRemappedRows", *(ctypes.byref(r) for r in rows)) else None)
    reasons = ctypes.c_ulonglong(0)
    query = "nvmlDeviceGetCurrentClocksEventReasons" if hasattr(nvml.lib, "nvmlDeviceGetCurrentClocksEventReasons") else "nvmlDeviceGetCurrentClocksThrottleReasons"
    shot["throttle"] = [n for bit, n in THROTTLE_REASONS if reasons.value & bit] if reader.call(query, ctypes.byref(reasons)) else None
    shot["processes"] = processes(reader, mine)
    shot["lost"] = reader.lost
    shot["errors"] = {k: v for k, v in reader.errors.items() if v not in (NOT_SUPPORTED, "missing")}
    return shot


class Watch:
    """Snapshots around the stages and a daemon thread that waits on an NVML event set for the
    critical events of this GPU (Xid, double-bit ECC, ...) while the job runs. begin() returns at
    once: NVML's start, the "before" snapshot and the event registration run in the thread, beside
    the framework's import; ready() waits for them before the device stage asks the GPU for anything."""

    def __init__(self, record, nvml=None):
        self.record, self.nvml = record, nvml
        self.stop, self.started, self.thread, self.event_set = threading.Event(), threading.Event(), None, None
        # every key is there from the start: the thread only replaces values, so the result can be
        # written (json.dump) at any moment without a dict changing size under it
        record.update(before=None, after=None, events=[], events_error=None, gpus=None)

    def begin(self):
        self.thread = threading.Thread(target=self._run, name="gpucompat-gpu-state", daemon=True)
        self.thread.start()
        return self

    def ready(self, timeout=30.0):
        self.started.wait(timeout)
        return self

    def _run(self):
        try:
            self.nvml = self.nvml or Nvml()
            self.record["before"] = snapshot(self.nvml)
            # every GPU NVML lists: a CUDA_VISIBLE_DEVICES that names none of them is told from its value (analysis.py)
            self.record["gpus"] = self.nvml.gpus()
            self._register()
        finally:
            self.started.set()
        if self.event_set is not None:
            self._watch()

    def _register(self):
        if self.nvml.lib is None or os.environ.get("GPUCOMPAT_GPU_EVENTS") == "0":
            return
        lib, event_set, supported = self.nvml.lib, ctypes.c_void_p(), ctypes.c_ulonglong(0)
        try:
            code = lib.nvmlEventSetCreate(ctypes.byref(event_set))
            if code == SUCCESS:
                wanted = sum(bit for bit, _ in EVENTS)
                if lib.nvmlDeviceGetSupportedEventTypes(self.nvml.handle, ctypes.byref(supported)) == SUCCESS:
                    wanted &= supported.value
                code = lib.nvmlDeviceRegisterEvents(self.nvml.handle, ctypes.c_ulonglong(wanted), event_set) if wanted else NOT_SUPPORTED
                if code != SUCCESS:
                    lib.nvmlEventSetFree(event_set)
        except AttributeError as exc:
            code = str(exc)
        if code != SUCCESS:
            self.record["events_error"] = "NVML cannot watch this GPU's events (error %s)" % code
            return
        self.event_set, self.began = event_set, time.perf_counter()

    def _watch(self):
        data, wait = EventData(), self.nvml.lib.nvmlEventSetWait_v2
        while not self.stop.is_set() and len(self.record["events"]) < EVENTS_MAX:
            code = wait(self.event_set, ctypes.byref(data), ctypes.c_uint(WATCH_PERIOD_MS))
            if code == TIMEOUT:
                continue
            if code != SUCCESS:
                self.record["events_error"] = "waiting on NVML's events failed (error %d)" % code
                break
            kind = next((name for bit, name in EVENTS if data.eventType & bit), hex(data.eventType))
            event = {"type": kind, "t_s": round(time.perf_counter() - self.began, 3)}
            if kind == "xid":
                event["xid"] = int(data.eventData)
            self.record["events"].append(event)

    def end(self):
        self.ready()
        self.stop.set()
        if self.thread is not None:
            self.thread.join(timeout=2 * WATCH_PERIOD_MS / 1000.0 + 1)
        if self.event_set is not None and not self.thread.is_alive():
            self.nvml.lib.nvmlEventSetFree(self.event_set)
        if self.nvml is not None:
            self.record["after"] = snapshot(self.nvml)

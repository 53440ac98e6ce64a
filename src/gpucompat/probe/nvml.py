"""NVML (libnvidia-ml.so.1) through ctypes: a snapshot of the clocks, power, temperature and throttle
reasons around every bench figure, the GPU's power and clock limits against their defaults, the other
processes computing on the GPU while a figure is measured (per-process samples), and the telemetry
thread that samples the GPU at 10 Hz while the bench runs.
"""

import ctypes
import os
import threading
import time

THROTTLE_REASONS = ((0x1, "gpu_idle"), (0x2, "applications_clocks"), (0x4, "sw_power_cap"), (0x8, "hw_slowdown"),
                    (0x10, "sync_boost"), (0x20, "sw_thermal"), (0x40, "hw_thermal"), (0x80, "hw_power_brake"),
                    (0x100, "display_clocks"))
SUCCESS, NOT_FOUND, INSUFFICIENT_SIZE = 0, 6, 7
CLOCK_SM = 1  # nvmlClockType_t NVML_CLOCK_SM


def own_pids():
    """This process and its descendants (share children, torchrun workers), from /proc."""
    mine, parents = {os.getpid()}, {}
    try:
        for entry in os.listdir("/proc"):
            if entry.isdigit():
                try:
                    with open("/proc/%s/stat" % entry) as handle:
                        parents[int(entry)] = int(handle.read().rsplit(")", 1)[1].split()[1])
                except (OSError, IndexError, ValueError):
                    continue
    except OSError:
        return mine
    grew = True
    while grew:
        grew = False
        for pid, parent in parents.items():
            if parent in mine and pid not in mine:
                mine.add(pid)
                grew = True
    return mine


def process_name(lib, pid):
    """A process's short name: /proc/PID/comm where this namespace sees it, else NVML's (its path), else None."""
    try:
        with open("/proc/%d/comm" % pid) as handle:
            return handle.read().strip() or None
    except (OSError, ValueError):
        pass
    named = getattr(lib, "nvmlSystemGetProcessName", None) if lib is not None else None
    buffer = ctypes.create_string_buffer(256)
    if named is not None and named(ctypes.c_uint(pid), buffer, ctypes.c_uint(256)) == SUCCESS:
        return buffer.value.decode(errors="replace") or None
    return None


class Nvml:
    """The GPU's clocks, power, temperature and throttle reasons, through libnvidia-ml.so.1 (NVML's C API).
    `lib` and `handle` are None where NVML or this GPU cannot be opened (`error` says why); `loaded` is
    the initialised library even then, so that the GPUs NVML lists can still be read (gpus())."""

    def __init__(self):
        self.lib, self.handle, self.error, self.loaded, self.contention = None, None, None, None, None
        try:
            lib = ctypes.CDLL("libnvidia-ml.so.1")
            self._check(lib.nvmlInit_v2(), "nvmlInit_v2")
            self.loaded = lib
            handle = ctypes.c_void_p()
            visible = os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",")[0].strip()
            if visible.startswith(("GPU-", "MIG-")):  # the local executor pins a probe to one GPU by UUID
                self._check(lib.nvmlDeviceGetHandleByUUID(visible.encode(), ctypes.byref(handle)), "nvmlDeviceGetHandleByUUID")
            else:
                index = int(visible) if visible.isdigit() else 0
                self._check(lib.nvmlDeviceGetHandleByIndex_v2(index, ctypes.byref(handle)), "nvmlDeviceGetHandleByIndex_v2")
            self.lib, self.handle = lib, handle
            self.contention = Contention(self)
        except (OSError, AttributeError, RuntimeError) as exc:
            self.error = str(exc)

    @staticmethod
    def _check(code, call):
        if code:
            raise RuntimeError("%s returned NVML error %d" % (call, code))

    def _uint(self, call, *args):
        function = getattr(self.lib, call, None)
        if function is None:
            return None
        value = ctypes.c_uint(0)
        code = function(self.handle, *(args + (ctypes.byref(value),)))
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
        return {"sm_mhz": self._uint("nvmlDeviceGetClockInfo", CLOCK_SM), "mem_mhz": self._uint("nvmlDeviceGetClockInfo", 2),
                "max_sm_mhz": self._uint("nvmlDeviceGetMaxClockInfo", CLOCK_SM), "temp_c": self._uint("nvmlDeviceGetTemperature", 0),
                "power_w": power / 1000.0 if power is not None else None,
                "power_limit_w": limit / 1000.0 if limit is not None else None, "throttle": throttle}

    def limits(self):
        """The power limit and the SM application clock as set now, beside the card's defaults: an
        administrator's lower setting holds every figure down (None where NVML cannot say)."""
        if self.lib is None:
            return {"error": self.error}
        watts = lambda milli: milli / 1000.0 if milli is not None else None  # noqa: E731
        return {"power_limit_w": watts(self._uint("nvmlDeviceGetPowerManagementLimit")),
                "default_power_limit_w": watts(self._uint("nvmlDeviceGetPowerManagementDefaultLimit")),
                "enforced_power_limit_w": watts(self._uint("nvmlDeviceGetEnforcedPowerLimit")),
                "applications_sm_mhz": self._uint("nvmlDeviceGetApplicationsClock", CLOCK_SM),
                "default_applications_sm_mhz": self._uint("nvmlDeviceGetDefaultApplicationsClock", CLOCK_SM),
                "max_sm_mhz": self._uint("nvmlDeviceGetMaxClockInfo", CLOCK_SM)}

    def memory(self):
        """{"total_mib", "used_mib"} of this GPU now, or None."""
        memory = NvmlMemory()
        if self.lib is None or self.lib.nvmlDeviceGetMemoryInfo(self.handle, ctypes.byref(memory)) != SUCCESS:
            return None
        return {"total_mib": memory.total >> 20, "used_mib": memory.used >> 20}

    def gpus(self):
        """Every GPU NVML lists, whatever CUDA_VISIBLE_DEVICES says: [{"index", "name", "uuid"}]; None without NVML."""
        lib = self.loaded
        if lib is None:
            return None
        count = ctypes.c_uint(0)
        if lib.nvmlDeviceGetCount_v2(ctypes.byref(count)) != SUCCESS:
            return None
        found = []
        for index in range(min(count.value, 64)):
            handle, name, uuid = ctypes.c_void_p(), ctypes.create_string_buffer(96), ctypes.create_string_buffer(96)
            if lib.nvmlDeviceGetHandleByIndex_v2(index, ctypes.byref(handle)) != SUCCESS:
                found.append({"index": index, "name": None, "uuid": None})
                continue
            found.append({"index": index,
                          "name": name.value.decode(errors="replace") if lib.nvmlDeviceGetName(handle, name, ctypes.c_uint(96)) == SUCCESS else None,
                          "uuid": uuid.value.decode(errors="replace") if lib.nvmlDeviceGetUUID(handle, uuid, ctypes.c_uint(96)) == SUCCESS else None})
        return found


class NvmlUtilization(ctypes.Structure):
    _fields_ = [("gpu", ctypes.c_uint), ("memory", ctypes.c_uint)]


class NvmlMemory(ctypes.Structure):
    _fields_ = [("total", ctypes.c_ulonglong), ("free", ctypes.c_ulonglong), ("used", ctypes.c_ulonglong)]


class ProcessUtilizationSample(ctypes.Structure):
    """nvml.h's nvmlProcessUtilizationSample_t: timeStamp in microseconds (CPU time), utilizations in percent."""
    _fields_ = [("pid", ctypes.c_uint), ("timeStamp", ctypes.c_ulonglong), ("smUtil", ctypes.c_uint), ("memUtil", ctypes.c_uint),
                ("encUtil", ctypes.c_uint), ("decUtil", ctypes.c_uint)]


class ProcessSamples:
    """NVML's per-process samples (nvmlDeviceGetProcessUtilization), one call per read: the buffer is kept
    between reads and grown only where NVML answers INSUFFICIENT_SIZE (with the count it needs)."""

    def __init__(self, lib, handle):
        self.function = getattr(lib, "nvmlDeviceGetProcessUtilization", None) if lib is not None else None
        self.handle, self.buffer, self.calls = handle, (ProcessUtilizationSample * 64)(), 0

    def read(self, last_seen_us):
        """The samples newer than last_seen_us: [(pid, timestamp_us, sm_pct, mem_pct)], or why not: NVML's error
        code where it cannot give them (a MIG instance, a GPU too old, no permission), "missing" where the library
        has no such call. NOT_FOUND means no sample since then."""
        if self.function is None:
            return "missing"
        for _ in range(3):
            count = ctypes.c_uint(len(self.buffer))
            code = self.function(self.handle, self.buffer, ctypes.byref(count), ctypes.c_ulonglong(last_seen_us))
            self.calls += 1
            if code == NOT_FOUND:
                return []
            if code == INSUFFICIENT_SIZE:
                grown = max(count.value * 2 + 8, len(self.buffer) * 2)  # room for samples that arrive meanwhile
                self.buffer = (ProcessUtilizationSample * grown)()
                continue
            if code != SUCCESS:
                return code
            return [(s.pid, s.timeStamp, s.smUtil, s.memUtil) for s in self.buffer[:min(count.value, len(self.buffer))]]
        return INSUFFICIENT_SIZE


# On the lent H100 (driver 580.159.04) a process computing beside the probe had a sample every 0.2 s, given 0.0-0.25 s
# after its stamp, while the probe's own process (a smaller share) had its newest stamp up to 1.7 s behind.
GRACE_S = 2.0     # how long end() waits for the sample that covers a figure's end of a process seen computing lately
HOLDER_WAIT_S = 0.3  # ... and of one that holds a compute context but has not computed lately (no sample since)
MARGIN_S = 1.0    # a sample stamped this long before a figure's start or after its end counts for the figure
LOOKBACK_S = 3.0  # a process whose newest sample is this much behind the newest of all no longer holds the reads back
WIDE_EVERY = 5    # every 5th read reaches LOOKBACK_S back, for a process not sampled lately (new, or trailing further)
EPOCH_US = 10 ** 15  # a stamp above this is microseconds since 1970 (NVML's "CPU timestamp"); below it, another clock, anchored to ours
KEPT_SAMPLES = 100000


class Contention:
    """Which other processes computed on the GPU while a figure was measured, from NVML's per-process samples.

    poll() reads them, one NVML call each (the telemetry thread at 10 Hz, begin() and end() twice more), and keeps
    each with its own timestamp. NVML stamps each process's sample at its own time, and one process's newest stamp
    can trail another's by more than a second: a read asking for the samples newer than the newest stamp seen
    passes over the trailing process's samples. So a read asks for those newer than the oldest "newest stamp" of
    the processes sampled in the last LOOKBACK_S, and a sample is new where it is newer than the last one of its
    own process. Every WIDE_EVERY-th read (and one at each figure's start and end) asks from LOOKBACK_S back and
    takes only the processes not sampled lately, whose first samples a narrow read would pass over; NVML's value
    is a share of the time since lastSeen (asked from further back, a process at 99 % in each sample reads 80 %),
    so the narrow reads give the others'. A figure's record holds the samples stamped in its window widened by
    MARGIN_S on either side; end() reads once more and, where another process holds a compute context or was seen
    computing and the figure is not already contended, waits until each such process has a sample stamped after
    the window's end (at most GRACE_S for one seen computing within LOOKBACK_S of the figure's start, HOLDER_WAIT_S
    for one that only held memory since). A process is the probe's own when it is this process or one of its
    descendants (share children, torchrun workers) at the time it is first seen, while it runs.

    end() -> {"processes": [{"pid", "name", "own", "samples", "sm_pct_mean", "sm_pct_max", "mem_pct_mean",
              "mem_pct_max", "used_mib"}], "samples": n, "own_seen": bool, "error": None or why,
              "window": {"start_s", "end_s", "margin_s"}, "waited_s": s}
    """

    def __init__(self, nvml):
        self.nvml, self.lock = nvml, threading.Lock()
        self.reader = ProcessSamples(nvml.lib, nvml.handle)
        self.newest_us, self.last_us, self.offset_us, self.polls = 0, {}, None, 0
        self.samples, self.window, self.mine, self.error, self.others_computed = [], None, {}, None, False
        self.computing = set()  # the other processes seen computing (SM above 0) in this bench

    def poll(self, wide=False):
        with self.lock:
            self.polls += 1
            horizon = self.newest_us - LOOKBACK_S * 1e6
            recent = set(pid for pid, stamp in self.last_us.items() if stamp >= horizon)
            wide = wide or not recent or self.polls % WIDE_EVERY == 0
            got = self.reader.read(max(0, int(horizon)) if wide else min(self.last_us[pid] for pid in recent))
            if not isinstance(got, list):
                self.error = "NVML gives no per-process samples here (nvmlDeviceGetProcessUtilization: %s)" % got
                return
            self.error = None
            if not got:
                return
            now_us, stamps = time.time() * 1e6, [s[1] for s in got]
            self.newest_us = max(self.newest_us, max(stamps))
            if max(stamps) < EPOCH_US:  # not NVML's documented clock: anchored to ours at the read least behind it
                self.offset_us = min(self.offset_us if self.offset_us is not None else now_us, now_us - max(stamps))
            new = [s for s in got if s[1] > self.last_us.get(s[0], 0) and not (wide and s[0] in recent)]
            if not new:
                return
            for pid, stamp, _sm, _mem in new:
                self.last_us[pid] = max(stamp, self.last_us.get(pid, 0))
            self._classify(set(s[0] for s in new))
            self.computing.update(pid for pid, _s, sm, _m in new if sm > 0 and not self.mine.get(pid))
            self.others_computed = bool(self.computing)
            self.samples.extend((pid, self._seconds(stamp), sm, mem) for pid, stamp, sm, mem in new)
            self._prune(now_us / 1e6)

    def _seconds(self, stamp_us):
        """A sample's time on time.time()'s clock."""
        return (stamp_us + ((self.offset_us or 0) if stamp_us < EPOCH_US else 0)) / 1e6

    def _prune(self, now):
        """Keeps what an open window (or the next one's margin) may still need, and at most KEPT_SAMPLES (under the lock)."""
        cutoff = (self.window["start"] if self.window is not None else now - LOOKBACK_S - GRACE_S) - MARGIN_S
        if self.samples and (self.samples[0][1] < cutoff or len(self.samples) > KEPT_SAMPLES):
            self.samples = [s for s in self.samples if s[1] >= cutoff][-KEPT_SAMPLES:]

    def _classify(self, pids):
        """Each pid not seen before as the probe's own or not, from one walk of /proc (under the lock): classified
        while it runs, since a child that has exited is no longer found under this process."""
        unknown = [pid for pid in pids if pid not in self.mine]
        if unknown:
            walked = own_pids()
            for pid in unknown:
                self.mine[pid] = pid in walked

    def begin(self, running=None):
        """running: {pid: used_mib} of the compute processes on the GPU now (gpustate.processes), or None."""
        self.poll()
        self.poll(wide=True)
        with self.lock:
            self.window = {"start": time.time(), "running": dict(running or {})}

    def end(self, running=None, settle=True):
        """running: as begin()'s, now. settle: wait for the samples that cover the window's end (a figure with no
        value is compared with nothing, so it does not wait)."""
        ended = time.time()
        self.poll()
        self.poll(wide=True)
        window = self.window or {"start": ended, "running": {}}
        running = running or {}
        began, wide = time.time(), False
        while settle and self.error is None and self._awaited(window, ended, running, time.time() - began):
            time.sleep(0.05)
            self.poll(wide=wide)
            wide = not wide
        waited = time.time() - began
        with self.lock:
            self.window = None
            totals = self._totals(window["start"], ended)
            held = dict(window["running"])
            held.update(running)
            pids = sorted(set(totals) | set(held))
            self._classify(pids)  # a process that only holds memory has sent no sample
            own = dict((pid, self.mine[pid]) for pid in pids)
            error = self.error
        found = []
        for pid in pids:
            n, sm_sum, sm_max, mem_sum, mem_max = totals.get(pid, [0, 0, 0, 0, 0])
            found.append({"pid": pid, "name": process_name(self.nvml.lib, pid), "own": own[pid], "samples": n,
                          "sm_pct_mean": round(float(sm_sum) / n, 1) if n else None, "sm_pct_max": sm_max if n else None,
                          "mem_pct_mean": round(float(mem_sum) / n, 1) if n else None, "mem_pct_max": mem_max if n else None,
                          "used_mib": held.get(pid)})
        return {"processes": found, "samples": sum(p["samples"] for p in found),
                "own_seen": any(p["own"] for p in found), "error": error,
                "window": {"start_s": round(window["start"], 3), "end_s": round(ended, 3), "margin_s": MARGIN_S},
                "waited_s": round(waited, 3)}

    def _totals(self, start, ended):
        """{pid: [samples, sm sum, sm max, mem sum, mem max]} of the samples stamped in the widened window (under the lock)."""
        totals = {}
        for pid, stamp, sm, mem in self.samples:
            if start - MARGIN_S <= stamp <= ended + MARGIN_S:
                row = totals.setdefault(pid, [0, 0, 0, 0, 0])
                row[0] += 1
                row[1] += sm
                row[2] = max(row[2], sm)
                row[3] += mem
                row[4] = max(row[4], mem)
        return totals

    def _awaited(self, window, ended, running, waited):
        """Whether a sample that may still come could make this figure contended: another process holds a compute
        context or has computed since the window's widened start, the figure is not contended already, and one of
        those processes has no sample stamped after the window's end yet, and has been waited for less than its due
        (GRACE_S for one seen computing within LOOKBACK_S of the window's start, HOLDER_WAIT_S for one that only held
        memory since: NVML gives no sample of a process that did not compute)."""
        with self.lock:
            since = window["start"] - MARGIN_S
            computed = set(pid for pid, stamp, sm, _m in self.samples if sm > 0 and stamp >= since)
            candidates = computed | set(window["running"]) | set(running)
            self._classify(candidates)
            others = [pid for pid in candidates if not self.mine[pid]]
            totals = self._totals(window["start"], ended)
            if any(totals[pid][2] > 0 for pid in others if pid in totals):
                return False
            last = dict((pid, self._seconds(self.last_us[pid])) for pid in others if pid in self.last_us)
            lately = set(pid for pid in last if pid in self.computing and last[pid] >= window["start"] - LOOKBACK_S)
            return any(last.get(pid, 0) < ended and waited < (GRACE_S if pid in lately else HOLDER_WAIT_S) for pid in others)


TELEMETRY_PERIOD_S = 0.1
TELEMETRY_MAX = 12000  # 20 minutes at 10 Hz: the record stays bounded however long the bench runs
TELEMETRY_COLUMNS = ["t_s", "util_pct", "memory_used_mib", "power_w", "sm_mhz", "temp_c"]


class Telemetry:
    """NVML samples every TELEMETRY_PERIOD_S in a daemon thread while the bench runs:
    facts["telemetry"] = {"columns": TELEMETRY_COLUMNS, "samples": [[...], ...]} (t_s from its start).
    The same thread reads NVML's per-process samples for the figure being measured (Contention)."""

    def __init__(self, nvml, facts):
        self.nvml, self.samples, self.stop = nvml, [], threading.Event()
        facts["telemetry"] = {"columns": TELEMETRY_COLUMNS, "period_s": TELEMETRY_PERIOD_S, "samples": self.samples}
        self.thread = threading.Thread(target=self._run, name="gpucompat-telemetry", daemon=True)

    def _run(self):
        began = time.perf_counter()
        lib, handle, contention = self.nvml.lib, self.nvml.handle, self.nvml.contention
        util, memory, value = NvmlUtilization(), NvmlMemory(), ctypes.c_uint(0)
        while not self.stop.wait(TELEMETRY_PERIOD_S):
            if contention is not None and contention.error is None:
                contention.poll()
            if len(self.samples) >= TELEMETRY_MAX:
                continue
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

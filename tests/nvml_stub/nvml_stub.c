/* A stand-in libnvidia-ml.so.1 for the probe's NVML binding (src/gpucompat/probe/gpustate.py), built
 * by the tests with gcc. It answers with the layouts of NVIDIA's nvml.h (nvmlProcessInfo_v2_t for the
 * _v3 process call, nvmlPciInfo_t, nvmlEventData_t) and the values of a recorded case, chosen with -D:
 *
 *   the H100 of docs/evidence/gpu-state-h100 with another process holding 78.9 GiB (pid 3800), by default;
 *   -DXID=79 -DLOST      an Xid 79 event while the job runs, then every call NVML_ERROR_GPU_IS_LOST (15)
 *                        (akash-network/support#209: "Xid ... 79, ... GPU has fallen off the bus";
 *                        leptonai/gpud#604: "failed to get device remapped rows: ERROR_GPU_IS_LOST");
 *   -DCOMPUTE_MODE=2     Prohibited;  -DREMAP_PENDING  a row remap pending (nvidia-smi -q of an A100,
 *                        stas00/ml-engineering compute/accelerator/nvidia/debug.md);
 *   -DEARLY_R535         32-byte process entries, as early R535 drivers wrote them (nvitop #79, #94),
 *                        with nvmlDeviceGetConfComputeMemSizeInfo and no nvmlDeviceGetRunningProcessDetailList.
 *
 * For the bench's conditions (nvmlProcessUtilizationSample_t, nvml.h; one GPU, index 0, unless -DGPUS=N):
 *   -DOTHER_SM=48        pid 3800 computes at 48 % SM beside the caller (each sample also has the caller at 50 %);
 *                        0 (the default) leaves it holding memory only
 *   -DREASONS=0x4        the clocks-event reasons (default 0x1, gpu_idle): 0x4 the SW power cap, 0x40 HW thermal
 *   -DPOWER_LIMIT=400000 the power limit in mW (default 700000, the H100 SXM's default)
 *   -DSM_MHZ=345         the SM clock now (default 1980, its maximum)
 *   -DNO_PROCESS_UTIL    nvmlDeviceGetProcessUtilization answers NOT_SUPPORTED (a MIG instance, say)
 *   -DSAMPLE_EVERY=4     a new sample only at every 4th call, NOT_FOUND between (a driver sampling slower than asked)
 *   -DOTHER_LAG_MS=400   pid 3800's samples come that late: each is stamped 400 ms before the call that gives it,
 *                        behind the caller's (NVML stamps each process's sample at its own time)
 *   -DALONE              the GPU to itself: the caller is the only compute process, and only its samples come
 * Samples are stamped with the CPU time (microseconds since 1970), as NVML's are; one entry per process that
 * computed in its last sample (pid 3800 only where OTHER_SM > 0), only those newer than lastSeen. pid 3800
 * computes only between NVML_STUB_OTHER_FROM_US and NVML_STUB_OTHER_UNTIL_US (microseconds since 1970, read
 * from the environment at each call) where they are set. nvmlStubProcessUtilizationCalls() counts the calls.
 */
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <unistd.h>

#ifndef COMPUTE_MODE
#define COMPUTE_MODE 0
#endif
#ifndef GPUS
#define GPUS 1
#endif
#ifndef OTHER_SM
#define OTHER_SM 0
#endif
#ifndef REASONS
#define REASONS 0x1
#endif
#ifndef POWER_LIMIT
#define POWER_LIMIT 700000
#endif
#ifndef SAMPLE_EVERY
#define SAMPLE_EVERY 1
#endif
#ifndef SM_MHZ
#define SM_MHZ 1980
#endif
#ifndef OTHER_LAG_MS
#define OTHER_LAG_MS 0
#endif

typedef struct { unsigned int pid; unsigned long long used; unsigned int gi, ci; } info24;
typedef struct { unsigned int pid; unsigned long long used; unsigned int gi, ci; unsigned long long cc; } info32;
typedef struct { char legacy[16]; unsigned int domain, bus, device, id, subsystem; char busId[32]; } pci_t;
typedef struct { unsigned long long total, free, used; } memory_t;
typedef struct { void *device; unsigned long long type, data; unsigned int gi, ci; } event_t;
typedef struct { unsigned int pid; unsigned long long timeStamp; unsigned int smUtil, memUtil, encUtil, decUtil; } psample_t;
typedef struct { unsigned int gpu, memory; } util_t;

static int lost = 0;
static int waits = 0;
#define GONE() do { if (lost) return 15; } while (0)

int nvmlInit_v2(void) { return 0; }
int nvmlDeviceGetCount_v2(unsigned int *n) { *n = GPUS; return 0; }
/* NVML_ERROR_INVALID_ARGUMENT past the last GPU, NVML_ERROR_NOT_FOUND for a UUID not on this machine */
int nvmlDeviceGetHandleByIndex_v2(unsigned int i, void **h) { if (i >= GPUS) return 2; *h = (void *)(unsigned long)(i + 1); return 0; }
int nvmlDeviceGetHandleByUUID(const char *u, void **h) {
    if (strncmp(u, "GPU-19c77ad6-1006-0d65-b7ac-5e54182e8341", strlen(u)) != 0) return 6;
    *h = (void *)0x1; return 0;
}
int nvmlDeviceGetUUID(void *h, char *out, unsigned int n) {
    GONE();
    strncpy(out, (unsigned long)h == 1 ? "GPU-19c77ad6-1006-0d65-b7ac-5e54182e8341" : "GPU-5e4f0a11-2222-3333-4444-555555555555", n);
    return 0;
}
int nvmlDeviceGetName(void *h, char *out, unsigned int n) { GONE(); strncpy(out, "NVIDIA H100 80GB HBM3", n); return 0; }
int nvmlDeviceGetPciInfo_v3(void *h, pci_t *p) { GONE(); memset(p, 0, sizeof *p); strcpy(p->busId, "00000000:00:06.0"); return 0; }
int nvmlDeviceGetMemoryInfo(void *h, memory_t *m) {
    GONE(); m->total = 85520809984ULL; m->free = 312475648ULL; m->used = m->total - m->free; return 0;
}
int nvmlDeviceGetComputeMode(void *h, unsigned int *mode) { GONE(); *mode = COMPUTE_MODE; return 0; }
int nvmlDeviceGetMigMode(void *h, unsigned int *cur, unsigned int *pend) { GONE(); *cur = *pend = 0; return 0; }
int nvmlDeviceGetPersistenceMode(void *h, unsigned int *mode) { GONE(); *mode = 1; return 0; }
int nvmlDeviceGetEccMode(void *h, unsigned int *cur, unsigned int *pend) { GONE(); *cur = *pend = 1; return 0; }
int nvmlDeviceGetTotalEccErrors(void *h, unsigned int type, unsigned int counter, unsigned long long *n) { GONE(); *n = 0; return 0; }
int nvmlDeviceGetRetiredPagesPendingStatus(void *h, unsigned int *p) { return 3; /* NOT_SUPPORTED on Hopper: row remapping instead */ }
int nvmlDeviceGetRemappedRows(void *h, unsigned int *c, unsigned int *u, unsigned int *pending, unsigned int *failed) {
    GONE();
#ifdef REMAP_PENDING
    *c = 1; *u = 0; *pending = 1; *failed = 0;
#else
    *c = *u = *pending = *failed = 0;
#endif
    return 0;
}
int nvmlDeviceGetCurrentClocksEventReasons(void *h, unsigned long long *r) { GONE(); *r = REASONS; return 0; }
int nvmlDeviceGetClockInfo(void *h, unsigned int type, unsigned int *mhz) { GONE(); *mhz = type == 1 ? SM_MHZ : 2619; return 0; }
int nvmlDeviceGetMaxClockInfo(void *h, unsigned int type, unsigned int *mhz) { GONE(); *mhz = type == 1 ? 1980 : 2619; return 0; }
int nvmlDeviceGetApplicationsClock(void *h, unsigned int type, unsigned int *mhz) { GONE(); *mhz = 1755; return 0; }
int nvmlDeviceGetDefaultApplicationsClock(void *h, unsigned int type, unsigned int *mhz) { GONE(); *mhz = 1755; return 0; }
int nvmlDeviceGetTemperature(void *h, unsigned int sensor, unsigned int *c) { GONE(); *c = 52; return 0; }
int nvmlDeviceGetPowerUsage(void *h, unsigned int *mw) { GONE(); *mw = 690000; return 0; }
int nvmlDeviceGetEnforcedPowerLimit(void *h, unsigned int *mw) { GONE(); *mw = POWER_LIMIT; return 0; }
int nvmlDeviceGetPowerManagementLimit(void *h, unsigned int *mw) { GONE(); *mw = POWER_LIMIT; return 0; }
int nvmlDeviceGetPowerManagementDefaultLimit(void *h, unsigned int *mw) { GONE(); *mw = 700000; return 0; }
int nvmlDeviceGetUtilizationRates(void *h, util_t *u) { GONE(); u->gpu = 100; u->memory = 40; return 0; }
/* The caller at 50 % SM and pid 3800 at OTHER_SM, each a sample of its own, stamped at its own time. */
static unsigned long long own_stamp = 0, other_stamp = 0;
static unsigned int asked = 0, calls = 0, other_on = 0;
static unsigned long long now_us(void) { struct timeval tv; gettimeofday(&tv, 0); return tv.tv_sec * 1000000ULL + tv.tv_usec; }
static int other_computes(unsigned long long at) {
    const char *from = getenv("NVML_STUB_OTHER_FROM_US"), *until = getenv("NVML_STUB_OTHER_UNTIL_US");
    if (OTHER_SM == 0) return 0;
    if (from && *from && at < strtoull(from, 0, 10)) return 0;
    if (until && *until && at > strtoull(until, 0, 10)) return 0;
    return 1;
}
unsigned int nvmlStubProcessUtilizationCalls(void) { return calls; }
int nvmlDeviceGetProcessUtilization(void *h, psample_t *out, unsigned int *count, unsigned long long last_seen) {
    unsigned int n = 0;
    GONE();
    calls++;
#ifdef NO_PROCESS_UTIL
    return 3;
#endif
    if (out == 0 || *count < 2) { *count = 2; return 7; }
    if (asked++ % SAMPLE_EVERY == 0) { /* the driver's next sample of each process */
        own_stamp = now_us();
        other_stamp = own_stamp - OTHER_LAG_MS * 1000ULL;
        other_on = other_computes(other_stamp);
    }
    memset(out, 0, 2 * sizeof *out);
    if (own_stamp > last_seen) {
        out[n].pid = getpid(); out[n].timeStamp = own_stamp; out[n].smUtil = 50; out[n].memUtil = 20; n++;
    }
#ifndef ALONE
    if (other_on && other_stamp > last_seen) {
        out[n].pid = 3800; out[n].timeStamp = other_stamp; out[n].smUtil = OTHER_SM; out[n].memUtil = OTHER_SM / 2; n++;
    }
#endif
    *count = n;
    return n ? 0 : 6; /* NOT_FOUND: nothing newer than last_seen */
}
int nvmlDeviceGetComputeRunningProcesses_v3(void *h, unsigned int *count, void *infos) {
    GONE();
    if (*count < 1 || infos == 0) { *count = 1; return 7; /* INSUFFICIENT_SIZE */ }
    *count = 1;
#ifdef ALONE
    unsigned int pid = getpid(); unsigned long long used = 2082ULL << 20;
#else
    unsigned int pid = 3800; unsigned long long used = 80772ULL << 20;
#endif
#ifdef EARLY_R535
    info32 *e = infos; e[0].pid = pid; e[0].used = used; e[0].gi = e[0].ci = 0xFFFFFFFF; e[0].cc = 0;
#else
    info24 *e = infos; e[0].pid = pid; e[0].used = used; e[0].gi = e[0].ci = 0xFFFFFFFF;
#endif
    return 0;
}
#ifdef EARLY_R535
int nvmlDeviceGetConfComputeMemSizeInfo(void *h, void *info) { return 3; }
#else
int nvmlDeviceGetRunningProcessDetailList(void *h, void *list) { return 3; }
#endif
int nvmlSystemGetProcessName(unsigned int pid, char *out, unsigned int n) { strncpy(out, "/opt/torch/.venv/bin/python3", n); return 0; }
int nvmlEventSetCreate(void **set) { *set = (void *)0x2; return 0; }
int nvmlDeviceGetSupportedEventTypes(void *h, unsigned long long *types) { *types = 0x2 | 0x8 | 0x800; return 0; }
int nvmlDeviceRegisterEvents(void *h, unsigned long long types, void *set) { return 0; }
int nvmlEventSetWait_v2(void *set, event_t *data, unsigned int ms) {
#ifdef XID
    if (waits++ == 0) {
        memset(data, 0, sizeof *data); data->type = 0x8; data->data = XID;
#ifdef LOST
        lost = 1;
#endif
        return 0;
    }
#endif
    usleep(ms * 1000);
    return 10; /* TIMEOUT */
}
int nvmlEventSetFree(void *set) { return 0; }

/* What pynvml asks of a driver before it lists GPUs (gpucompat doctor's discovery, discover/local.py):
 * the driver and its CUDA version, each GPU's compute capability, and the shutdown. */
int nvmlSystemGetDriverVersion(char *version, unsigned int length) { strncpy(version, "580.159.04", length); return 0; }
int nvmlSystemGetCudaDriverVersion_v2(int *version) { *version = 13000; return 0; }
int nvmlDeviceGetCudaComputeCapability(void *device, int *major, int *minor) { (void)device; *major = 9; *minor = 0; return 0; }
int nvmlShutdown(void) { return 0; }
int nvmlInitWithFlags(unsigned int flags) { (void)flags; return nvmlInit_v2(); }

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
 */
#include <string.h>
#include <unistd.h>

#ifndef COMPUTE_MODE
#define COMPUTE_MODE 0
#endif

typedef struct { unsigned int pid; unsigned long long used; unsigned int gi, ci; } info24;
typedef struct { unsigned int pid; unsigned long long used; unsigned int gi, ci; unsigned long long cc; } info32;
typedef struct { char legacy[16]; unsigned int domain, bus, device, id, subsystem; char busId[32]; } pci_t;
typedef struct { unsigned long long total, free, used; } memory_t;
typedef struct { void *device; unsigned long long type, data; unsigned int gi, ci; } event_t;

static int lost = 0;
static int waits = 0;
#define GONE() do { if (lost) return 15; } while (0)

int nvmlInit_v2(void) { return 0; }
int nvmlDeviceGetHandleByIndex_v2(unsigned int i, void **h) { *h = (void *)0x1; return 0; }
int nvmlDeviceGetHandleByUUID(const char *u, void **h) { *h = (void *)0x1; return 0; }
int nvmlDeviceGetUUID(void *h, char *out, unsigned int n) { GONE(); strncpy(out, "GPU-19c77ad6-1006-0d65-b7ac-5e54182e8341", n); return 0; }
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
int nvmlDeviceGetCurrentClocksEventReasons(void *h, unsigned long long *r) { GONE(); *r = 0x1; return 0; }
int nvmlDeviceGetComputeRunningProcesses_v3(void *h, unsigned int *count, void *infos) {
    GONE();
    if (*count < 1 || infos == 0) { *count = 1; return 7; /* INSUFFICIENT_SIZE */ }
    *count = 1;
#ifdef EARLY_R535
    info32 *e = infos; e[0].pid = 3800; e[0].used = 80772ULL << 20; e[0].gi = e[0].ci = 0xFFFFFFFF; e[0].cc = 0;
#else
    info24 *e = infos; e[0].pid = 3800; e[0].used = 80772ULL << 20; e[0].gi = e[0].ci = 0xFFFFFFFF;
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

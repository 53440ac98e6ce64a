/* A stand-in libcuda.so.1 for the probe's own start check (src/gpucompat/probe/cuda_start.py), built by
 * the tests with gcc and put on LD_LIBRARY_PATH as a login shell or a module system would. Its answers,
 * chosen with -D, are CUresult values of NVIDIA's cuda.h:
 *
 *   -DINIT=34     cuInit answers CUDA_ERROR_STUB_LIBRARY, as the toolkit's lib64/stubs/libcuda.so does
 *   -DINIT=803    CUDA_ERROR_SYSTEM_DRIVER_MISMATCH (a libcuda of another release than the kernel module)
 *   -DINIT=999    CUDA_ERROR_UNKNOWN: a failure no fact explains
 *   -DCOUNT=0     cuInit succeeds and cuDeviceGetCount counts no GPU (default 1)
 */
#ifndef INIT
#define INIT 0
#endif
#ifndef COUNT
#define COUNT 1
#endif

int cuInit(unsigned int flags) { (void)flags; return INIT; }
int cuDriverGetVersion(int *version) { *version = 13000; return 0; }
int cuDeviceGetCount(int *count) { *count = COUNT; return INIT; }
int cuGetErrorName(int code, const char **name)
{
    switch (code) {
    case 0: *name = "CUDA_SUCCESS"; return 0;
    case 2: *name = "CUDA_ERROR_OUT_OF_MEMORY"; return 0;
    case 34: *name = "CUDA_ERROR_STUB_LIBRARY"; return 0;
    case 100: *name = "CUDA_ERROR_NO_DEVICE"; return 0;
    case 803: *name = "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH"; return 0;
    case 999: *name = "CUDA_ERROR_UNKNOWN"; return 0;
    }
    return 1; /* CUDA_ERROR_INVALID_VALUE */
}

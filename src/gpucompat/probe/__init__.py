"""gpucompat probe: run inside the environment under test; report facts, decide nothing.

Standard library only, CPython 3.8+, importing nothing of gpucompat: gpucompat.probe_build zips
this package into one probe.pyz (the standard library's zipapp), which is copied into every job
and run by whatever interpreter the stack under test provides. Stages run in order
(import -> device -> compute), each in its own try block, and the JSON result is
rewritten before and after every stage (and after every rung of the compute stage),
so a crash or a kill still leaves evidence of how far it got. A stage that is running
is already in result["stages"] with "running": true. The parent process enforces
timeouts and reads the verdict.

    python probe.pyz --framework torch --result result.json
    python probe.pyz ddp-worker --model cnn ...      (the DDP worker, as torchrun and srun start it)

What loaded, and what changes loading
-------------------------------------
result["loaded_libraries"], rewritten with every write: the CUDA libraries mapped into
this process, read from /proc/self/maps (parse_maps), each path once, in map order:

    [{"name": "libcudart", "path": "/.../nvidia/cu13/lib/libcudart.so.13", "version": "13"},
     {"name": "libcuda", "path": "/usr/lib/x86_64-linux-gnu/libcuda.so.580.159.04", "version": "580.159.04"}]

("version" is what follows ".so." in the file name, None where nothing does.)
result["system"]["cuda_env"]: every environment variable that changes how CUDA loads
or JIT-compiles kernels (cuda_env).

The compute stage climbs rungs
------------------------------
Each framework's compute stage is a ladder of rungs, each recorded in
record["facts"]["rungs"] as

    {"name": "blas", "ok": true, "expected": "relative error <= 1e-03 against float64",
     "found": "2.1e-07", "rel_error": 2.1e-07, "duration_s": 0.01}

with "error" (an exception: type, message, traceback) or "reason" (a check that did not
hold) when "ok" is false. A rung that did not run is {"name", "ok": null, "skipped": true,
"reason"}. The ladder stops at the first failing rung: the stage record takes that rung's
"error" or "reason" as its own and facts["failed_rung"] names it; the rungs after it are
recorded as skipped ("not run: the X rung failed"). facts["op"], facts["rel_error"] (the
worst rung that measured one) and facts["tolerance"] stay as before.

    torch, tensorflow:  elementwise (sin(a)*b+a), blas (matmul, cuBLAS)
    jax:                elementwise, blas (dot, default precision), jit (jax.jit of a small function)
    cupy:               elementwise, blas, jit (a RawKernel compiled by NVRTC)
    cuda-runtime:       memcpy (1 MiB round trip), jit_sass, jit_ptx

cuda-runtime's JIT rungs: the import stage looks for libnvrtc beside libcudart, in the
wheels on sys.path (nvidia/cu13/lib for CUDA 13, nvidia/cuda_nvrtc/lib for 11 and 12)
and then by the loader's search. The compute stage compiles one axpy kernel with it
twice, to SASS (--gpu-architecture=sm_XY, nvrtcGetCUBIN, NVRTC 11.1+) and to PTX
(compute_XY; facts["ptx_isa"] is its ".version"), loads each image with the driver API
(cuModuleLoadData in the runtime's primary context), launches it and checks the numbers.
Both are tried once memcpy passed; facts["jit"] = {"sass": {...}, "ptx": {...}} says for
each whether it loaded and ran, with the driver's error name and code. Verdicts:

    - both run: the stage passes;
    - SASS runs, PTX fails with CUDA_ERROR_UNSUPPORTED_PTX_VERSION (222): the stage passes
      with a warning (this NVRTC's PTX is newer than the driver can JIT-compile);
    - PTX fails otherwise, or both fail: the stage fails with the PTX error;
    - SASS fails, PTX runs: the stage fails with the SASS error;
    - this NVRTC does not know sm_XY (a GPU newer than the toolkit): jit_sass is skipped
      and jit_ptx compiles for the newest compute_ it knows below XY; if that runs, the
      stage passes with a warning ("ran by the driver's JIT");
    - no libnvrtc: both are skipped with the reason, and the stage passes on memcpy.

The bench stage (only with --bench, after compute passed) measures how fast the stack runs:
matrix products per data type, device copy, pinned host<->device transfers, launch latency,
and the cloud-Slurm seed's small CNN training loop with the time to its first step; every
figure carries NVML's clocks, power, temperature and throttle reasons before and after it
(see bench.py). A figure that cannot be made is recorded with its reason.
Asked for, it also runs the workloads in N processes sharing the GPU (sharing.py),
data-parallel training over N GPUs with torchrun and the DDP worker of the same probe.pyz
(scaling.py), and torch.profiler around a window of training steps; NVML samples
at 10 Hz while it runs, and result["log"] keeps the job's own log records (pid, thread, time).

The modules, each importing only the ones above it in this list (and the standard library;
a framework is imported inside the function that needs it):

    records                the result: system facts, loaded libraries, errors, the log, writes
    ladder                 the compute ladder's rungs, expected vs found
    cuda_ctypes, nvml      libnvrtc and libcuda; NVML and its telemetry thread (ctypes)
    bench, profiling       the bench harness and timing; profiling windows
    bench_torch, bench_jax, bench_cupy, bench_cuda_runtime   each framework's figures
    sharing, scaling       N processes on one GPU; data-parallel training over GPUs and nodes
    adapter_*              one per framework: import_, device, compute, bench
    main                   the probe's command line (run, main, share_child)
    ddp_launch, ddp_model, ddp_train, ddp_worker   the DDP worker torchrun and srun start
    __main__               probe.pyz's entry: the probe, or `ddp-worker ARGS`
"""

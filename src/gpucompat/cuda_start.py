"""Before any stack verdict: is there a GPU here, and can CUDA start in this job's process at all?

The probe calls cuInit and cuDeviceGetCount through ctypes in its own process, without any framework,
and where CUDA does not start it records the facts that decide why (probe/cuda_start.py). These rules
read those facts. Where they explain a failure, the cell is could-not-test (`no-gpu` or `env-fault`)
with one sentence naming the fact and the fix: the node or the job's environment is at fault, not the
stack, and an invalid cell must mean the stack is broken on any node. The rule is the facts', not a
list of known errors: any failed cuInit where a GPU is listed is the environment's, named by the first
fact that explains it, else by cuInit's own answer.
"""

from __future__ import annotations

import os

from . import gpu_state
from .knowledge.variables import loading_findings

# A process whose virtual memory is limited (ulimit -v, a batch system's per-job limit) below this cannot
# start CUDA: the driver reserves address space for unified memory at cuInit (tens of GiB and more).
VIRTUAL_MEMORY_ENOUGH = 1 << 40
# Variables that stop a stack that runs on a clean node: the failure is theirs, not the stack's.
STOPPING_VARIABLES = {"CUDA_FORCE_PTX_JIT", "CUDA_DISABLE_PTX_JIT", "JAX_PLATFORMS"}


def started(facts: dict | None) -> dict:
    found = (facts or {}).get("cuda_start")
    return found if isinstance(found, dict) else {}


def user_env(facts: dict | None) -> dict:
    """The job's CUDA variables as the user or the batch system left them: a value gpucompat itself set (the
    local executor's GPU pin) is replaced by the one it replaced, or dropped where there was none."""
    system = (facts or {}).get("system") or {}
    env = dict(system.get("cuda_env") or system.get("env") or {})
    pinned = system.get("pinned")
    for name, before in (pinned.items() if isinstance(pinned, dict) else ()):
        if before is None:
            env.pop(name, None)
        else:
            env[name] = before
    return env


def pinned(facts: dict | None, name: str) -> bool:
    return name in (((facts or {}).get("system") or {}).get("pinned") or {})


def no_gpu(facts: dict | None) -> str | None:
    """Why there is no GPU here to test on (None: there is one, or the probe could not tell)."""
    system = (facts or {}).get("system") or {}
    if "proc_driver_version" not in system and not started(facts):
        return None  # the probe recorded nothing of the machine: nothing to say
    module = started(facts).get("kernel_module") or system.get("proc_driver_version")
    listed = gpu_state.state(facts).get("gpus")
    if not module and system.get("libcuda") is False:
        return "no kernel module, no libcuda.so.1"
    if not module and not listed:
        return "no NVIDIA kernel module is loaded (no /proc/driver/nvidia/version) and NVML lists no GPU"
    if listed == []:
        return "the NVIDIA driver is loaded but lists no GPU on this machine"
    return None


def _dir_in(path: str, value: str | None) -> str | None:
    """The entry of a library path (LD_LIBRARY_PATH) that holds PATH, or None."""
    folder = os.path.dirname(path)
    for entry in (value or "").split(":"):
        if entry and os.path.normpath(entry) == os.path.normpath(folder):
            return entry
    return None


def _own(path: str, facts: dict) -> bool:
    """PATH lies inside the stack's own environment (its prefix): the stack brought it."""
    prefix = ((facts.get("system") or {}).get("prefix") or started(facts).get("prefix") or "").rstrip("/")
    return bool(prefix) and prefix not in ("/usr", "/usr/local") and path.startswith(prefix + "/")


def _libcuda_fault(start: dict, env: dict, facts: dict) -> str | None:
    """The libcuda the loader took is not the driver's: a toolkit's stub, or another release than the kernel module."""
    module = start.get("kernel_module")
    for lib in start.get("libcuda") or []:
        path, version = lib.get("path") or "", lib.get("version")
        if _own(path, facts):
            continue
        via = lib.get("via") or ({"variable": "LD_LIBRARY_PATH", "entry": _dir_in(path, env.get("LD_LIBRARY_PATH"))}
                                 if _dir_in(path, env.get("LD_LIBRARY_PATH")) else None)
        how = (f", found through {via['variable']} entry {via['entry']}: take it out of {via['variable']}" if via else
               ": make the driver's own libcuda.so.1 the one the loader finds")
        if "/stubs/" in path or start.get("init_name") == "CUDA_ERROR_STUB_LIBRARY":
            return f"the libcuda.so.1 this job loaded is the CUDA toolkit's stub ({path}), which links programs but cannot run them{how}"
        if module and version and version != module:
            compat = "/compat/" in path
            what = "a CUDA forward-compatibility libcuda" if compat else "a libcuda"
            return (f"the job loaded {what} of driver {version} ({path}), but the kernel module is {module}: "
                    f"cuInit answered {start.get('init_name')}{how}")
    return None


def _limit_fault(start: dict) -> str | None:
    limits = start.get("limits") or {}
    for name, flag in (("as", "-v"), ("data", "-d")):
        soft = (limits.get(name) or [None])[0]
        if soft is not None and soft < VIRTUAL_MEMORY_ENOUGH:
            return (f"the job's virtual memory is limited to {soft / 2**30:.1f} GiB (RLIMIT_{name.upper()}, ulimit {flag}), and CUDA "
                    f"reserves far more address space when it starts: lift the limit (ulimit {flag} unlimited, or the batch system's "
                    f"per-job virtual memory limit)")
    nofile = (limits.get("nofile") or [None])[0]
    if nofile is not None and nofile < 64:
        return f"the job may open only {nofile} files (RLIMIT_NOFILE, ulimit -n), too few for CUDA's device nodes: raise it"
    nproc = (limits.get("nproc") or [None])[0]
    if nproc is not None and nproc < 64:
        return f"the job may run only {nproc} processes and threads (RLIMIT_NPROC, ulimit -u), too few for CUDA's own threads: raise it"
    return None


def _node_fault(start: dict) -> str | None:
    nodes = start.get("nodes") or {}
    closed = [f"{path} ({node.get('error') or 'missing'})" for path, node in nodes.items()
              if path != "/dev/nvidia-uvm" and (not node.get("exists") or node.get("open") is False)]
    if "/dev/nvidiactl" in nodes and closed:
        return (f"the job cannot open the GPU's device nodes: {', '.join(closed[:4])}; give the job access to /dev/nvidia* "
                f"(the batch system's device cgroup, the container's --gpus/--nv, or the nodes' permissions)")
    uvm = nodes.get("/dev/nvidia-uvm")  # made on demand at the first cuInit (nvidia-modprobe): only a refusal counts
    if uvm and uvm.get("open") is False:
        return f"the job cannot open /dev/nvidia-uvm ({uvm.get('error')}), which CUDA needs to start: give the job access to it"
    return None


def _hidden(env: dict, facts: dict) -> str | None:
    """The job's own CUDA_VISIBLE_DEVICES hides every GPU (never the local executor's pin, which replaced it)."""
    if pinned(facts, "CUDA_VISIBLE_DEVICES"):
        return None
    hidden = gpu_state.hidden_by_visible_devices(facts)
    return f"{hidden}: unset it, or name a GPU of this node" if hidden else None


def stopping_variable(facts: dict | None) -> str | None:
    """A variable of the job's environment that stops a stack which runs on a clean node (forced or disabled PTX
    JIT, JAX told to use no GPU platform): one sentence naming it, or None."""
    facts = facts or {}
    env = {k: v for k, v in user_env(facts).items() if k in STOPPING_VARIABLES}
    if facts.get("framework") != "jax":
        env.pop("JAX_PLATFORMS", None)
    for finding in loading_findings(env, here=False):
        return f"{finding['variable']}={finding['value'][:200]!r} in the job's environment: {finding['text']}; unset it, then test again"
    return None


def shadowed(facts: dict | None) -> str | None:
    """A CUDA library the job loaded through LD_LIBRARY_PATH (a module system's toolkit) in place of the one the
    stack's own environment carries: the stack was tested with someone else's library."""
    facts = facts or {}
    env = user_env(facts)
    own = (facts.get("diagnosis") or {}).get("env_libraries") or started(facts).get("env_libraries") or {}
    for lib in facts.get("loaded_libraries") or []:
        path, name = lib.get("path") or "", os.path.basename(lib.get("path") or "")
        via = _dir_in(path, env.get("LD_LIBRARY_PATH"))
        if via and name in own and own[name] != path and not _own(path, facts) and lib.get("name") != "libcuda":
            return (f"the job loaded {path} through LD_LIBRARY_PATH entry {via} in place of the stack's own {own[name]}: "
                    f"take {via} out of LD_LIBRARY_PATH (a module system's CUDA?), then test again")
    return None


_NO_MEMORY = ("cannot allocate memory", "failed to map segment", "memoryerror", "out of memory", "bad_alloc", "mmap failed")


def import_fault(facts: dict | None, message: str) -> str | None:
    """Why a framework did not import for the environment's sake: a CUDA library loaded through LD_LIBRARY_PATH
    in place of the stack's own, or a virtual-memory limit the import ran out of (None: the import is the stack's)."""
    limited = _limit_fault((facts or {}).get("diagnosis") or {})
    if limited and any(words in (message or "").lower() for words in _NO_MEMORY):
        return limited
    return shadowed(facts)


def env_fault(facts: dict | None) -> str | None:
    """Why CUDA cannot start, or cannot be trusted, in this job's process environment (None: it can, or the
    probe recorded nothing that says otherwise). Only the environment's facts count: a libcuda the stack's
    own environment brought, or a failure no fact explains where CUDA started, stays the stack's."""
    facts = facts or {}
    env, start = user_env(facts), started(facts)
    named = shadowed(facts) or _hidden(env, facts)
    if named:
        return named
    if not start or start.get("count"):
        return None  # CUDA started and sees a GPU (or an older probe): what failed is the framework's
    if start.get("hung"):
        return f"{start['hung']} in this job's process: the driver is stuck (check the node: nvidia-smi, dmesg)"
    if start.get("init") is None:
        if any(_own(lib.get("path") or "", facts) for lib in start.get("libcuda") or []):
            return None
        module = f"the NVIDIA kernel module {start['kernel_module']} is loaded" if start.get("kernel_module") else "NVML lists GPUs here"
        return (f"this job's process cannot load libcuda.so.1 ({start.get('error') or 'not found'}) although {module}: "
                f"the driver's user-space libraries are not on the job's library path")
    if any(_own(lib.get("path") or "", facts) for lib in start.get("libcuda") or []):
        return None  # the stack brought its own libcuda (a compat package): its failure is the stack's
    why = _libcuda_fault(start, env, facts) or _node_fault(start) or _limit_fault(start)
    if why:
        return why
    if start.get("init") == 0 and start.get("count") == 0:
        return ("CUDA started but counts no GPU in this job's process, although NVML lists "
                f"{len(gpu_state.state(facts).get('gpus') or [])} here" + (
                    "" if pinned(facts, "CUDA_VISIBLE_DEVICES") else "; check the job's CUDA_VISIBLE_DEVICES"))
    found = [f"{f['variable']}={f['value'][:120]!r}" for f in loading_findings(env, here=False)]
    return (f"cuInit failed in this job's process with {start.get('init_name')} before any framework ran, so no stack can run here"
            + (f"; the job's environment sets {', '.join(found)}" if found else "")
            + (f"; the kernel module is {start['kernel_module']}" if start.get("kernel_module") else ""))

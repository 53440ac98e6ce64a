"""probe.pyz's entry point (and `python -m gpucompat.probe` in the source tree):

    python probe.pyz --framework torch --result result.json ...   the probe (main.main)
    python probe.pyz ddp-worker --model cnn ... --result out.json the DDP worker, as torchrun and srun start it
    python probe.pyz cuda-start                                   may CUDA start here: cuInit's facts as JSON

The zip's own __main__.py (written by gpucompat.probe_build) only calls entry().
"""

import logging
import os
import sys


def entry(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["cuda-start"]:  # may CUDA start in a process like a job's (doctor asks)
        from .cuda_start import main as cuda_start

        sys.exit(cuda_start())
    if argv[:1] == ["ddp-worker"]:  # scaling.WORKER_COMMAND
        from .ddp_worker import run_as_script

        run_as_script(argv[1:])  # never returns
    from .main import main

    code = main(argv)
    # The result is written: leave without the interpreter's teardown (a framework's atexit hooks, freeing its
    # memory pools, destroying the CUDA context), which only delays the job's end. A crash there never changed
    # a verdict: the result already says finished.
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":
    entry()

"""The self-test's GPU stages inside a container, as a renter's job runs: the container half of
``hostcheck selftest --in-container IMAGE`` (hostcheck/selftest/container.py is the host half).

It runs on the image's own ``python3`` with nothing but this package and nvidia-ml-py mounted
read-only beside it, so it imports the standard library and the self-test's own modules only
(no YAML, no CLI framework). It reads its options as one JSON argument, writes progress lines
to stderr and, once, the run as JSON to stdout. The kernel log is read by the host: a
container cannot read it, and should not.

Ctrl-C (SIGINT, which ``docker run`` passes on) and ``docker stop`` (SIGTERM) end the stages
through their own clean-up: everything allocated is freed before the run is written.
"""

from __future__ import annotations

import dataclasses
import json
import signal
import sys
from typing import Any

FORMAT = "hostcheck-selftest-worker/1"
EXIT_INTERRUPTED = 130

# Run on whatever python3 the image has: valid on old interpreters, so that a too-old one says
# so instead of failing on syntax. It prints one line of JSON, as the worker does.
BOOTSTRAP = f"""import sys, json
if sys.version_info < (3, 11):
    print(json.dumps({{'format': {FORMAT!r},
                      'error': 'the image has Python %d.%d; the stages need 3.11 or newer' % sys.version_info[:2]}}))
    sys.exit(0)
from hostcheck.selftest.worker import main
sys.exit(main(sys.argv[1]))
"""


def _stop(signum: int, frame: Any) -> None:
    # Once: a second signal (the terminal's Ctrl-C and Docker's own) must not cut the clean-up.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    raise KeyboardInterrupt


def _progress(line: str) -> None:
    sys.stderr.write(f"progress {line}\n")
    sys.stderr.flush()


def main(argument: str) -> int:
    from hostcheck.selftest.results import Run

    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    job = json.loads(argument)
    run = Run(started_at="", minutes=float(job["minutes"]))
    try:
        from hostcheck.selftest.cuda import CudaUnavailable, Driver
        from hostcheck.selftest.stages import Environment, Options, run_gpu_stages
    except ImportError as exc:  # a Python built without ctypes, or without the libffi it needs
        run.error = f"in the container, Python cannot load ctypes, which the stages need: {exc}"
        return _write(run, 0)
    options = Options(minutes=run.minutes, vram_share=float(job["vram_share"]), max_temp_c=job.get("max_temp_c"),
                      temperature_margin_c=int(job["temperature_margin_c"]))
    try:
        import pynvml as nvml
    except ImportError:
        nvml = None  # the stages say the samples are missing, and the load is not judged
    code = 0
    try:
        driver = Driver(str(job.get("cuda_library") or "libcuda.so.1"))
    except CudaUnavailable as exc:
        run.error = f"in the container, {exc} (the NVIDIA runtime did not mount the driver into it)"
    else:
        env = Environment(driver=driver, nvml=nvml, progress=_progress,
                          kernel_lines=lambda since: "read on the host")
        try:
            run_gpu_stages(run, env, options)
        except KeyboardInterrupt:
            run.stopped, code = "interrupted (Ctrl-C)", EXIT_INTERRUPTED
    if "samples" in run.skipped:  # NVML is the runtime's to mount as well (the "utility" capability)
        run.skipped["samples"] = f"in the container, {run.skipped['samples']}"
    return _write(run, code)


def _write(run: Any, code: int) -> int:
    sys.stdout.write(json.dumps({"format": FORMAT, "run": dataclasses.asdict(run)}) + "\n")
    sys.stdout.flush()
    return code

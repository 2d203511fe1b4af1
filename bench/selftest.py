"""The self-test's sampler: its own CPU cost per second of load (one NVML reading of every GPU
a second), so the figures it reports are not skewed by the reading itself.

Run from the repository root:
    .venv/bin/python bench/selftest.py            # through NVML on this machine's GPUs
    .venv/bin/python bench/selftest.py --stand-in # through the suite's NVML stand-in (no GPU)

It takes --samples readings of each GPU back to back and prints the CPU time (process time,
user + system) and wall time per reading, and what that is per second of load.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stand-in", action="store_true", help="use the suite's NVML stand-in, not this machine's GPUs")
    parser.add_argument("--samples", type=int, default=300)
    args = parser.parse_args()
    if args.stand_in:
        from tests.unit.selftest import standins

        nvml = standins.RecordedNvml([standins.desktop_4090()])
        where = "NVML stand-in (tests/unit/selftest/standins.py), no GPU"
    else:
        import pynvml as nvml

        where = "NVML on this machine"
    from hostcheck.selftest.sampler import NvmlGpu

    try:
        nvml.nvmlInit()
        handles = [nvml.nvmlDeviceGetHandleByIndex(i) for i in range(nvml.nvmlDeviceGetCount())]
    except nvml.NVMLError as exc:
        print(f"NVML did not start: {exc}")
        return 2
    gpus = [NvmlGpu(nvml, handle) for handle in handles]
    if not gpus:
        print("no GPU")
        return 2
    for i, gpu in enumerate(gpus):
        gpu.limits(i)  # the once-per-run queries, not counted
    cpu0, wall0 = time.process_time(), time.perf_counter()
    for n in range(args.samples):
        for gpu in gpus:
            gpu.sample(float(n))
    cpu = (time.process_time() - cpu0) / args.samples
    wall = (time.perf_counter() - wall0) / args.samples
    print(f"{where}: {len(gpus)} GPU(s), {args.samples} readings of each")
    print(f"per second of load (one reading of every GPU): {cpu * 1000:.3f} ms CPU, {wall * 1000:.3f} ms wall "
          f"({cpu * 100:.3f} % of one core)")
    return 0


if __name__ == "__main__":
    sys.exit(main())

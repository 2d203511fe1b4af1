"""`hostcheck selftest`: the GPU loaded as the platform's own self-test loads it, before listing.

cuda.py is the one layer to the CUDA driver API (ctypes against libcuda.so.1), nccl.py NCCL's
all-reduce where it is installed, kernels.py the PTX, sampler.py the NVML readings,
stages.py the stages that measure, kernel_log.py the kernel log around them, worker.py the
stages inside a container and container.py the host that starts it;
results.py what was measured, rules.py (rules.yaml) the thresholds and their sources,
verdict.py the judgement, safety.py when not to start, render.py the output.
"""

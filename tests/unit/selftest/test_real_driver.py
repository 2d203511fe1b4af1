"""On a machine with an NVIDIA driver: the driver layer and the PTX against the real
libcuda.so.1 (the driver's JIT compiles the kernels, the pattern reads back, the burn runs).
Elsewhere it skips: the stand-in in the other modules covers the driver's behaviour, and
scripts/gpu_check.sh runs the whole self-test on a GPU."""

from __future__ import annotations

import ctypes

import pytest

from hostcheck.selftest import kernels
from hostcheck.selftest.cuda import CudaUnavailable, Driver

NO_DRIVER = "no NVIDIA driver on this machine (libcuda.so.1): the stand-in covers the driver"


@pytest.fixture
def driver() -> Driver:
    try:
        found = Driver()
    except CudaUnavailable:
        pytest.skip(NO_DRIVER)
    found.init()
    return found


def test_the_kernels_run_on_the_real_driver(driver: Driver) -> None:
    info = driver.device_info(0)
    assert info.total_bytes > 0 and info.multiprocessors > 0
    driver.use(0)
    try:
        module = driver.load_module(kernels.PTX)
        size = 64 << 20
        buffer, errors = driver.alloc(size), driver.alloc(4)
        driver.zero_u32(errors)
        blocks = info.multiprocessors * 8
        words, seed = size // 4, 0x5EED
        fill, check = driver.function(module, kernels.FILL), driver.function(module, kernels.CHECK)
        driver.launch(fill, blocks, kernels.THREADS_PER_BLOCK,
                      [ctypes.c_uint64(buffer), ctypes.c_uint64(words), ctypes.c_uint32(seed)])
        driver.launch(check, blocks, kernels.THREADS_PER_BLOCK,
                      [ctypes.c_uint64(buffer), ctypes.c_uint64(words), ctypes.c_uint32(seed), ctypes.c_uint64(errors)])
        driver.synchronize()
        assert driver.read_u32(errors) == 0
        # the check counts what differs: a seed the buffer was not written with differs everywhere
        driver.launch(check, blocks, kernels.THREADS_PER_BLOCK,
                      [ctypes.c_uint64(buffer), ctypes.c_uint64(words), ctypes.c_uint32(seed + 1), ctypes.c_uint64(errors)])
        driver.synchronize()
        assert driver.read_u32(errors) == words
        host = driver.alloc_host(4)
        driver.copy_to_host(host, buffer + 4 * 12345, 4)
        assert ctypes.c_uint32.from_address(host).value == kernels.pattern_word(12345, seed)
        driver.free_host(host)
        out = driver.alloc(blocks * kernels.THREADS_PER_BLOCK * 4)
        driver.launch(driver.function(module, kernels.BURN), blocks, kernels.THREADS_PER_BLOCK,
                      [ctypes.c_uint64(out), ctypes.c_uint32(1000)])
        driver.synchronize()
        driver.unload_module(module)
    finally:
        assert driver.release() == []

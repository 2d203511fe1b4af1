"""The ctypes layer against the driver's ABI, through the C stand-in: the driver's codes and
names come back as CudaError, out of memory exactly past the free-memory boundary."""

from __future__ import annotations

from pathlib import Path

import pytest

from hostcheck.selftest import kernels
from hostcheck.selftest.cuda import (
    CUDA_ERROR_INVALID_PTX,
    CUDA_ERROR_NO_DEVICE,
    CUDA_ERROR_NOT_FOUND,
    CUDA_ERROR_OUT_OF_MEMORY,
    CudaError,
    CudaUnavailable,
    Driver,
)
from tests.unit.selftest import standins


@pytest.fixture(scope="module")
def libcuda(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return standins.build_fake_libcuda(tmp_path_factory.mktemp("libcuda"))


def test_out_of_memory_at_the_free_boundary(libcuda: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HC_FAKE_CUDA", "total_mib=1024;free_mib=1000")
    driver = Driver(str(libcuda))
    driver.init()
    driver.use(0)
    free, total = driver.mem_info()
    assert (free, total) == (1000 << 20, 1024 << 20)
    with pytest.raises(CudaError) as caught:
        driver.alloc(free + 1)
    assert caught.value.code == CUDA_ERROR_OUT_OF_MEMORY and caught.value.name == "CUDA_ERROR_OUT_OF_MEMORY"
    pointer = driver.alloc(free)
    assert driver.mem_info()[0] == 0
    driver.free(pointer)
    assert driver.release() == [] and standins.live(libcuda)["contexts"] == 0


def test_no_device(libcuda: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HC_FAKE_CUDA", "fail=nodevice")
    with pytest.raises(CudaError) as caught:
        Driver(str(libcuda)).init()
    assert caught.value.code == CUDA_ERROR_NO_DEVICE and str(caught.value) == "cuInit: CUDA_ERROR_NO_DEVICE (100)"


def test_a_module_must_be_ptx_with_the_entries(libcuda: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HC_FAKE_CUDA", "")
    driver = Driver(str(libcuda))
    driver.init()
    driver.use(0)
    with pytest.raises(CudaError) as caught:
        driver.load_module("not ptx")
    assert caught.value.code == CUDA_ERROR_INVALID_PTX
    module = driver.load_module(kernels.PTX)
    with pytest.raises(CudaError) as missing:
        driver.function(module, "hc_absent")
    assert missing.value.code == CUDA_ERROR_NOT_FOUND
    assert driver.function(module, kernels.BURN)
    driver.unload_module(module)
    driver.release()


def test_device_info_names_the_bus_as_nvml_does(libcuda: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HC_FAKE_CUDA", "gpus=2;cc=61;name=NVIDIA GeForce GTX 1080 Ti")
    driver = Driver(str(libcuda))
    driver.init()
    info = driver.device_info(1)
    assert (info.name, info.compute_capability, info.pci_bus_id) == ("NVIDIA GeForce GTX 1080 Ti", (6, 1), "0000:02:00.0")
    assert driver.driver_version() == 12080


def test_a_library_that_is_not_the_driver(tmp_path: Path) -> None:
    with pytest.raises(CudaUnavailable, match="cannot load"):
        Driver(str(tmp_path / "libcuda.so.1"))
    with pytest.raises(CudaUnavailable, match="not the CUDA driver API"):
        Driver("libc.so.6")

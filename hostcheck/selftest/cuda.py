"""The one layer between the self-test and the GPU: the CUDA driver API of ``libcuda.so.1``,
reached through ``ctypes``.

Why ctypes against the C ABI, and not NVIDIA's ``cuda-python`` bindings: ``libcuda.so.1`` is
installed with every NVIDIA driver, and its exported symbols (``cuMemAlloc_v2``,
``cuLaunchKernel``, ... the ``_v2`` names fixed since CUDA 4.0) keep their signatures across
driver releases, so one module talks to a CUDA 11.x driver on an old Pascal box and a CUDA 13
driver on a new card alike. ``cuda-python`` is built per CUDA major version (``cuda-bindings``
12.x and 13.x): whichever one hostcheck pinned would lock out the owners whose driver is of the
other. ctypes needs nothing installed beyond the driver itself.

Only what the stages use is declared: device queries, the primary context, memory (device,
pinned host), copies (host to device, device to host, device to device across GPUs), a PTX
module and a kernel launch. Every call that fails raises :class:`CudaError` with the driver's
code and name (``CUDA_ERROR_OUT_OF_MEMORY``), which the stages turn into findings. Nothing here
changes clocks, power limits, persistence mode or any driver setting: the driver API cannot.

The library path is a parameter: the suite loads a stand-in built from C
(tests/unit/selftest/fake_libcuda.c) that answers through the same ABI.
"""

from __future__ import annotations

import ctypes
from collections.abc import Sequence
from dataclasses import dataclass

LIBRARY = "libcuda.so.1"

CUDA_SUCCESS = 0
CUDA_ERROR_OUT_OF_MEMORY = 2
CUDA_ERROR_NOT_INITIALIZED = 3
CUDA_ERROR_NO_DEVICE = 100
CUDA_ERROR_ECC_UNCORRECTABLE = 214
CUDA_ERROR_PEER_ACCESS_UNSUPPORTED = 217
CUDA_ERROR_INVALID_PTX = 218
CUDA_ERROR_NOT_FOUND = 500
CUDA_ERROR_ILLEGAL_ADDRESS = 700
CUDA_ERROR_LAUNCH_TIMEOUT = 702
CUDA_ERROR_LAUNCH_FAILED = 719
CUDA_ERROR_UNKNOWN = 999

ATTR_MULTIPROCESSOR_COUNT = 16
ATTR_COMPUTE_CAPABILITY_MAJOR = 75
ATTR_COMPUTE_CAPABILITY_MINOR = 76
ATTR_PCI_BUS_ID = 33
ATTR_PCI_DEVICE_ID = 34
ATTR_PCI_DOMAIN_ID = 50

# Codes that mean the device itself is gone or broken, not a request the caller got wrong.
DEVICE_LOST_CODES = frozenset({CUDA_ERROR_UNKNOWN, CUDA_ERROR_LAUNCH_FAILED, CUDA_ERROR_ILLEGAL_ADDRESS})


class CudaError(Exception):
    """A driver call that did not return CUDA_SUCCESS."""

    def __init__(self, call: str, code: int, name: str) -> None:
        super().__init__(f"{call}: {name} ({code})")
        self.call = call
        self.code = code
        self.name = name


class CudaUnavailable(Exception):
    """libcuda.so.1 could not be loaded (no NVIDIA driver, or not this library's ABI)."""


@dataclass(frozen=True)
class DeviceInfo:
    ordinal: int
    name: str
    total_bytes: int
    compute_capability: tuple[int, int]
    multiprocessors: int
    pci_bus_id: str  # "0000:01:00.0", the form NVML and the kernel log use


class Driver:
    """The driver API, bound to one loaded library. Not thread-safe: the self-test is one thread."""

    def __init__(self, library: str = LIBRARY) -> None:
        try:
            self._lib = ctypes.CDLL(library)
        except OSError as exc:
            raise CudaUnavailable(f"cannot load {library}: {exc}") from None
        missing = [name for name in _SIGNATURES if not hasattr(self._lib, name)]
        if missing:
            raise CudaUnavailable(f"{library} lacks {', '.join(missing[:3])}: not the CUDA driver API")
        for name, (argtypes) in _SIGNATURES.items():
            function = getattr(self._lib, name)
            function.argtypes = argtypes
            function.restype = ctypes.c_int
        self._contexts: dict[int, ctypes.c_void_p] = {}

    # --------------------------------------------------------------- plumbing

    def _call(self, name: str, *args: object) -> None:
        code = getattr(self._lib, name)(*args)
        if code != CUDA_SUCCESS:
            raise CudaError(name, code, self.error_name(code))

    def error_name(self, code: int) -> str:
        text = ctypes.c_char_p()
        if self._lib.cuGetErrorName(code, ctypes.byref(text)) != CUDA_SUCCESS or not text.value:
            return f"CUDA error {code}"
        return text.value.decode("ascii", "replace")[:80]

    # --------------------------------------------------------------- devices

    def init(self) -> None:
        self._call("cuInit", 0)

    def driver_version(self) -> int:
        """The CUDA version the driver supports, as 1000 x major + 10 x minor (12080: 12.8)."""
        value = ctypes.c_int()
        self._call("cuDriverGetVersion", ctypes.byref(value))
        return value.value

    def device_count(self) -> int:
        value = ctypes.c_int()
        self._call("cuDeviceGetCount", ctypes.byref(value))
        return value.value

    def _device(self, ordinal: int) -> ctypes.c_int:
        device = ctypes.c_int()
        self._call("cuDeviceGet", ctypes.byref(device), ordinal)
        return device

    def _attribute(self, device: ctypes.c_int, attribute: int) -> int:
        value = ctypes.c_int()
        self._call("cuDeviceGetAttribute", ctypes.byref(value), attribute, device)
        return value.value

    def device_info(self, ordinal: int) -> DeviceInfo:
        device = self._device(ordinal)
        name = ctypes.create_string_buffer(256)
        self._call("cuDeviceGetName", name, len(name), device)
        total = ctypes.c_size_t()
        self._call("cuDeviceTotalMem_v2", ctypes.byref(total), device)
        bus = (self._attribute(device, ATTR_PCI_DOMAIN_ID), self._attribute(device, ATTR_PCI_BUS_ID),
               self._attribute(device, ATTR_PCI_DEVICE_ID))
        return DeviceInfo(
            ordinal=ordinal,
            name=name.value.decode("utf-8", "replace")[:120],
            total_bytes=total.value,
            compute_capability=(self._attribute(device, ATTR_COMPUTE_CAPABILITY_MAJOR),
                                self._attribute(device, ATTR_COMPUTE_CAPABILITY_MINOR)),
            multiprocessors=self._attribute(device, ATTR_MULTIPROCESSOR_COUNT),
            pci_bus_id=f"{bus[0]:04x}:{bus[1]:02x}:{bus[2]:02x}.0",
        )

    def can_access_peer(self, ordinal: int, peer: int) -> bool:
        value = ctypes.c_int()
        self._call("cuDeviceCanAccessPeer", ctypes.byref(value), self._device(ordinal), self._device(peer))
        return bool(value.value)

    # --------------------------------------------------------------- contexts

    def use(self, ordinal: int) -> None:
        """Make the device's primary context current (retained once, released by :meth:`release`)."""
        if ordinal not in self._contexts:
            context = ctypes.c_void_p()
            self._call("cuDevicePrimaryCtxRetain", ctypes.byref(context), self._device(ordinal))
            self._contexts[ordinal] = context
        self._call("cuCtxSetCurrent", self._contexts[ordinal])

    def release(self) -> list[CudaError]:
        """Release every context retained, whatever fails on the way (the errors are returned):
        releasing the primary context frees everything allocated in it."""
        errors: list[CudaError] = []
        for ordinal, _ in list(self._contexts.items()):
            try:
                self._call("cuDevicePrimaryCtxRelease_v2", self._device(ordinal))
            except CudaError as exc:
                errors.append(exc)
            del self._contexts[ordinal]
        return errors

    @property
    def retained(self) -> list[int]:
        return sorted(self._contexts)

    def synchronize(self) -> None:
        self._call("cuCtxSynchronize")

    # --------------------------------------------------------------- memory

    def mem_info(self) -> tuple[int, int]:
        """(free, total) bytes of the current device."""
        free, total = ctypes.c_size_t(), ctypes.c_size_t()
        self._call("cuMemGetInfo_v2", ctypes.byref(free), ctypes.byref(total))
        return free.value, total.value

    def alloc(self, size: int) -> int:
        pointer = ctypes.c_uint64()
        self._call("cuMemAlloc_v2", ctypes.byref(pointer), ctypes.c_size_t(size))
        return pointer.value

    def free(self, pointer: int) -> None:
        self._call("cuMemFree_v2", ctypes.c_uint64(pointer))

    def alloc_host(self, size: int) -> int:
        """Page-locked (pinned) host memory: what a bandwidth test copies from, as CUDA's own does."""
        pointer = ctypes.c_void_p()
        self._call("cuMemAllocHost_v2", ctypes.byref(pointer), ctypes.c_size_t(size))
        return pointer.value or 0

    def free_host(self, pointer: int) -> None:
        self._call("cuMemFreeHost", ctypes.c_void_p(pointer))

    def copy_to_device(self, device: int, host: int, size: int) -> None:
        self._call("cuMemcpyHtoD_v2", ctypes.c_uint64(device), ctypes.c_void_p(host), ctypes.c_size_t(size))

    def copy_to_host(self, host: int, device: int, size: int) -> None:
        self._call("cuMemcpyDtoH_v2", ctypes.c_void_p(host), ctypes.c_uint64(device), ctypes.c_size_t(size))

    def copy_peer(self, destination: int, destination_ordinal: int, source: int, source_ordinal: int, size: int) -> None:
        self._call("cuMemcpyPeer", ctypes.c_uint64(destination), self._contexts[destination_ordinal],
                   ctypes.c_uint64(source), self._contexts[source_ordinal], ctypes.c_size_t(size))

    def read_u32(self, device: int) -> int:
        value = ctypes.c_uint32()
        self._call("cuMemcpyDtoH_v2", ctypes.byref(value), ctypes.c_uint64(device), ctypes.c_size_t(4))
        return value.value

    def zero_u32(self, device: int) -> None:
        value = ctypes.c_uint32(0)
        self._call("cuMemcpyHtoD_v2", ctypes.c_uint64(device), ctypes.byref(value), ctypes.c_size_t(4))

    # --------------------------------------------------------------- kernels

    def load_module(self, ptx: str) -> int:
        module = ctypes.c_void_p()
        image = ctypes.create_string_buffer(ptx.encode("ascii"))
        self._call("cuModuleLoadDataEx", ctypes.byref(module), image, 0, None, None)
        return module.value or 0

    def unload_module(self, module: int) -> None:
        self._call("cuModuleUnload", ctypes.c_void_p(module))

    def function(self, module: int, name: str) -> int:
        function = ctypes.c_void_p()
        self._call("cuModuleGetFunction", ctypes.byref(function), ctypes.c_void_p(module), name.encode("ascii"))
        return function.value or 0

    def launch(self, function: int, blocks: int, threads: int, arguments: Sequence[ctypes.c_uint64 | ctypes.c_uint32]) -> None:
        """Queue ``function`` on ``blocks`` x ``threads``; arguments as ctypes values (c_uint64 for
        a device pointer or a length, c_uint32 for a word). Errors of the kernel itself surface at
        the next :meth:`synchronize`."""
        pointers = (ctypes.c_void_p * len(arguments))(*[ctypes.cast(ctypes.pointer(a), ctypes.c_void_p) for a in arguments])
        self._call("cuLaunchKernel", ctypes.c_void_p(function), blocks, 1, 1, threads, 1, 1, 0, None, pointers, None)


_P = ctypes.c_void_p
_I = ctypes.c_int
_U = ctypes.c_uint
_SZ = ctypes.c_size_t
_DP = ctypes.c_uint64
_SIGNATURES: dict[str, list[object]] = {
    "cuGetErrorName": [_I, ctypes.POINTER(ctypes.c_char_p)],
    "cuInit": [_U],
    "cuDriverGetVersion": [ctypes.POINTER(_I)],
    "cuDeviceGetCount": [ctypes.POINTER(_I)],
    "cuDeviceGet": [ctypes.POINTER(_I), _I],
    "cuDeviceGetName": [ctypes.c_char_p, _I, _I],
    "cuDeviceTotalMem_v2": [ctypes.POINTER(_SZ), _I],
    "cuDeviceGetAttribute": [ctypes.POINTER(_I), _I, _I],
    "cuDeviceCanAccessPeer": [ctypes.POINTER(_I), _I, _I],
    "cuDevicePrimaryCtxRetain": [ctypes.POINTER(_P), _I],
    "cuDevicePrimaryCtxRelease_v2": [_I],
    "cuCtxSetCurrent": [_P],
    "cuCtxSynchronize": [],
    "cuMemGetInfo_v2": [ctypes.POINTER(_SZ), ctypes.POINTER(_SZ)],
    "cuMemAlloc_v2": [ctypes.POINTER(_DP), _SZ],
    "cuMemFree_v2": [_DP],
    "cuMemAllocHost_v2": [ctypes.POINTER(_P), _SZ],
    "cuMemFreeHost": [_P],
    "cuMemcpyHtoD_v2": [_DP, _P, _SZ],
    "cuMemcpyDtoH_v2": [_P, _DP, _SZ],
    "cuMemcpyPeer": [_DP, _P, _DP, _P, _SZ],
    "cuModuleLoadDataEx": [ctypes.POINTER(_P), _P, _U, _P, _P],
    "cuModuleUnload": [_P],
    "cuModuleGetFunction": [ctypes.POINTER(_P), _P, ctypes.c_char_p],
    "cuLaunchKernel": [_P, _U, _U, _U, _U, _U, _U, _U, _P, _P, _P],
}

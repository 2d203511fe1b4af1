"""NCCL's all-reduce across the GPUs, as a multi-GPU renter's job runs it, where NCCL's library
(libnccl.so.2) is installed on the host; through ctypes against its C API, which has kept its
signatures since NCCL 2.0. The buffers are the driver layer's (hostcheck/selftest/cuda.py), in
the devices' primary contexts, the ones NCCL's own runtime uses."""

from __future__ import annotations

import ctypes
from collections.abc import Callable

NCCL_FLOAT32 = 7
NCCL_SUM = 0


class NcclError(Exception):
    pass


class Nccl:
    def __init__(self, library: str) -> None:
        try:
            self._lib = ctypes.CDLL(library)
        except OSError as exc:
            raise NcclError(f"cannot load {library}: {exc}") from None
        for name in ("ncclGetVersion", "ncclCommInitAll", "ncclAllReduce", "ncclGroupStart", "ncclGroupEnd",
                     "ncclCommDestroy", "ncclGetErrorString"):
            if not hasattr(self._lib, name):
                raise NcclError(f"{library} lacks {name}: not NCCL")
        self._lib.ncclGetErrorString.restype = ctypes.c_char_p
        self._lib.ncclGetErrorString.argtypes = [ctypes.c_int]
        self._lib.ncclAllReduce.argtypes = [ctypes.c_uint64, ctypes.c_uint64, ctypes.c_size_t, ctypes.c_int,
                                            ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p]

    def _call(self, name: str, *args: object) -> None:
        code = getattr(self._lib, name)(*args)
        if code != 0:
            text = (self._lib.ncclGetErrorString(code) or b"").decode("utf-8", "replace")[:120]
            raise NcclError(f"{name}: {text or 'error'} ({code})")

    def version(self) -> str:
        value = ctypes.c_int()
        self._call("ncclGetVersion", ctypes.byref(value))
        v = value.value
        return f"{v // 10000}.{v // 100 % 100}.{v % 100}" if v >= 10000 else f"{v // 1000}.{v // 100 % 10}.{v % 100}"

    def all_reduce(self, ordinals: list[int], buffers: list[tuple[int, int]], count: int,
                   use: Callable[[int], None], synchronize: Callable[[], None],
                   clock: Callable[[], float]) -> float:
        """One float32 sum all-reduce of ``count`` elements from each GPU's (send, receive) pair;
        NCCL's bus bandwidth in GB/s (what nccl-tests reports: algorithm bandwidth x 2(n-1)/n)."""
        n = len(ordinals)
        comms = (ctypes.c_void_p * n)()
        self._call("ncclCommInitAll", comms, n, (ctypes.c_int * n)(*ordinals))
        try:
            start = clock()
            self._call("ncclGroupStart")
            for i, ordinal in enumerate(ordinals):
                use(ordinal)
                send, receive = buffers[i]
                self._call("ncclAllReduce", send, receive, count, NCCL_FLOAT32, NCCL_SUM, comms[i], None)
            self._call("ncclGroupEnd")
            for ordinal in ordinals:
                use(ordinal)
                synchronize()
            elapsed = max(clock() - start, 1e-9)
        finally:
            for i in range(n):
                self._lib.ncclCommDestroy(comms[i])
        return round(count * 4 / elapsed / 1e9 * 2 * (n - 1) / n, 2)

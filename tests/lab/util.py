"""Small helpers shared by the lab modules: logged subprocess runs and waiting."""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from typing import TypeVar

from tests.lab.errors import LabError

T = TypeVar("T")

VERBOSE = os.environ.get("HOSTCHECK_LAB_VERBOSE", "") not in ("", "0")


def log(message: str) -> None:
    """Progress lines on stderr (pytest shows them with -s or on failure)."""
    if VERBOSE:
        print(f"[lab] {message}", file=sys.stderr, flush=True)


def run(argv: Sequence[str], *, timeout: float = 60, check: bool = True,
        input: str | None = None, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """Run a local command with a timeout; on failure raise :class:`LabError` with its output."""
    try:
        result = subprocess.run(list(argv), capture_output=True, text=True, timeout=timeout,
                                input=input, env=env, stdin=None if input is not None else subprocess.DEVNULL)
    except subprocess.TimeoutExpired as exc:
        raise LabError(f"timed out after {timeout}s: {' '.join(argv)}") from exc
    if check and result.returncode != 0:
        raise LabError(f"rc {result.returncode}: {' '.join(argv)}\n{result.stdout}{result.stderr}".rstrip())
    return result


def wait_for(what: str, probe: Callable[[], T | None], timeout: float, interval: float = 0.2) -> T:
    """Poll ``probe`` until it returns something truthy; LabError naming ``what`` on timeout."""
    deadline = time.monotonic() + timeout
    while True:
        value = probe()
        if value:
            return value
        if time.monotonic() > deadline:
            raise LabError(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(interval)


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # a zombie still answers kill(0); it is dead for our purposes
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def pid_cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as handle:
            return handle.read().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        return ""


def pid_starttime(pid: int) -> str:
    """Kernel start time of a process (guards against PID reuse in pid files)."""
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return ""


CRYPT_GENSALT_OUTPUT_SIZE = 192
CRYPT_DATA_SIZE = 32768
"""libxcrypt's <crypt.h>: the room crypt_gensalt_rn writes a setting into, and sizeof(struct
crypt_data), the room crypt_rn works in."""


def shadow_hash(password: str) -> str:
    """A /etc/shadow hash as Debian 12 and 13 make one (the installer, passwd and chpasswd:
    yescrypt at libxcrypt's default cost), from this machine's libcrypt (Python's crypt module
    is deprecated; openssl knows no yescrypt). Lab hosts start side by side in threads, so only
    libxcrypt's reentrant calls are used: crypt() and crypt_gensalt() share static buffers."""
    libcrypt = ctypes.CDLL(ctypes.util.find_library("crypt") or "libcrypt.so.1")
    gensalt, crypt = libcrypt.crypt_gensalt_rn, libcrypt.crypt_rn
    gensalt.restype = crypt.restype = ctypes.c_void_p
    gensalt.argtypes = [ctypes.c_char_p, ctypes.c_ulong, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_int]
    crypt.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_void_p, ctypes.c_int]
    setting = ctypes.create_string_buffer(CRYPT_GENSALT_OUTPUT_SIZE)
    # No random bytes given: libxcrypt takes them from the kernel.
    if not gensalt(b"$y$", 0, None, 0, setting, len(setting)):
        raise LabError("this machine's libcrypt cannot make a yescrypt setting")
    data = ctypes.create_string_buffer(CRYPT_DATA_SIZE)  # zeroed, as crypt_rn asks
    hashed = crypt(password.encode(), setting.value, data, len(data))
    if not hashed or not ctypes.string_at(hashed).startswith(b"$y$"):
        raise LabError("this machine's libcrypt cannot make a yescrypt hash")
    return ctypes.string_at(hashed).decode()

"""The lab's password hashes (tests/lab/util.py shadow_hash). No lab needed.

Lab hosts start side by side in threads, and libxcrypt's plain crypt() keeps its state in one
static buffer: several yescrypt hashes at once crashed the test process. Each hash here is
checked by libxcrypt itself: hashing the password again with the hash as the setting must give
the same string, and a wrong password must not.
"""

from __future__ import annotations

import ctypes
import ctypes.util
from concurrent.futures import ThreadPoolExecutor

from tests.lab.util import CRYPT_DATA_SIZE, shadow_hash


def rehash(password: str, setting: str) -> str:
    libcrypt = ctypes.CDLL(ctypes.util.find_library("crypt") or "libcrypt.so.1")
    libcrypt.crypt_rn.restype = ctypes.c_void_p
    libcrypt.crypt_rn.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_void_p, ctypes.c_int]
    data = ctypes.create_string_buffer(CRYPT_DATA_SIZE)
    result = libcrypt.crypt_rn(password.encode(), setting.encode(), data, len(data))
    return ctypes.string_at(result).decode() if result else ""


def test_hashes_made_side_by_side_are_yescrypt_and_verify() -> None:
    passwords = [f"lab-password-{i}" for i in range(64)]
    with ThreadPoolExecutor(8) as pool:
        hashes = list(pool.map(shadow_hash, passwords))
    assert all(h.startswith("$y$") for h in hashes), hashes
    assert len(set(hashes)) == len(hashes), "every hash has its own salt"
    for password, hashed in zip(passwords, hashes, strict=True):
        assert rehash(password, hashed) == hashed
        assert rehash(password + "x", hashed) != hashed

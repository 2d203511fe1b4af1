"""The owner's Vast API key, found where vast-cli looks for it, never shown.

Order (vast-cli ``vastai/_base.py``): ``--key-file``, then ``VAST_API_KEY``, then
``$XDG_CONFIG_HOME/vastai/vast_api_key`` (``~/.config`` when unset), then the legacy
``~/.vast_api_key``. A key file must be a private regular file (as ssh treats a private key) and
small; the key is never taken from the command line, where ``ps`` shows it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from hostcheck.errors import PrivateFileError, UsageError
from hostcheck.netprobe.private_files import read_private

KEY_ENV = "VAST_API_KEY"
MAX_KEY_CHARS = 256
"""Vast's keys are 64 hex characters; anything past this bound is not a key."""


@dataclass(frozen=True)
class ApiKey:
    """The key and where it came from; its repr and str never hold the key itself."""

    value: str = field(repr=False)
    source: str

    def __str__(self) -> str:
        return f"the key from {self.source}"


def key_file_paths() -> list[Path]:
    """vast-cli's key files, in its order: the XDG one, then the legacy one."""
    config = os.environ.get("XDG_CONFIG_HOME", "")
    base = Path(config) if config and Path(config).is_absolute() else Path.home() / ".config"
    return [base / "vastai" / "vast_api_key", Path.home() / ".vast_api_key"]


def _check(text: str, where: str) -> str:
    key = text.strip()
    if not key:
        raise UsageError(f"{where}: empty, no key in it")
    if len(key) > MAX_KEY_CHARS:
        raise UsageError(f"{where}: longer than {MAX_KEY_CHARS} characters, not an API key")
    if not key.isascii() or not key.isprintable() or any(c.isspace() for c in key):
        raise UsageError(f"{where}: an API key is one word of printable ASCII characters")
    return key


def _read(path: Path, where: str) -> str:
    try:
        raw = read_private(path, MAX_KEY_CHARS)
    except PrivateFileError as exc:
        raise UsageError(f"{where} {exc}") from None
    except OSError as exc:
        raise UsageError(f"{where} {path}: {exc.strerror or exc}") from None
    try:
        return _check(raw.decode("ascii"), f"{where} {path}")
    except UnicodeDecodeError:
        raise UsageError(f"{where} {path}: an API key is ASCII") from None


def find_key(key_file: Path | None) -> ApiKey | None:
    """The key, or None when none is set anywhere. UsageError for a key file that is not
    private, too large, or holds no key (the message names the file, never its content)."""
    if key_file is not None:
        return ApiKey(_read(key_file, "--key-file"), str(key_file))
    env = os.environ.get(KEY_ENV)
    if env:
        return ApiKey(_check(env, KEY_ENV), KEY_ENV)
    for path in key_file_paths():
        if path.is_file():
            return ApiKey(_read(path, "vast-cli's key file"), str(path))
    return None


HOW_TO_GET_A_KEY = (
    "make an API key at https://console.vast.ai/manage-keys/ (the market metrics need a host "
    "account's key), save it in ~/.config/vastai/vast_api_key (chmod 600), where vast-cli keeps it, "
    f"or set {KEY_ENV}, or give --key-file FILE"
)

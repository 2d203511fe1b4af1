"""The SSH server's effective settings: `sshd -T` when it works, else the config files."""

from __future__ import annotations

import errno
import glob
import os
import shutil
import stat
from pathlib import Path
from typing import Any

from hostcheck.collectors._proc import host_process_names
from hostcheck.collectors._run import run_command
from hostcheck.facts import Unknown

SECTION = "ssh"
TIMEOUT = 3.0

MAIN_CONFIG = "/etc/ssh/sshd_config"
SSHD_CANDIDATES = ("/usr/sbin/sshd", "/usr/local/sbin/sshd", "/sbin/sshd", "/usr/bin/sshd")
MAX_INCLUDE_DEPTH = 16  # sshd's own limit (SERVCONF_MAX_DEPTH)

# OpenSSH's compiled-in defaults for the settings checks read, used when no file sets them.
DEFAULTS: dict[str, str] = {
    "permitrootlogin": "prohibit-password",
    "passwordauthentication": "yes",
    "pubkeyauthentication": "yes",
    "kbdinteractiveauthentication": "yes",
    "port": "22",
    "x11forwarding": "no",
    "permitemptypasswords": "no",
    "maxauthtries": "6",
}
# Keywords sshd accumulates over every occurrence instead of keeping the first.
MULTI_VALUED = frozenset(
    {"port", "listenaddress", "hostkey", "hostcertificate", "allowusers", "denyusers",
     "allowgroups", "denygroups", "acceptenv", "subsystem", "include"}
)
# Keywords whose arguments sshd -T prints one per line (the rest keep their words together).
SPLIT_ARGS = frozenset({"allowusers", "denyusers", "allowgroups", "denygroups", "acceptenv"})
ALIASES = {
    # Deprecated spelling still found in older default configs (OpenSSH < 8.7).
    "challengeresponseauthentication": "kbdinteractiveauthentication",
}
# sshd -T prints the legacy synonym; checks compare against the modern name.
VALUE_SYNONYMS = {("permitrootlogin", "without-password"): "prohibit-password"}
# Enumerated values are case-insensitive in the config; sshd -T prints them in lower case.
ENUM_WORDS = frozenset(
    {"yes", "no", "prohibit-password", "without-password", "forced-commands-only", "all",
     "local", "remote", "clientspecified", "point-to-point", "ethernet", "none", "sandbox"}
)


# The settings collected: what the checks judge, what they need to tell the owner's own
# access apart, and OpenSSH's defaults. Everything else sshd -T prints (commands, paths,
# banners, a token in an AuthorizedKeysCommand) is left out of the facts.
COLLECTED = frozenset(DEFAULTS) | {
    "usepam", "listenaddress", "addressfamily", "allowusers", "denyusers", "allowgroups", "denygroups",
    "authenticationmethods", "permituserenvironment", "allowtcpforwarding", "gatewayports",
}


def collected(settings: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in settings.items() if key in COLLECTED}


def _normalise(key: str, value: str) -> str:
    if value.lower() in ENUM_WORDS:
        value = value.lower()
    return VALUE_SYNONYMS.get((key, value), value)


def _store(settings: dict[str, Any], key: str, value: str, origins: dict[str, str] | None = None,
           path: str = "") -> None:
    if origins is not None and key not in settings:
        origins[key] = path
    if key in MULTI_VALUED:
        current = settings.get(key)
        if current is None:
            settings[key] = value
        elif isinstance(current, list):
            current.append(value)
        else:
            settings[key] = [current, value]
    elif key not in settings:
        settings[key] = value


def parse_sshd_T(text: str) -> dict[str, Any]:
    """Settings from `sshd -T` output: keyword -> value, a list when sshd printed it repeatedly."""
    settings: dict[str, Any] = {}
    for line in text.splitlines():
        parts = line.strip().split(None, 1)
        if not parts or parts[0].startswith("#"):
            continue
        key = parts[0].lower()
        value = parts[1].strip() if len(parts) > 1 else ""
        value = _normalise(key, value)
        if key in settings and key not in MULTI_VALUED:
            # sshd -T prints some keywords once per value (e.g. a future list keyword).
            current = settings[key]
            settings[key] = current + [value] if isinstance(current, list) else [current, value]
        else:
            _store(settings, key, value)
    return settings


def _tokens(line: str) -> list[str]:
    """Split a config line like sshd's argv_split: quotes group words, '#' starts a comment."""
    tokens: list[str] = []
    current: list[str] = []
    quote = ""
    in_token = False
    for ch in line:
        if quote:
            if ch == quote:
                quote = ""
            else:
                current.append(ch)
            continue
        if ch in "\"'":
            quote, in_token = ch, True
        elif ch.isspace():
            if in_token:
                tokens.append("".join(current))
                current, in_token = [], False
        elif ch == "#" and not in_token:
            break
        else:
            current.append(ch)
            in_token = True
    if in_token:
        tokens.append("".join(current))
    return tokens


def _split_keyword(line: str) -> tuple[str, list[str]] | None:
    stripped = line.strip()
    if not stripped or stripped.startswith("#"):
        return None
    # "Keyword=value" and "Keyword = value" are both accepted by sshd.
    head, sep, rest = stripped.partition("=")
    if sep and head.strip() and not any(c.isspace() for c in head.strip()):
        keyword, args = head.strip(), _tokens(rest)
    else:
        words = stripped.split(None, 1)
        keyword, args = words[0], _tokens(words[1]) if len(words) > 1 else []
    return keyword.lower(), args


def _read_config(
    path: str,
    base_dir: str,
    active: bool,
    settings: dict[str, Any],
    files_read: list[str],
    problems: list[str],
    depth: int,
    origins: dict[str, str],
) -> None:
    if depth > MAX_INCLUDE_DEPTH:
        problems.append(f"{path}: Include nested deeper than {MAX_INCLUDE_DEPTH}")
        return
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):  # a FIFO or device could block the audit
            raise OSError(errno.EINVAL, "not a regular file")
        with open(path, encoding="utf-8", errors="replace") as fh:
            text = fh.read(1 << 20)
    except (OSError, ValueError) as exc:
        problems.append(f"{path}: {getattr(exc, 'strerror', None) or exc}")
        return
    files_read.append(path)
    for line in text.splitlines():
        parsed = _split_keyword(line)
        if parsed is None:
            continue
        keyword, args = parsed
        keyword = ALIASES.get(keyword, keyword)
        if keyword == "match":
            # Only "Match all" applies to every connection; other blocks are conditional.
            active = [a.lower() for a in args] == ["all"]
            continue
        if keyword == "include":
            for pattern in args:
                full = pattern if os.path.isabs(pattern) else os.path.join(base_dir, pattern)
                try:
                    matches = sorted(glob.glob(full))
                except (OSError, ValueError):
                    matches = []
                for inc in matches:
                    # An included file's Match blocks end with that file.
                    _read_config(inc, base_dir, active, settings, files_read, problems, depth + 1, origins)
            continue
        if not active or not args:
            continue
        if keyword in SPLIT_ARGS:
            for arg in args:
                _store(settings, keyword, arg, origins, path)
        else:
            _store(settings, keyword, _normalise(keyword, " ".join(args)), origins, path)


def effective_from_files(root_config_path: str | Path) -> tuple[dict[str, Any], list[str], list[str]]:
    """Global settings as sshd would apply them from ``root_config_path`` and its Includes.

    First value wins for ordinary keywords, list keywords accumulate, Match blocks (other
    than "Match all") are ignored, relative Include paths are relative to the directory
    of the main file (/etc/ssh), and OpenSSH defaults fill what no file sets.
    Returns (settings, files read in order, problems).
    """
    settings, files_read, problems, _origins = _walk_files(root_config_path)
    return settings, files_read, problems


def _walk_files(root_config_path: str | Path) -> tuple[dict[str, Any], list[str], list[str], dict[str, str]]:
    """:func:`effective_from_files`, and the file that set each keyword (defaults have none)."""
    root = str(root_config_path)
    settings: dict[str, Any] = {}
    files_read: list[str] = []
    problems: list[str] = []
    origins: dict[str, str] = {}
    _read_config(root, os.path.dirname(root) or ".", True, settings, files_read, problems, 0, origins)
    for key, value in DEFAULTS.items():
        settings.setdefault(key, value)
    return settings, files_read, problems, origins


def find_sshd() -> str | None:
    found = shutil.which("sshd")
    if found:
        return found
    return next((p for p in SSHD_CANDIDATES if os.access(p, os.X_OK)), None)


def sshd_running() -> bool:
    """An sshd of this host (one inside a rented container does not count)."""
    return "sshd" in host_process_names()


def socket_activated() -> bool | Unknown:
    """Whether ssh.socket starts sshd (Ubuntu 24.04's layout; optional on Debian)."""
    result = run_command(["systemctl", "is-active", "ssh.socket"], timeout=2.0)
    if isinstance(result, Unknown):
        return result
    state = result.stdout.strip()
    if state in ("active", "inactive", "failed", "activating", "deactivating"):
        return state == "active"
    return Unknown(f"systemctl is-active ssh.socket: {state or result.returncode}")


def collect(ctx: Any) -> dict[str, Any]:
    binary = find_sshd()
    facts: dict[str, Any] = {"installed": binary is not None, "running": sshd_running(),
                             "socket_activated": socket_activated()}
    tried = ""
    if binary is not None:
        result = run_command([binary, "-T"], timeout=2.0)
        if isinstance(result, Unknown):
            tried = result.reason
        elif result.returncode == 0 and result.stdout.strip():
            _settings, files_read, problems, origins = _walk_files(MAIN_CONFIG)
            facts.update(
                source="sshd -T",
                settings=collected(parse_sshd_T(result.stdout)),
                files_read=files_read,
                origins=_origins_fact(origins, problems),
            )
            return facts
        else:
            tried = (result.stderr or result.stdout).strip()[:200] or f"exit {result.returncode}"

    after = f" (sshd -T: {tried})" if tried else ""
    settings, files_read, problems, origins = _walk_files(MAIN_CONFIG)
    facts.update(source="config files", files_read=files_read, origins=_origins_fact(origins, problems))
    if problems:
        # An unreadable drop-in may set any keyword first, so no value can be trusted.
        facts["settings"] = Unknown(f"cannot read the sshd configuration: {'; '.join(problems)}{after}")
    else:
        facts["settings"] = collected(settings)
    return facts


def _origins_fact(origins: dict[str, str], problems: list[str]) -> dict[str, str] | Unknown:
    """The file that sets each collected keyword; unknown when a file could not be read (it may
    set any keyword first)."""
    if problems:
        return Unknown(f"cannot read the sshd configuration: {'; '.join(problems)}")
    return collected(origins)

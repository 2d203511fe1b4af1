"""The check registry: stable ids, metadata, and the outcome a check returns.

A check is a pure function ``(facts, threshold) -> Outcome``. It never touches the system.
Its id (family prefix + number, numbered in steps of 10) is stable across releases: policies,
reports and ``hostcheck explain`` refer to it.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from hostcheck.facts import Unknown, lookup

CheckStatus = Literal["pass", "fail", "unknown", "skipped", "error"]
ThresholdKind = Literal["number", "string", "bool", "list", "none"]

ID_PATTERN = re.compile(r"^(GPU|SYS|PWR|STO|ISO|DOC|SSH|NET|PKG|OWN|PLAT)-\d{4}$")
FAMILIES = {
    "GPU": "GPU",
    "SYS": "System",
    "PWR": "Power and uptime",
    "STO": "Storage",
    "ISO": "Isolation",
    "DOC": "Docker daemon",
    "SSH": "SSH",
    "NET": "Network",
    "PKG": "Packages and updates",
    "OWN": "Owner risk",
    "PLAT": "Platform",
}


@dataclass(frozen=True)
class Outcome:
    status: CheckStatus
    measured: Any = None
    detail: str = ""


def passed(measured: Any, detail: str = "") -> Outcome:
    return Outcome("pass", measured, detail)


def failed(measured: Any, detail: str = "") -> Outcome:
    return Outcome("fail", measured, detail)


def unknown(reason: str, measured: Any = None) -> Outcome:
    return Outcome("unknown", measured, reason)


def skipped(reason: str, measured: Any = None) -> Outcome:
    return Outcome("skipped", measured, reason)


def compare(measured: Any, op: str, threshold: Any, detail: str = "") -> Outcome:
    """Pass/fail by ``op``; the one place comparisons are spelled out."""
    ops: dict[str, Callable[[Any, Any], bool]] = {
        ">=": lambda a, b: a >= b,
        ">": lambda a, b: a > b,
        "<=": lambda a, b: a <= b,
        "<": lambda a, b: a < b,
        "==": lambda a, b: a == b,
        "!=": lambda a, b: a != b,
        "in": lambda a, b: a in b,
    }
    return Outcome("pass" if ops[op](measured, threshold) else "fail", measured, detail)


@dataclass(frozen=True)
class CheckMeta:
    id: str
    title: str
    op: str
    unit: str
    threshold_kind: ThresholdKind
    why: str
    fix: str
    fix_role: str  # "role: variable" in this repo's Ansible profile that fixes it, or ""
    func: Callable[[dict[str, Any], Any], Outcome]

    @property
    def family(self) -> str:
        return FAMILIES[self.id.split("-")[0]]


REGISTRY: dict[str, CheckMeta] = {}


def check(
    check_id: str,
    *,
    title: str,
    op: str,
    unit: str = "",
    threshold: ThresholdKind = "none",
    why: str,
    fix: str,
    fix_role: str = "",
) -> Callable[[Callable[[dict[str, Any], Any], Outcome]], Callable[[dict[str, Any], Any], Outcome]]:
    """Register a check under a stable id (asserted unique and well-formed at import)."""

    def register(func: Callable[[dict[str, Any], Any], Outcome]) -> Callable[[dict[str, Any], Any], Outcome]:
        if not ID_PATTERN.match(check_id):
            raise ValueError(f"check id {check_id!r} does not match {ID_PATTERN.pattern}")
        if check_id in REGISTRY:
            raise ValueError(f"check id {check_id} registered twice")
        REGISTRY[check_id] = CheckMeta(
            check_id, title, op, unit, threshold, why.strip(), fix.strip(), fix_role, func
        )
        return func

    return register


class Missing(Exception):
    """Raised by :func:`need` when a fact is Unknown; turned into an ``unknown`` outcome."""

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(f"{path}: {reason}")
        self.path = path
        self.reason = reason


def need(facts: dict[str, Any], path: str) -> Any:
    """The fact at ``path``, or raise :class:`Missing` so the check reports unknown."""
    value = lookup(facts, path)
    if isinstance(value, Unknown):
        raise Missing(path, value.reason)
    return value


def known_devices(facts: dict[str, Any]) -> list[dict[str, Any]]:
    devices = need(facts, "gpu.devices")
    if not isinstance(devices, list):
        raise Missing("gpu.devices", "not a list")
    return devices


def device_field(device: dict[str, Any], key: str) -> Any:
    value = device.get(key, Unknown(f"GPU field '{key}' not collected"))
    if isinstance(value, Unknown) or value is None:
        reason = value.reason if isinstance(value, Unknown) else "not reported"
        raise Missing(f"gpu.devices[{device.get('index', '?')}].{key}", reason)
    return value


def version_tuple(text: str) -> tuple[int, ...]:
    """'550.54.15' -> (550, 54, 15); non-numeric parts stop the parse."""
    parts: list[int] = []
    for piece in str(text).split("."):
        digits = re.match(r"\d+", piece)
        if not digits:
            break
        parts.append(int(digits.group()))
    if not parts:
        raise Missing("version", f"cannot read a version number from {text!r}")
    return tuple(parts)

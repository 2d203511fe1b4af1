"""--redact: remove what identifies the machine or its people from a finished report.

Redaction runs on the JSON-ready report after judging, so verdicts never depend on it.
Keys that hold identifiers are replaced wholesale; every other string is scrubbed of IP
and MAC addresses and of the host and user names found in the facts.
"""

from __future__ import annotations

import re
from typing import Any

IDENTIFYING_KEYS = {
    "hostname", "serial", "uuid", "mac", "pci_bus_id", "address", "gateway", "mapped_address",
    "host_ip", "user", "home", "path", "container", "server",
}
IPV4 = re.compile(r"\b(?:\d{1,3}\.){3}\d{1,3}\b")
IPV6 = re.compile(r"(?<![\w:])(?:[0-9a-fA-F]{1,4}:){2,7}[0-9a-fA-F]{0,4}(?![\w:])|(?<![\w:])::1(?![\w:])")
MAC = re.compile(r"\b(?:[0-9a-fA-F]{2}[:-]){5}[0-9a-fA-F]{2}\b")
GPU_UUID = re.compile(r"\bGPU-[0-9a-fA-F-]{8,}\b")
MASK = "[redacted]"


def _names(report: dict[str, Any]) -> set[str]:
    """Host and user names to scrub from free text (short names would mangle words)."""
    names: set[str] = set()
    host = report.get("host", {}).get("hostname")
    if isinstance(host, str):
        names.add(host)
    isolation = report.get("facts", {}).get("isolation", {})
    if isinstance(isolation, dict):
        accounts = isolation.get("human_accounts")
        for account in accounts if isinstance(accounts, list) else []:
            if isinstance(account, dict) and isinstance(account.get("name"), str):
                names.add(account["name"])
        for key in ("docker_group_members", "sudo_group_members"):
            members = isolation.get(key)
            if isinstance(members, list):
                names.update(m for m in members if isinstance(m, str))
    return {n for n in names if len(n) >= 3}


def _scrub(text: str, names: set[str]) -> str:
    text = GPU_UUID.sub(MASK, text)
    text = MAC.sub(MASK, text)
    text = IPV4.sub(MASK, text)
    text = IPV6.sub(MASK, text)
    for name in sorted(names, key=len, reverse=True):
        text = re.sub(rf"(?<![\w.-]){re.escape(name)}(?![\w-])", MASK, text)
    return text


def _walk(value: Any, names: set[str], parent_key: str = "") -> Any:
    if isinstance(value, dict):
        if set(value) == {"$unknown"}:
            return {"$unknown": _scrub(str(value["$unknown"]), names)}
        out = {}
        for key, item in value.items():
            identifying = key in IDENTIFYING_KEYS or (key == "name" and parent_key == "human_accounts")
            out[key] = MASK if identifying and item is not None and not isinstance(item, (dict, list)) else _walk(item, names, key)
        return out
    if isinstance(value, list):
        if parent_key in ("docker_group_members", "sudo_group_members", "unreadable_homes"):
            return [MASK for _ in value]
        return [_walk(item, names, parent_key) for item in value]
    if isinstance(value, str):
        return _scrub(value, names)
    return value


def redact(report: dict[str, Any]) -> dict[str, Any]:
    names = _names(report)
    redacted = _walk(report, names)
    redacted["redacted"] = True
    return redacted

"""The facts tree: what collectors measured, and what they could not.

Facts are a plain nested dict (JSON-serialisable) so that a snapshot saved with
``hostcheck facts`` can be judged later with ``hostcheck audit --facts FILE``.
Anything a collector could not determine is an :class:`Unknown` carrying the reason;
in JSON it is written as ``{"$unknown": "reason"}``. Checks never see ``None`` for
"don't know": they see an ``Unknown`` and must report the finding as unknown.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hostcheck import safeio
from hostcheck.fact_paths import UndeclaredFact, check_declared

__all__ = ["UndeclaredFact"]

UNKNOWN_KEY = "$unknown"
FACTS_FORMAT = 1
"""Version of the facts layout; bumped when a key changes meaning."""


@dataclass(frozen=True)
class Unknown:
    """A fact that could not be determined, and why (never a silent pass)."""

    reason: str

    def __bool__(self) -> bool:  # an Unknown must never read as a truthy "yes"
        return False


class FactsError(ValueError):
    """A facts snapshot that cannot be used (bad JSON, wrong shape, wrong version)."""


def lookup(facts: Any, path: str) -> Any:
    """Return the value at a dotted ``path`` or an :class:`Unknown` saying where it stops.

    Integer components index lists (``gpu.devices.0.name``). An ``Unknown`` found on the
    way is returned as is, so its reason reaches the finding. A path that
    :mod:`hostcheck.fact_paths` does not declare raises :class:`UndeclaredFact` (a typo in the
    caller, not a fact that was not collected).
    """
    check_declared(path)
    node = facts
    walked: list[str] = []
    for part in path.split("."):
        if isinstance(node, Unknown):
            return node
        if isinstance(node, dict):
            if part not in node:
                where = ".".join(walked) or "facts"
                return Unknown(f"{where} has no '{part}' (not collected)")
            node = node[part]
        elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        else:
            return Unknown(f"'{'.'.join(walked + [part])}' is not present")
        walked.append(part)
    return node


def to_jsonable(value: Any) -> Any:
    """Facts -> JSON-ready data (``Unknown`` becomes ``{"$unknown": reason}``)."""
    if isinstance(value, Unknown):
        return {UNKNOWN_KEY: value.reason}
    if isinstance(value, dict):
        return {str(k): to_jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [to_jsonable(v) for v in value]
    return value


def from_jsonable(value: Any) -> Any:
    """JSON data -> facts (``{"$unknown": reason}`` becomes ``Unknown``)."""
    if isinstance(value, dict):
        if set(value) == {UNKNOWN_KEY}:
            return Unknown(str(value[UNKNOWN_KEY]))
        return {k: from_jsonable(v) for k, v in value.items()}
    if isinstance(value, list):
        return [from_jsonable(v) for v in value]
    return value


BOOLEAN_FACTS = frozenset("""
meta.offline gpu.nvml.available gpu.devices.*.display_active gpu.devices.*.ecc_enabled
gpu.devices.*.is_laptop gpu.devices.*.mig_mode gpu.devices.*.persistence_mode
system.cpu_avx system.iommu_enabled system.kvm_device system.secure_boot
power.battery_present power.on_ac
storage.root.encrypted storage.root.rotational storage.home.encrypted storage.swap.*.encrypted
storage.filesystems.*.encrypted storage.filesystems.*.rotational storage.docker_root.encrypted
storage.docker_root.exists storage.docker_root.rotational storage.docker_root.separate_mount
storage.docker_root.xfs_project_quota
isolation.apparmor_enabled isolation.graphical_session
docker.reachable docker.apparmor docker.icc docker.live_restore docker.no_new_privileges
docker.nvidia_runtime docker.rootless docker.seccomp docker.userland_proxy docker.userns_remap
ssh.installed ssh.running packages.unattended_upgrades.enabled packages.unattended_upgrades.installed
network.ipv6_global network.interfaces.*.up network.firewall.readable
network.firewall.docker_user_chain_filters network.container_egress.bridges_assumed
network.inbound.probed network.nat.hairpinning network.path.hops.*.reached
""".split())
"""Facts that are true or false (or unknown): a snapshot from someone else holding "false" or 0
there would read as the opposite in a check, so it is refused instead."""


def _check_booleans(data: Any) -> str | None:
    """The first boolean fact holding something else, as 'field: reason'; None when all are fine."""
    stack: list[tuple[Any, tuple[str, ...]]] = [(data, ())]
    while stack:
        node, path = stack.pop()
        if isinstance(node, dict):
            if UNKNOWN_KEY in node:
                continue
            stack.extend((value, (*path, str(key))) for key, value in node.items())
        elif isinstance(node, list):
            stack.extend((value, (*path, "*")) for value in node)
        elif ".".join(path) in BOOLEAN_FACTS and not (node is None or isinstance(node, bool)):
            shown = repr(node) if len(repr(node)) <= 40 else repr(node)[:40] + "..."
            return f"{'.'.join(path)}: must be true or false, not {type(node).__name__} {shown}"
    return None


def load_snapshot(path: Path) -> dict[str, Any]:
    """Read a facts snapshot written by ``hostcheck facts`` (or by hand, for tests).

    Raises :class:`FactsError` with the file and the reason for anything unusable.
    """
    try:
        data = safeio.load_json(path)
    except safeio.InputError as exc:
        raise FactsError(f"{path}: {exc}") from exc
    if not isinstance(data, dict):
        raise FactsError(f"{path}: a facts snapshot is a JSON object, not {type(data).__name__}")
    # A full report (hostcheck audit --format json) carries its facts under "facts".
    if "facts" in data and isinstance(data["facts"], dict) and "report_version" in data:
        data = data["facts"]
    meta = data.get("meta")
    if not isinstance(meta, dict):
        raise FactsError(f"{path}: missing 'meta' object (is this a hostcheck facts file?)")
    fmt = meta.get("facts_format")
    if type(fmt) is not int or fmt != FACTS_FORMAT:  # true == 1 and 1.0 == 1 are not format 1
        kind = " (a boolean, not a number)" if isinstance(fmt, bool) else ""
        raise FactsError(
            f"{path}: meta.facts_format is {fmt!r}{kind}; this hostcheck reads format {FACTS_FORMAT}"
        )
    for key, section in data.items():
        if not isinstance(section, dict):
            raise FactsError(f"{path}: section '{key}' must be an object, not {type(section).__name__}")
    wrong = _check_booleans(data)
    if wrong:
        raise FactsError(f"{path}: {wrong}")
    return from_jsonable(data)

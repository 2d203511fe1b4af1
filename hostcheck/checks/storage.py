"""Storage checks (STO-*): free space where container data lands, SSD, Docker's data root."""

from __future__ import annotations

from typing import Any

from hostcheck.checks.base import (
    CheckResult,
    Missing,
    Outcome,
    check,
    compare,
    failed,
    need,
    passed,
    unknown,
)
from hostcheck.checks.machine import gpu_count
from hostcheck.facts import Unknown, lookup

_DOCKER_ROOT = "storage.docker_root"


def _docker_or_root(facts: dict[str, Any]) -> tuple[dict[str, Any], str]:
    """Where container data lands: Docker's data root if it exists, else the root filesystem."""
    docker = lookup(facts, _DOCKER_ROOT)
    if isinstance(docker, dict):
        exists = need(facts, f"{_DOCKER_ROOT}.exists")  # not known: the root filesystem is no stand-in
        if exists is True:
            return docker, f"Docker data root {docker.get('path')}"
    root = need(facts, "storage.root")
    return root, "root filesystem (no Docker data root yet)"


def _free_space(facts: dict[str, Any]) -> tuple[float, str]:
    where, label = _docker_or_root(facts)
    free = where.get("free_gib")
    if isinstance(free, Unknown) or free is None:
        raise Missing("storage.free_gib", f"free space of the {label} unknown")
    return float(free), f"{float(free):.0f} GiB free on the {label}"


@check(
    "STO-1010",
    title="Free disk space for containers",
    op=">=",
    unit="GiB",
    threshold="number",
    why="Customers' images and datasets are large; a full disk fails jobs and can stop the host.",
    fix="Give Docker a dedicated SSD or free space on the disk that holds container data.",
    fix_role="docker_host: docker_host_data_device",
)
def free_space(facts: dict[str, Any], threshold: Any) -> CheckResult:
    free, text = _free_space(facts)
    return compare(round(free, 1), threshold, text)


@check(
    "STO-1060",
    title="Free disk space for containers, per GPU",
    op=">=",
    unit="GiB/GPU",
    threshold="number",
    why="Each rented GPU brings its own images and datasets; platforms size disk per GPU.",
    fix="Give Docker a dedicated SSD sized for every GPU in the machine.",
    fix_role="docker_host: docker_host_data_device",
)
def free_space_per_gpu(facts: dict[str, Any], threshold: Any) -> CheckResult:
    free, text = _free_space(facts)
    return compare(round(free / gpu_count(facts), 1), threshold, text)


@check(
    "STO-1020",
    title="Container storage on SSD",
    op="==",
    threshold="none",
    why="Image pulls and dataset reads on a spinning disk make jobs slow to start; platforms ask for SSD.",
    fix="Put Docker's data root on an SSD/NVMe drive.",
    fix_role="docker_host: docker_host_data_device",
)
def storage_ssd(facts: dict[str, Any], _threshold: Any) -> Outcome:
    where, label = _docker_or_root(facts)
    rotational = where.get("rotational")
    if isinstance(rotational, Unknown) or rotational is None:
        return unknown(f"whether the {label} is rotational is unknown")
    return failed("HDD", label) if rotational else passed("SSD", label)


@check(
    "STO-1030",
    title="Docker data root on XFS with project quota",
    op="==",
    threshold="none",
    why="Per-container disk limits (--storage-opt size) need overlay2 on XFS with prjquota; "
    "without them one job can fill the disk. Vast's docs require it.",
    fix="Give Docker a dedicated drive formatted XFS, mounted by UUID with prjquota,nofail.",
    fix_role="docker_host: docker_host_data_device",
)
def docker_xfs_quota(facts: dict[str, Any], _threshold: Any) -> Outcome:
    docker = need(facts, _DOCKER_ROOT)
    if need(facts, f"{_DOCKER_ROOT}.exists") is not True:
        return failed("no Docker data root", str(docker.get("path")))
    fstype = docker.get("fstype")
    quota = docker.get("xfs_project_quota")
    if isinstance(fstype, Unknown) or isinstance(quota, Unknown):
        return unknown("filesystem of the Docker data root unknown")
    measured = f"{fstype}" + (" with prjquota" if quota else "")
    return passed(measured) if fstype == "xfs" and quota else failed(measured)


@check(
    "STO-1040",
    title="Docker data on its own filesystem",
    op="==",
    threshold="none",
    why="If containers fill the root filesystem, the host's own services fail; a dedicated "
    "volume confines that damage.",
    fix="Mount a dedicated drive at Docker's data root.",
    fix_role="docker_host: docker_host_data_device",
)
def docker_separate(facts: dict[str, Any], _threshold: Any) -> Outcome:
    docker = need(facts, _DOCKER_ROOT)
    if need(facts, f"{_DOCKER_ROOT}.exists") is not True:
        return failed("no Docker data root", str(docker.get("path")))
    separate = docker.get("separate_mount")
    if isinstance(separate, Unknown) or separate is None:
        return unknown("whether the Docker data root is a separate mount is unknown")
    return passed("separate mount") if separate else failed("on the root filesystem")


@check(
    "STO-1050",
    title="Free space on the root filesystem",
    op=">=",
    unit="GiB",
    threshold="number",
    why="Logs, driver updates and the agent live on /; a full root filesystem stops the host.",
    fix="Free space on / or move Docker's data root off it.",
)
def root_free(facts: dict[str, Any], threshold: Any) -> CheckResult:
    return compare(round(float(need(facts, "storage.root.free_gib")), 1), threshold)

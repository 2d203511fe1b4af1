"""Storage checks (STO-*): free space where container data lands, SSD, Docker's data root."""

from __future__ import annotations

from typing import Any

from hostcheck.checks.base import CheckResult, Outcome, check, compare, failed, family, need, passed, skipped, unknown
from hostcheck.checks.readers import gpu_count
from hostcheck.errors import Missing
from hostcheck.facts import Unknown, lookup

STO = family("STO", "Storage", order=40)

_DOCKER_ROOT = "storage.docker_root"
_ROOT = "storage.root"


def _docker_or_root(facts: dict[str, Any]) -> tuple[dict[str, Any], str]:
    """Where container data lands: Docker's data root if it exists, else the root filesystem."""
    docker = lookup(facts, _DOCKER_ROOT)
    if isinstance(docker, Unknown):  # not read: the root filesystem is no stand-in
        need(facts, _DOCKER_ROOT)
    if isinstance(docker, dict):
        exists = need(facts, f"{_DOCKER_ROOT}.exists")  # not known: the root filesystem is no stand-in
        if exists is True:
            return docker, f"Docker data root {docker.get('path')}"
    root = need(facts, _ROOT)
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


def _mounted_at(facts: dict[str, Any], path: str) -> dict[str, Any] | None:
    """The filesystem (of ``storage.filesystems``) whose mount point holds ``path``: the longest
    mount point that is the path or one of its parents."""
    best: dict[str, Any] | None = None
    filesystems = lookup(facts, "storage.filesystems")
    for fs in filesystems if isinstance(filesystems, list) else []:
        mountpoint = fs.get("mountpoint") if isinstance(fs, dict) else None
        if not isinstance(mountpoint, str):
            continue
        inside = path == mountpoint or path.startswith(mountpoint.rstrip("/") + "/")
        if inside and (best is None or len(mountpoint) > len(str(best.get("mountpoint")))):
            best = fs
    return best


def _capacity(facts: dict[str, Any]) -> tuple[float, str]:
    """The size of the filesystem where container data lands. A file saved before the data
    root's own size was recorded is read from the filesystem list (or the root filesystem,
    when the data root shares it)."""
    where, label = _docker_or_root(facts)
    size = where.get("size_gib")
    if (size is None or isinstance(size, Unknown)) and where is not lookup(facts, _ROOT):
        if where.get("separate_mount") is False:
            size = lookup(facts, f"{_ROOT}.size_gib")
        elif isinstance(where.get("path"), str):
            fs = _mounted_at(facts, where["path"])
            size = fs.get("size_gib") if fs is not None else None
    if isinstance(size, Unknown) or size is None:
        raise Missing("storage.docker_root.size_gib", f"size of the {label} unknown")
    return float(size), f"{float(size):.0f} GiB on the {label}"


@check(
    "STO-1060",
    title="Free disk space for containers, per GPU",
    op=">=",
    unit="GiB/GPU",
    threshold="number",
    why="Each rented GPU brings its own images and datasets; the space a renter can be offered "
    "is what is free where container data lands, not the size of the disk.",
    fix="Free space on the disk that holds Docker's data root, or give Docker a dedicated SSD "
    "sized for every GPU in the machine.",
    fix_role="docker_host: docker_host_data_device",
)
def free_space_per_gpu(facts: dict[str, Any], threshold: Any) -> CheckResult:
    free, text = _free_space(facts)
    return compare(round(free / gpu_count(facts), 1), threshold, text)


@check(
    "STO-1110",
    title="Disk capacity for containers, per GPU",
    op=">=",
    unit="GiB/GPU",
    threshold="number",
    why="Platforms size the SSD that holds container data per GPU: a disk smaller than that "
    "cannot hold each renter's images and datasets, however much of it is free.",
    fix="Give Docker a dedicated SSD sized for every GPU in the machine.",
    fix_role="docker_host: docker_host_data_device",
)
def capacity_per_gpu(facts: dict[str, Any], threshold: Any) -> CheckResult:
    size, text = _capacity(facts)
    return compare(round(size / gpu_count(facts), 1), threshold, text)


@check(
    "STO-1120",
    title="Disk capacity for containers",
    op=">=",
    unit="GiB",
    threshold="number",
    why="Platforms that name a disk size for the machine mean the drive that holds container "
    "data: a smaller one cannot hold the images and models a job brings, however much is free.",
    fix="Give Docker a dedicated SSD of at least the size the platform names.",
    fix_role="docker_host: docker_host_data_device",
)
def capacity(facts: dict[str, Any], threshold: Any) -> CheckResult:
    size, text = _capacity(facts)
    return compare(round(size, 1), threshold, text)


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


_DRIVES = "storage.smart.drives"
DriveVerdict = tuple[str, str]
"""(pass | fail | unknown | n/a, what was read) for one drive."""


def _judge_drives(facts: dict[str, Any], judge: Any, what: str) -> Outcome:
    """Judge every real drive smartctl read: one failing drive fails the check, an unreadable
    one makes it unknown (never a pass), drives the check does not apply to are left out, and
    an emulated drive answers for the emulation only."""
    drives = need(facts, _DRIVES)
    verdicts: dict[str, list[str]] = {"pass": [], "fail": [], "unknown": [], "n/a": []}
    emulated = []
    for drive in drives:
        name = str(drive.get("device"))
        if isinstance(drive.get("emulated_by"), str):
            emulated.append(f"{name} (emulated by {drive['emulated_by']})")
            continue
        status, text = judge(drive)
        verdicts[status].append(f"{name}: {text}")
    if verdicts["fail"]:
        return failed("; ".join(verdicts["fail"]), "; ".join(verdicts["unknown"]))
    if verdicts["unknown"]:
        return unknown("; ".join(verdicts["unknown"]))
    if verdicts["pass"]:
        return passed("; ".join(verdicts["pass"]))
    if emulated:
        return unknown(f"only emulated drives ({', '.join(emulated)}): their SMART data describes the emulation, "
                       "not the storage behind it")
    return skipped(f"no {what} among the drives smartctl read")


def _fields(drive: dict[str, Any], *names: str) -> list[Any] | str:
    """The drive's values of ``names``, or the reason the first unknown one is unknown."""
    values = [drive.get(n) for n in names]
    for value in values:
        if isinstance(value, Unknown):
            return value.reason
    return values


def _warning(drive: dict[str, Any]) -> DriveVerdict:
    if drive.get("protocol") == "NVMe":
        got = _fields(drive, "critical_warning")
        if isinstance(got, str):
            return "unknown", got
        return ("pass", "critical warning 0x00") if got[0] == 0 else ("fail", f"critical warning 0x{got[0]:02x}")
    passed_ = drive.get("passed")
    if isinstance(passed_, Unknown):
        return "unknown", passed_.reason
    return ("pass", "SMART PASSED") if passed_ else ("fail", "SMART FAILED")


@check(
    "STO-1070",
    title="Drives raise no health warning",
    op="==",
    threshold="none",
    requirement="every drive must report no critical warning (NVMe) and SMART PASSED",
    why="The warning is the drive's own alarm (spare used up, overheating, reliability degraded, "
    "read-only media); a failing drive fails jobs and corrupts renters' data before it stops.",
    fix="Back up, unlist the machine and replace the drive (`sudo smartctl -x DEVICE` says which warning).",
)
def drive_warning(facts: dict[str, Any], _threshold: Any) -> Outcome:
    return _judge_drives(facts, _warning, "drive")


def _protocol_unknown(drive: dict[str, Any]) -> str | None:
    protocol = drive.get("protocol")
    return protocol.reason if isinstance(protocol, Unknown) else None


def _spare(drive: dict[str, Any]) -> DriveVerdict:
    if (why := _protocol_unknown(drive)) is not None:
        return "unknown", why
    if drive.get("protocol") != "NVMe":
        return "n/a", ""
    got = _fields(drive, "available_spare", "available_spare_threshold")
    if isinstance(got, str):
        return "unknown", got
    spare, floor = got
    verdict = "pass" if spare >= floor else "fail"
    return verdict, f"spare {spare} % (threshold {floor} %)"


@check(
    "STO-1080",
    title="NVMe spare capacity above its threshold",
    op="==",
    threshold="none",
    requirement="each NVMe drive's available spare must be at or above the threshold its maker set",
    why="Spare blocks replace failing ones; below the maker's threshold the drive is running out of "
    "room to hide its wear.",
    fix="Plan the drive's replacement now; back up what it holds.",
)
def nvme_spare(facts: dict[str, Any], _threshold: Any) -> Outcome:
    return _judge_drives(facts, _spare, "NVMe drive")


def _errors(drive: dict[str, Any]) -> DriveVerdict:
    if (why := _protocol_unknown(drive)) is not None:
        return "unknown", why
    names = {"NVMe": ("media_errors",), "ATA": ("reallocated_sectors", "pending_sectors")}.get(str(drive.get("protocol")))
    if names is None:
        return "n/a", ""
    got = _fields(drive, *names)
    if isinstance(got, str):
        return "unknown", got
    text = ", ".join(f"{n.replace('_', ' ')} {v}" for n, v in zip(names, got, strict=True))
    return ("pass" if not any(got) else "fail"), text


@check(
    "STO-1090",
    title="No media errors or bad sectors",
    op="==",
    threshold="none",
    requirement="NVMe media errors, and SATA reallocated and pending sectors, must be 0",
    why="Each is data the drive could not read back or had to move; a count above zero on a drive "
    "holding renters' data means it is corrupting data, whatever its overall verdict says.",
    fix="Back up and replace the drive; watch the count between checks (`sudo smartctl -x DEVICE`).",
)
def drive_errors(facts: dict[str, Any], _threshold: Any) -> Outcome:
    return _judge_drives(facts, _errors, "NVMe or SATA drive")


@check(
    "STO-1100",
    title="NVMe drive's rated endurance left",
    op="<",
    unit="% used",
    threshold="number",
    requirement="each NVMe drive's percentage used must be below the threshold",
    why="Percentage used is the maker's estimate of rated endurance consumed: not a failure on its "
    "own, but the time to plan a replacement.",
    fix="Plan the drive's replacement before it reaches its rated endurance.",
)
def nvme_wear(facts: dict[str, Any], threshold: Any) -> CheckResult:
    drives = need(facts, _DRIVES)
    used: list[tuple[int, str]] = []
    for drive in drives:
        if (why := _protocol_unknown(drive)) is not None:
            return unknown(why)
        if drive.get("protocol") != "NVMe" or isinstance(drive.get("emulated_by"), str):
            continue
        value = drive.get("percentage_used")
        if isinstance(value, Unknown):
            return unknown(value.reason)
        used.append((int(value), str(drive.get("device"))))
    if not used:
        return skipped("no real NVMe drive among the drives smartctl read")
    worst, name = max(used)
    return compare(worst, threshold, f"{name} has used {worst} % of its rated endurance")
